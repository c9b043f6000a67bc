//! What a write would change, field by field (old → new), and a create's fields.

use serde_json::Value;

/// One field that differs.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// JSON path, e.g. `spec.versionPriority`.
    pub field: String,
    /// The current value; `None` when absent.
    pub old: Option<Value>,
    /// The value the write would set; `None` when it would be removed.
    pub new: Option<Value>,
}

impl Change {
    /// `field: old → new`, values as YAML would show them (`(none)` when absent).
    pub fn line(&self) -> String {
        format!(
            "{}: {} → {}",
            self.field,
            shown(&self.field, self.old.as_ref()),
            shown(&self.field, self.new.as_ref())
        )
    }
}

/// A value for a diff line: a caBundle by its size (kilobytes of base64 help nobody).
pub fn shown(field: &str, v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "(none)".to_string(),
        Some(Value::String(s)) if field.ends_with("caBundle") => {
            format!("({} bytes of base64)", s.len())
        }
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Every leaf of `v` under `prefix` as `field: value` lines (a create's object).
pub fn leaves(prefix: &str, v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    fn go(path: &str, v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, v) in m {
                    go(&format!("{path}.{k}"), v, out);
                }
            }
            other => out.push(format!("{path}: {}", shown(path, Some(other)))),
        }
    }
    go(prefix, v, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_ca_bundle_is_shown_by_size() {
        let c = Change {
            field: "spec.caBundle".into(),
            old: None,
            new: Some(json!("QUJD")),
        };
        assert_eq!(c.line(), "spec.caBundle: (none) → (4 bytes of base64)");
    }

    #[test]
    fn leaves_of_an_object() {
        assert_eq!(
            leaves("spec", &json!({"group": "g", "service": {"port": 443}})),
            ["spec.group: g", "spec.service.port: 443"]
        );
    }
}
