//! The rules kube-apiserver applies to an APIService (kube-aggregator's
//! `pkg/apis/apiregistration/validation.ValidateAPIService` and the apimachinery name and
//! metadata rules it calls), shared by the manifest loader and the test server.

use std::fmt;

use serde_json::{json, Value};

use super::label::validate_label_key;
use super::APIService;

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
/// `TotalAnnotationSizeLimitB`: keys and values of all annotations together.
const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;

/// One field the server would refuse, as apimachinery's `field.Error`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldIssue {
    /// JSON path, e.g. `spec.group`.
    pub field: String,
    /// The offending value; `None` for a missing one (`Required value`).
    pub value: Option<Value>,
    /// Why, in the server's words.
    pub detail: String,
}

impl FieldIssue {
    fn required(field: &str, detail: &str) -> Self {
        FieldIssue {
            field: field.to_string(),
            value: None,
            detail: detail.to_string(),
        }
    }

    fn invalid(field: &str, value: Value, detail: &str) -> Self {
        FieldIssue {
            field: field.to_string(),
            value: Some(value),
            detail: detail.to_string(),
        }
    }

    /// The text after the field: `Required value[: detail]` or `Invalid value: V: detail`.
    pub fn message(&self) -> String {
        match &self.value {
            None if self.detail.is_empty() => "Required value".to_string(),
            None => format!("Required value: {}", self.detail),
            Some(v) => {
                // Go's `%#v`: strings quoted, numbers and booleans bare.
                let shown = match v {
                    Value::String(s) => format!("{s:?}"),
                    other => other.to_string(),
                };
                format!("Invalid value: {shown}: {}", self.detail)
            }
        }
    }
}

/// `field: message`, as the server lists its causes.
impl fmt::Display for FieldIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

/// `IsDNS1123Subdomain`: the messages for `s`, empty when valid.
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !s.split('.').all(dns1123_label_ok) {
        errs.push(DNS1123_SUBDOMAIN_MSG.to_string());
    }
    errs
}

fn dns1123_label_ok(l: &str) -> bool {
    !l.is_empty()
        && l.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !l.starts_with('-')
        && !l.ends_with('-')
}

/// `IsDNS1123Label` (a Namespace's name): the messages for `s`, empty when valid.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !dns1123_label_ok(s) {
        errs.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errs
}

/// `IsDNS1035Label` (an APIService version, a Service's name): the messages for `s`, empty
/// when valid.
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let ok = s.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.ends_with('-');
    if !ok {
        errs.push(DNS1035_LABEL_MSG.to_string());
    }
    errs
}

