//! Server-side defaulting and validation, after kube-aggregator's `pkg/apis/apiregistration/validation`
//! and the coordination API's lease validation.

use serde_json::{json, Value};

use super::errors::FieldError;
use crate::api::APIService;

pub(crate) use crate::api::validation::dns1123_subdomain;

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `SetDefaults_ServiceReference`: a service without a port gets 443.
pub(crate) fn default_apiservice(obj: &mut Value) {
    if let Some(svc) = obj.pointer_mut("/spec/service") {
        if let Some(m) = svc.as_object_mut() {
            if m.get("port").is_none_or(Value::is_null) {
                m.insert("port".into(), json!(443));
            }
        }
    }
}

/// `ValidateAPIService` (the rules live in [`crate::api::validation`], shared with the
/// manifest loader).
pub(crate) fn validate_apiservice(obj: &Value) -> Result<Vec<FieldError>, String> {
    let svc: APIService = serde_json::from_value(obj.clone())
        .map_err(|e| format!("unable to decode APIService: {e}"))?;
    Ok(crate::api::validation::validate_apiservice(&svc)
        .into_iter()
        .map(|issue| match &issue.value {
            None => FieldError::required(&issue.field, &issue.detail),
            Some(v) => FieldError::invalid(&issue.field, v, &issue.detail),
        })
        .collect())
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

    #[test]
    fn apiservice_rules_become_field_errors() {
        let errs = validate_apiservice(&json!({"metadata": {"name": "v2."}, "spec": {
            "version": "v2", "groupPriorityMinimum": 0, "versionPriority": 1}}))
        .unwrap();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.group", "spec.groupPriorityMinimum"]);
        assert_eq!(errs[0].reason, "FieldValueRequired");
        assert_eq!(
            errs[1].message,
            "Invalid value: 0: must be positive and less than 20000"
        );
    }
}
