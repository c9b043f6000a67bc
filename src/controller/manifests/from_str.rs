//! APIServices from a string, for programs that keep their manifests in memory.

use std::path::Path;

use super::{parse_file, ManifestError};
use crate::api::{APIService, DEFAULT_LABEL_KEY};

/// The APIServices declared in `text` — YAML (one or more documents) or JSON, `List`s
/// expanded — decoded and checked exactly as manifest files are. Errors name `<string>`
/// as the file, with the line.
///
/// ```
/// let objs = autoregister::parse_api_services(
///     "apiVersion: apiregistration.k8s.io/v1
/// kind: APIService
/// metadata:
///   name: v1alpha1.example.com
/// spec:
///   group: example.com
///   version: v1alpha1
///   groupPriorityMinimum: 1000
///   versionPriority: 15
///   service: {namespace: example, name: api, port: 443}
///   insecureSkipTLSVerify: true
/// ",
/// )
/// .unwrap();
/// assert_eq!(objs[0].metadata.name.as_deref(), Some("v1alpha1.example.com"));
/// ```
pub fn parse_api_services(text: &str) -> Result<Vec<APIService>, Vec<ManifestError>> {
    // The label key only chooses a sync mode, which the caller picks by the method it
    // registers the object with; the object itself is returned as written.
    let manifests = parse_file(Path::new("<string>"), text, DEFAULT_LABEL_KEY)?;
    Ok(manifests
        .into_iter()
        .map(|m| APIService::clone(&m.desired.object))
        .collect())
}
