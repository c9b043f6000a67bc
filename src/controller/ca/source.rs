//! Where an APIService's CA bundle comes from: the `autoregister.dev/inject-ca-from-*`
//! annotations, parsed.

use std::fmt;
use std::path::PathBuf;

use crate::api::APIService;

/// Annotation naming a Secret: `NAMESPACE/NAME[:KEY]` (key `ca.crt` by default).
pub const INJECT_CA_FROM_SECRET: &str = "autoregister.dev/inject-ca-from-secret";
/// Annotation naming a ConfigMap: `NAMESPACE/NAME[:KEY]` (key `ca.crt` by default).
pub const INJECT_CA_FROM_CONFIGMAP: &str = "autoregister.dev/inject-ca-from-configmap";
/// Annotation naming a file: an absolute path (a mounted Secret or ConfigMap).
pub const INJECT_CA_FROM_FILE: &str = "autoregister.dev/inject-ca-from-file";
/// The key read when a reference names none (cert-manager's and `kubernetes.io/tls`'s).
pub const DEFAULT_CA_KEY: &str = "ca.crt";

/// A source of a CA bundle.
///
/// Named on an APIService by an annotation; the controller then keeps `spec.caBundle`
/// equal to the source's PEM certificates as it rotates, and never writes a bundle from a
/// source that is missing or holds no certificate.
///
/// # Example
///
/// ```
/// use autoregister::{APIService, APIServiceSpec, CaSource};
///
/// let mut api = APIService::new("v1alpha1.example.com", APIServiceSpec::default());
/// let source = CaSource::Secret {
///     namespace: "example".into(),
///     name: "example-apiserver-tls".into(),
///     key: "ca.crt".into(),
/// };
/// source.annotate(&mut api);
/// // The annotation `autoregister.dev/inject-ca-from-secret: example/example-apiserver-tls:ca.crt`:
/// assert_eq!(CaSource::of(&api), Ok(Some(source)));
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CaSource {
    /// One key of a Secret.
    Secret {
        /// Namespace of the Secret.
        namespace: String,
        /// Name of the Secret.
        name: String,
        /// Key in `data`.
        key: String,
    },
    /// One key of a ConfigMap (`data`, else `binaryData`).
    ConfigMap {
        /// Namespace of the ConfigMap.
        namespace: String,
        /// Name of the ConfigMap.
        name: String,
        /// Key in `data` or `binaryData`.
        key: String,
    },
    /// A file, re-read when it changes (a kubelet volume's `..data` swap included).
    File(PathBuf),
}

impl CaSource {
    /// The source an APIService's annotations name: `Ok(None)` when none does; an error
    /// names the annotation and what is wrong (two sources, a malformed reference).
    pub fn of(obj: &APIService) -> Result<Option<CaSource>, String> {
        let Some(annotations) = obj.metadata.annotations.as_ref() else {
            return Ok(None);
        };
        let mut found = Vec::new();
        for key in [
            INJECT_CA_FROM_SECRET,
            INJECT_CA_FROM_CONFIGMAP,
            INJECT_CA_FROM_FILE,
        ] {
            if let Some(v) = annotations.get(key) {
                found.push((key, v));
            }
        }
        match found.as_slice() {
            [] => Ok(None),
            [(key, value)] => CaSource::parse(key, value)
                .map(Some)
                .map_err(|e| format!("annotation {key}: {e}")),
            _ => Err(format!(
                "annotations {} name more than one CA source; keep one",
                found
                    .iter()
                    .map(|(k, _)| *k)
                    .collect::<Vec<_>>()
                    .join(" and ")
            )),
        }
    }

    /// Parses the value of annotation `key`.
    pub fn parse(key: &str, value: &str) -> Result<CaSource, String> {
        let value = value.trim();
        if key == INJECT_CA_FROM_FILE {
            if !value.starts_with('/') {
                return Err(format!("{value:?} is not an absolute path"));
            }
            return Ok(CaSource::File(PathBuf::from(value)));
        }
        let (reference, data_key) = match value.split_once(':') {
            Some((r, k)) => (r, k),
            None => (value, DEFAULT_CA_KEY),
        };
        let Some((namespace, name)) = reference.split_once('/') else {
            return Err(format!("{value:?} is not NAMESPACE/NAME[:KEY]"));
        };
        for (what, v) in [("namespace", namespace), ("name", name)] {
            if !dns_subdomain(v) {
                return Err(format!(
                    "{value:?}: {what} {v:?} is not a valid Kubernetes object name"
                ));
            }
        }
        let key_ok = !data_key.is_empty()
            && data_key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !key_ok {
            return Err(format!(
                "{value:?}: key {data_key:?} is not a valid data key"
            ));
        }
        let (namespace, name, key_) = (namespace.into(), name.into(), data_key.into());
        Ok(if key == INJECT_CA_FROM_SECRET {
            CaSource::Secret {
                namespace,
                name,
                key: key_,
            }
        } else {
            CaSource::ConfigMap {
                namespace,
                name,
                key: key_,
            }
        })
    }