/// `content.IsPathSegmentName`: a name that can be a URL path segment.
fn path_segment_name(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    let mut errs = Vec::new();
    for bad in ["/", "%"] {
        if name.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

/// `IsValidLabelValue`.
fn label_value(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let ok = v.is_empty()
        || (alnum(v.chars().next())
            && alnum(v.chars().last())
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')));
    if !ok {
        errs.push(LABEL_VALUE_MSG.to_string());
    }
    errs
}

/// `ValidateObjectMeta`'s label and annotation rules (a cluster-scoped object's
/// namespace is cleared by the server, not refused).
fn validate_metadata(svc: &APIService, errs: &mut Vec<FieldIssue>) {
    if let Some(labels) = &svc.metadata.labels {
        for (k, v) in labels.iter() {
            if let Err(e) = validate_label_key(k) {
                errs.push(FieldIssue::invalid("metadata.labels", json!(k), &e));
            }
            for m in label_value(v) {
                errs.push(FieldIssue::invalid("metadata.labels", json!(v), &m));
            }
        }
    }
    if let Some(annotations) = &svc.metadata.annotations {
        let mut total = 0;
        for (k, v) in annotations.iter() {
            if let Err(e) = validate_label_key(&k.to_ascii_lowercase()) {
                errs.push(FieldIssue::invalid("metadata.annotations", json!(k), &e));
            }
            total += k.len() + v.len();
        }
        if total > TOTAL_ANNOTATION_SIZE {
            errs.push(FieldIssue {
                field: "metadata.annotations".into(),
                value: None,
                detail: format!("Too long: must have at most {TOTAL_ANNOTATION_SIZE} bytes"),
            });
        }
    }
}

/// `ValidateAPIService`: every rule kube-apiserver checks on create and update, in its order.
pub fn validate_apiservice(svc: &APIService) -> Vec<FieldIssue> {
    let spec = &svc.spec;
    let name = svc.metadata.name.as_deref().unwrap_or_default();
    let mut errs = Vec::new();
    // `version.group`, compared without building it (this runs for every manifest).
    let is_required_name = name.len() == spec.version.len() + 1 + spec.group.len()
        && name.starts_with(&*spec.version)
        && name[spec.version.len()..].starts_with('.')
        && name.ends_with(&*spec.group);
    if name.is_empty() {
        errs.push(FieldIssue::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        let mut msgs = path_segment_name(name);
        if msgs.is_empty() && !is_required_name {
            let required_name = format!("{}.{}", spec.version, spec.group);
            msgs.push(format!(
                "must be `spec.version+\".\"+spec.group`: {required_name:?}"
            ));
        }
        for m in msgs {
            errs.push(FieldIssue::invalid("metadata.name", json!(name), &m));
        }
    }
    validate_metadata(svc, &mut errs);
    if spec.group.is_empty() && &*spec.version != "v1" {
        errs.push(FieldIssue::required(
            "spec.group",
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !spec.group.is_empty() {
        for m in dns1123_subdomain(&spec.group) {
            errs.push(FieldIssue::invalid("spec.group", json!(spec.group), &m));
        }
    }
    for m in dns1035_label(&spec.version) {
        errs.push(FieldIssue::invalid("spec.version", json!(spec.version), &m));
    }
    if spec.group_priority_minimum <= 0 || spec.group_priority_minimum > 20000 {
        errs.push(FieldIssue::invalid(
            "spec.groupPriorityMinimum",
            json!(spec.group_priority_minimum),
            "must be positive and less than 20000",
        ));
    }
    if spec.version_priority <= 0 || spec.version_priority > 1000 {
        errs.push(FieldIssue::invalid(
            "spec.versionPriority",
            json!(spec.version_priority),
            "must be positive and less than 1000",
        ));
    }
    let ca_len = spec.ca_bundle.as_ref().map_or(0, |b| b.len());
    let Some(service) = &spec.service else {
        if ca_len != 0 {
            errs.push(FieldIssue::invalid(
                "spec.caBundle",
                json!(format!("{ca_len} bytes")),
                "local APIServices may not have a caBundle",
            ));
        }
        if spec.insecure_skip_tls_verify {
            errs.push(FieldIssue::invalid(
                "spec.insecureSkipTLSVerify",
                json!(true),
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return errs;
    };
    if service.namespace.is_empty() {
        errs.push(FieldIssue::required("spec.service.namespace", ""));
    }
    if service.name.is_empty() {
        errs.push(FieldIssue::required("spec.service.name", ""));
    }
    let port = service.port.unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errs.push(FieldIssue::invalid(
            "spec.service.port",
            json!(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    if spec.insecure_skip_tls_verify && ca_len > 0 {
        errs.push(FieldIssue::invalid(
            "spec.insecureSkipTLSVerify",
            json!(true),
            "may not be true if caBundle is present",
        ));
    }
    errs
}

/// Checks the server does not make but a controller should: a Service reference whose
/// namespace or name no Service can have (the aggregator would never find it), and a
/// `caBundle` that is not PEM certificates (stored by the server, then every TLS handshake
/// to the service fails).
pub fn validate_apiservice_references(svc: &APIService) -> Vec<FieldIssue> {
    let mut errs = Vec::new();
    if let Some(service) = &svc.spec.service {
        if !service.namespace.is_empty() {
            for m in dns1123_label(&service.namespace) {
                errs.push(FieldIssue::invalid(
                    "spec.service.namespace",
                    json!(service.namespace),
                    &m,
                ));
            }
        }
        if !service.name.is_empty() {
            for m in dns1035_label(&service.name) {
                errs.push(FieldIssue::invalid(
                    "spec.service.name",
                    json!(service.name),
                    &m,
                ));
            }
        }
    }
    if let Some(ca) = svc.spec.ca_bundle.as_deref().filter(|b| !b.is_empty()) {
        if let Err(why) = pem_certificates(ca) {
            errs.push(FieldIssue::invalid(
                "spec.caBundle",
                json!(format!("{} bytes", ca.len())),
                &why,
            ));
        }
    }
    errs
}

/// At least one PEM certificate, each one a readable X.509 certificate, and no other PEM
/// section (a private key pasted by mistake is refused, never sent).
fn pem_certificates(bytes: &[u8]) -> Result<(), String> {
    use rustls_pki_types::pem::{PemObject, SectionKind};
    let mut roots = rustls::RootCertStore::empty();
    let mut n = 0;
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(bytes) {
        let (kind, der) = section.map_err(|e| format!("not readable PEM: {e}"))?;
        if kind != SectionKind::Certificate {
            return Err(format!(
                "must hold only PEM certificates, found a {kind:?} section"
            ));
        }
        n += 1;
        roots
            .add(rustls_pki_types::CertificateDer::from(der))
            .map_err(|e| format!("certificate {n} is not a valid X.509 certificate: {e}"))?;
    }
    if n == 0 {
        return Err(
            "must be PEM certificates (\"-----BEGIN CERTIFICATE-----\"), base64-encoded once more in the manifest".into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(obj: Value) -> Vec<String> {
        let svc: APIService = serde_json::from_value(obj).unwrap();
        validate_apiservice(&svc)
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn valid_apiservices_pass() {
        assert!(fields(json!({"metadata": {"name": "v1.example.com"}, "spec": {
            "group": "example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
            "service": {"namespace": "ns", "name": "svc"}}}))
        .is_empty());
        assert!(fields(json!({"metadata": {"name": "v1."}, "spec": {
            "version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}}))
        .is_empty());
    }

    #[test]
    fn each_rule_names_its_field() {
        assert_eq!(
            fields(json!({"metadata": {"name": "v2."}, "spec": {
                "version": "v2", "groupPriorityMinimum": 0, "versionPriority": 1001}})),
            [
                "spec.group",
                "spec.groupPriorityMinimum",
                "spec.versionPriority"
            ]
        );
        assert_eq!(
            fields(json!({"metadata": {"name": "x"}, "spec": {
                "group": "Bad_Group", "version": "1v", "groupPriorityMinimum": 1, "versionPriority": 1,
                "caBundle": "AAAA", "insecureSkipTLSVerify": true}})),
            [
                "metadata.name",
                "spec.group",
                "spec.version",
                "spec.caBundle",
                "spec.insecureSkipTLSVerify"
            ]
        );
        assert_eq!(
            fields(json!({"metadata": {"name": "v1.a"}, "spec": {
                "group": "a", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1,
                "caBundle": "AAAA", "insecureSkipTLSVerify": true, "service": {"port": 70000}}})),
            [
                "spec.service.namespace",
                "spec.service.name",
                "spec.service.port",
                "spec.insecureSkipTLSVerify"
            ]
        );
        assert_eq!(
            fields(
                json!({"metadata": {"name": "v1.a", "labels": {"a b": "x", "k": "-bad"}},
                "spec": {"group": "a", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1}})
            ),
            ["metadata.labels", "metadata.labels"]
        );
    }

    #[test]
    fn messages_read_as_the_servers() {
        let svc: APIService = serde_json::from_value(json!({"metadata": {"name": "x"},
            "spec": {"group": "g", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1}}))
        .unwrap();
        assert_eq!(
            validate_apiservice(&svc)[0].to_string(),
            "metadata.name: Invalid value: \"x\": must be `spec.version+\".\"+spec.group`: \"v1.g\""
        );
    }

    #[test]
    fn ca_bundle_must_be_pem_certificates() {
        assert!(pem_certificates(b"AAAA")
            .unwrap_err()
            .contains("must be PEM"));
        let key = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        assert!(pem_certificates(key)
            .unwrap_err()
            .contains("only PEM certificates"));
        let junk = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(pem_certificates(junk)
            .unwrap_err()
            .contains("not a valid X.509"));
    }
}
