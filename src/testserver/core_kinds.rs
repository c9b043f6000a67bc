//! Validation of the core `v1` kinds served for CA injection: Secrets and ConfigMaps.

use base64::Engine;
use serde_json::{json, Value};

use super::errors::FieldError;
use super::validation::dns1123_subdomain;

/// The name rules every namespaced core object follows.
fn name_errors(obj: &Value) -> Vec<FieldError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        return vec![FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )];
    }
    dns1123_subdomain(name)
        .into_iter()
        .map(|m| FieldError::invalid("metadata.name", &json!(name), &m))
        .collect()
}

/// A map field of string values (`data`, `binaryData`); `base64`: each value must decode.
fn string_map(obj: &Value, field: &str, base64: bool) -> Result<Vec<FieldError>, String> {
    let mut errs = Vec::new();
    match obj.get(field) {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let Some(s) = v.as_str() else {
                    return Err(format!("{field}.{k}: expected a string"));
                };
                if base64 && base64::engine::general_purpose::STANDARD.decode(s).is_err() {
                    return Err(format!("{field}.{k}: illegal base64 data"));
                }
            }
        }
        Some(_) => return Err(format!("{field}: expected an object")),
    }
    if field == "data" {
        // Keys are what a file name in a volume may be.
        if let Some(Value::Object(m)) = obj.get(field) {
            for k in m.keys() {
                let ok = !k.is_empty()
                    && k.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
                if !ok {
                    errs.push(FieldError::invalid(
                        &format!("{field}[{k}]"),
                        &json!(k),
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                    ));
                }
            }
        }
    }
    Ok(errs)
}

/// `v1` Secret: a valid name, `data` values base64.
pub(crate) fn validate_secret(obj: &Value) -> Result<Vec<FieldError>, String> {
    let mut errs = name_errors(obj);
    errs.extend(string_map(obj, "data", true)?);
    Ok(errs)
}

/// `v1` ConfigMap: a valid name, `data` strings, `binaryData` base64.
pub(crate) fn validate_configmap(obj: &Value) -> Result<Vec<FieldError>, String> {
    let mut errs = name_errors(obj);
    errs.extend(string_map(obj, "data", false)?);
    errs.extend(string_map(obj, "binaryData", true)?);
    Ok(errs)
}

/// `stringData` of a Secret is write-only: merged into `data` (base64), never stored.
pub(crate) fn default_secret(obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    if obj.get("type").is_none() {
        obj["type"] = json!("Opaque");
    }
    let Some(Value::Object(strings)) = obj.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return;
    };
    if !obj.get("data").is_some_and(Value::is_object) {
        obj["data"] = json!({});
    }
    for (k, v) in strings {
        if let Some(s) = v.as_str() {
            obj["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(s));
        }
    }
}