    /// The annotation (key, value) naming this source, for embedders that build objects.
    pub fn annotation(&self) -> (&'static str, String) {
        match self {
            CaSource::Secret {
                namespace,
                name,
                key,
            } => (INJECT_CA_FROM_SECRET, format!("{namespace}/{name}:{key}")),
            CaSource::ConfigMap {
                namespace,
                name,
                key,
            } => (
                INJECT_CA_FROM_CONFIGMAP,
                format!("{namespace}/{name}:{key}"),
            ),
            CaSource::File(p) => (INJECT_CA_FROM_FILE, p.display().to_string()),
        }
    }

    /// Names this source on `obj` (replacing any other source annotation).
    pub fn annotate(&self, obj: &mut APIService) {
        let annotations = obj
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        for k in [
            INJECT_CA_FROM_SECRET,
            INJECT_CA_FROM_CONFIGMAP,
            INJECT_CA_FROM_FILE,
        ] {
            annotations.remove(k);
        }
        let (k, v) = self.annotation();
        annotations.insert(k.to_string(), v);
    }
}

impl fmt::Display for CaSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaSource::Secret {
                namespace,
                name,
                key,
            } => write!(f, "Secret {namespace}/{name} key {key}"),
            CaSource::ConfigMap {
                namespace,
                name,
                key,
            } => write!(f, "ConfigMap {namespace}/{name} key {key}"),
            CaSource::File(p) => write!(f, "file {}", p.display()),
        }
    }
}

/// Checks what a manifest says about its CA: a valid source annotation, and not both a
/// source and a literal `caBundle` (or `insecureSkipTLSVerify`).
pub fn check_manifest(obj: &APIService) -> Result<(), String> {
    let Some(source) = CaSource::of(obj)? else {
        return Ok(());
    };
    let (annotation, _) = source.annotation();
    if obj.spec.ca_bundle.is_some() {
        return Err(format!(
            "spec.caBundle and annotation {annotation} both set the CA bundle; keep one"
        ));
    }
    if obj.spec.insecure_skip_tls_verify {
        return Err(format!(
            "spec.insecureSkipTLSVerify and annotation {annotation} contradict each other; \
             drop insecureSkipTLSVerify"
        ));
    }
    if obj.spec.service.is_none() {
        return Err(format!(
            "annotation {annotation} on an APIService without spec.service: a local API has no CA"
        ));
    }
    Ok(())
}

/// RFC 1123 subdomain: what Secret, ConfigMap and Namespace names are.
fn dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotated(pairs: &[(&str, &str)]) -> APIService {
        let mut o = APIService::default();
        o.metadata.annotations = Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        o
    }

    #[test]
    fn references_parse_with_default_and_explicit_keys() {
        let s = CaSource::of(&annotated(&[(INJECT_CA_FROM_SECRET, "certs/api-tls")]))
            .unwrap()
            .unwrap();
        assert_eq!(s.to_string(), "Secret certs/api-tls key ca.crt");
        let c = CaSource::of(&annotated(&[(
            INJECT_CA_FROM_CONFIGMAP,
            "openshift-config/service-ca:service-ca.crt",
        )]))
        .unwrap()
        .unwrap();
        assert_eq!(
            c.to_string(),
            "ConfigMap openshift-config/service-ca key service-ca.crt"
        );
        let f = CaSource::of(&annotated(&[(INJECT_CA_FROM_FILE, "/etc/ca/ca.crt")]))
            .unwrap()
            .unwrap();
        assert_eq!(f, CaSource::File("/etc/ca/ca.crt".into()));
        assert_eq!(CaSource::of(&APIService::default()), Ok(None));
        let mut o = APIService::default();
        s.annotate(&mut o);
        assert_eq!(CaSource::of(&o), Ok(Some(s)));
    }

    #[test]
    fn malformed_references_name_the_annotation() {
        for (k, v, want) in [
            (
                INJECT_CA_FROM_SECRET,
                "api-tls",
                "is not NAMESPACE/NAME[:KEY]",
            ),
            (
                INJECT_CA_FROM_SECRET,
                "certs/API",
                "not a valid Kubernetes object name",
            ),
            (INJECT_CA_FROM_CONFIGMAP, "a/b:", "is not a valid data key"),
            (INJECT_CA_FROM_FILE, "ca.crt", "not an absolute path"),
        ] {
            let e = CaSource::of(&annotated(&[(k, v)])).unwrap_err();
            assert!(e.contains(k) && e.contains(want), "{e}");
        }
        let e = CaSource::of(&annotated(&[
            (INJECT_CA_FROM_SECRET, "a/b"),
            (INJECT_CA_FROM_FILE, "/x"),
        ]))
        .unwrap_err();
        assert!(e.contains("more than one CA source"), "{e}");
    }

    #[test]
    fn a_literal_bundle_with_a_source_is_an_error_naming_both() {
        let mut o = annotated(&[(INJECT_CA_FROM_SECRET, "a/b")]);
        o.spec.service = Some(Default::default());
        assert_eq!(check_manifest(&o), Ok(()));
        o.spec.ca_bundle = Some(b"x".to_vec().into_boxed_slice());
        let e = check_manifest(&o).unwrap_err();
        assert!(
            e.contains("spec.caBundle") && e.contains(INJECT_CA_FROM_SECRET),
            "{e}"
        );
    }
}
