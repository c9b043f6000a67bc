//! `events.k8s.io/v1` Event validation, as kube-apiserver's `ValidateEventCreate` for v1.

use serde_json::{json, Value};

use super::errors::FieldError;
use super::validation::dns1123_subdomain;

/// The API server's limit on `note` (`NoteLengthLimit`).
const NOTE_LIMIT: usize = 1024;
/// Limit on `reportingInstance`, `action` and `reason`.
const FIELD_LIMIT: usize = 128;

fn text<'a>(obj: &'a Value, field: &str) -> Result<&'a str, String> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(format!("{field}: expected a string, got {v}")),
    }
}

/// Required fields, lengths, `type`, and the namespace rule for cluster-scoped objects.
pub(crate) fn validate_event(obj: &Value) -> Result<Vec<FieldError>, String> {
    let mut errs = Vec::new();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for m in dns1123_subdomain(name) {
            errs.push(FieldError::invalid("metadata.name", &json!(name), &m));
        }
    }
    if text(obj, "eventTime")?.is_empty() {
        errs.push(FieldError::required("eventTime", ""));
    }
    match text(obj, "type")? {
        "Normal" | "Warning" => {}
        t => errs.push(FieldError::invalid(
            "type",
            &json!(t),
            "has invalid value: must be Normal or Warning",
        )),
    }
    if text(obj, "reportingController")?.is_empty() {
        errs.push(FieldError::required("reportingController", ""));
    }
    for field in ["reportingInstance", "action", "reason"] {
        let v = text(obj, field)?;
        if v.is_empty() {
            errs.push(FieldError::required(field, ""));
        } else if v.len() > FIELD_LIMIT {
            errs.push(FieldError::invalid(
                field,
                &json!(v),
                &format!("can have at most {FIELD_LIMIT} characters"),
            ));
        }
    }
    let note = text(obj, "note")?;
    if note.len() > NOTE_LIMIT {
        errs.push(FieldError::invalid(
            "note",
            &json!(""),
            &format!("can have at most {NOTE_LIMIT} characters"),
        ));
    }
    let regarding = obj.get("regarding").cloned().unwrap_or(Value::Null);
    if !(regarding.is_object() || regarding.is_null()) {
        return Err("regarding: expected an object".into());
    }
    let ref_ns = text(&regarding, "namespace")?;
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    // A cluster-scoped object's Events live in `default` (or no namespace, for old clients).
    let ns_ok = if ref_ns.is_empty() {
        ns.is_empty() || ns == "default"
    } else {
        ns == ref_ns
    };
    if !ns_ok {
        errs.push(FieldError::invalid(
            "regarding.namespace",
            &json!(ref_ns),
            "does not match event.namespace",
        ));
    }
    Ok(errs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Value {
        json!({
            "metadata": {"name": "v1.foo.17a", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal",
            "reportingController": "autoregister", "reportingInstance": "h_1",
            "action": "Create", "reason": "Registered",
            "regarding": {"kind": "APIService", "name": "v1.foo"}
        })
    }

    fn fields(v: Value) -> Vec<String> {
        validate_event(&v)
            .unwrap()
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn a_complete_event_passes_and_each_rule_names_its_field() {
        assert!(fields(event()).is_empty());
        for (path, value, field) in [
            (&["eventTime"][..], json!(""), "eventTime"),
            (&["type"], json!("Loud"), "type"),
            (&["reason"], json!(null), "reason"),
            (&["action"], json!("x".repeat(129)), "action"),
            (&["note"], json!("x".repeat(1025)), "note"),
            (
                &["metadata", "namespace"],
                json!("kube-system"),
                "regarding.namespace",
            ),
        ] {
            let mut e = event();
            let (last, parents) = path.split_last().unwrap();
            let mut at = &mut e;
            for p in parents {
                at = &mut at[*p];
            }
            at[*last] = value.clone();
            assert_eq!(fields(e), [field], "{path:?} = {value}");
        }
    }
}
