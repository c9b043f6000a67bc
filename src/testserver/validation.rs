//! Server-side defaulting and validation, after kube-aggregator's `pkg/apis/apiregistration/validation`
//! and the coordination API's lease validation.

use serde_json::{json, Value};

use super::errors::FieldError;
use crate::api::APIService;

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// `IsDNS1123Subdomain`: the messages for `s`, empty when valid.
pub(crate) fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !s.split('.').all(label_ok) {
        errs.push(DNS1123_SUBDOMAIN_MSG.to_string());
    }
    errs
}

/// `IsDNS1035Label`: the messages for `s`, empty when valid.
pub(crate) fn dns1035_label(s: &str) -> Vec<String> {
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

/// `path.IsValidPathSegmentName`.
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

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `SetDefaults_ServiceReference`: a service without a port gets 443.
pub(crate) fn default_apiservice(obj: &mut Value) {
    if let Some(svc) = obj.pointer_mut("/spec/service") {
        if let Some(m) = svc.as_object_mut() {
            if m.get("port").map_or(true, Value::is_null) {
                m.insert("port".into(), json!(443));
            }
        }
    }
}

/// `ValidateAPIService`.
pub(crate) fn validate_apiservice(obj: &Value) -> Result<Vec<FieldError>, String> {
    let svc: APIService = serde_json::from_value(obj.clone())
        .map_err(|e| format!("unable to decode APIService: {e}"))?;
    let spec = &svc.spec;
    let name = name_of(obj);
    let mut errs = Vec::new();
    let required_name = format!("{}.{}", spec.version, spec.group);
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        let mut msgs = path_segment_name(name);
        if msgs.is_empty() && name != required_name {
            msgs.push(format!(
                "must be `spec.version+\".\"+spec.group`: {required_name:?}"
            ));
        }
        for m in msgs {
            errs.push(FieldError::invalid("metadata.name", &json!(name), &m));
        }
    }
    if spec.group.is_empty() && &*spec.version != "v1" {
        errs.push(FieldError::required(
            "spec.group",
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !spec.group.is_empty() {
        for m in dns1123_subdomain(&spec.group) {
            errs.push(FieldError::invalid("spec.group", &json!(spec.group), &m));
        }
    }
    for m in dns1035_label(&spec.version) {
        errs.push(FieldError::invalid(
            "spec.version",
            &json!(spec.version),
            &m,
        ));
    }
    if spec.group_priority_minimum <= 0 || spec.group_priority_minimum > 20000 {
        errs.push(FieldError::invalid(
            "spec.groupPriorityMinimum",
            &json!(spec.group_priority_minimum),
            "must be positive and less than 20000",
        ));
    }
    if spec.version_priority <= 0 || spec.version_priority > 1000 {
        errs.push(FieldError::invalid(
            "spec.versionPriority",
            &json!(spec.version_priority),
            "must be positive and less than 1000",
        ));
    }
    let ca_len = spec.ca_bundle.as_ref().map_or(0, |b| b.len());
    let Some(service) = &spec.service else {
        if ca_len != 0 {
            errs.push(FieldError::invalid(
                "spec.caBundle",
                &json!(format!("{ca_len} bytes")),
                "local APIServices may not have a caBundle",
            ));
        }
        if spec.insecure_skip_tls_verify {
            errs.push(FieldError::invalid(
                "spec.insecureSkipTLSVerify",
                &json!(true),
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return Ok(errs);
    };
    if service.namespace.is_empty() {
        errs.push(FieldError::required("spec.service.namespace", ""));
    }
    if service.name.is_empty() {
        errs.push(FieldError::required("spec.service.name", ""));
    }
    let port = service.port.unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid(
            "spec.service.port",
            &json!(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    if spec.insecure_skip_tls_verify && ca_len > 0 {
        errs.push(FieldError::invalid(
            "spec.insecureSkipTLSVerify",
            &json!(true),
            "may not be true if caBundle is present",
        ));
    }
    Ok(errs)
}

/// Fields of an APIService body that the v1 schema does not declare (for `fieldValidation=Strict`).
pub(crate) fn unknown_apiservice_fields(obj: &Value) -> Vec<String> {
    let Ok(svc) = serde_json::from_value::<APIService>(obj.clone()) else {
        return Vec::new();
    };
    let mut out: Vec<String> = svc.extra.keys().cloned().collect();
    out.extend(svc.spec.extra.keys().map(|k| format!("spec.{k}")));
    if let Some(s) = &svc.spec.service {
        out.extend(s.extra.keys().map(|k| format!("spec.service.{k}")));
    }
    if let Some(st) = &svc.status {
        out.extend(st.extra.keys().map(|k| format!("status.{k}")));
    }
    out
}

/// `ValidateLease`: a DNS subdomain name and non-negative durations/transitions.
pub(crate) fn validate_lease(obj: &Value) -> Result<Vec<FieldError>, String> {
    let name = name_of(obj);
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    }
    for m in dns1123_subdomain(name)
        .into_iter()
        .filter(|_| !name.is_empty())
    {
        errs.push(FieldError::invalid("metadata.name", &json!(name), &m));
    }
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    if !(spec.is_object() || spec.is_null()) {
        return Err("spec: expected an object".into());
    }
    for (field, min) in [("leaseDurationSeconds", 1), ("leaseTransitions", 0)] {
        match spec.get(field) {
            None | Some(Value::Null) => {}
            Some(v) => match v.as_i64() {
                Some(n) if n >= min => {}
                Some(_) => errs.push(FieldError::invalid(
                    &format!("spec.{field}"),
                    v,
                    if min == 1 {
                        "must be greater than 0"
                    } else {
                        "must be greater than or equal to 0"
                    },
                )),
                None => return Err(format!("spec.{field}: expected an integer, got {v}")),
            },
        }
    }
    for field in ["holderIdentity", "acquireTime", "renewTime"] {
        if let Some(v) = spec.get(field) {
            if !(v.is_string() || v.is_null()) {
                return Err(format!("spec.{field}: expected a string, got {v}"));
            }
        }
    }
    Ok(errs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(obj: Value) -> Vec<String> {
        validate_apiservice(&obj)
            .unwrap()
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
    }
}
