//! What an update would change: each differing field of the spec, old → new.

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

/// Every leaf that differs between `old` and `new` under `prefix`, in field order.
pub fn changes(prefix: &str, old: &Value, new: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk(prefix, Some(old), Some(new), &mut out);
    out
}

fn walk(path: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<Change>) {
    let old = old.filter(|v| !v.is_null());
    let new = new.filter(|v| !v.is_null());
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            autoregister::sort::sort(&mut keys);
            keys.dedup();
            for k in keys {
                walk(&format!("{path}.{k}"), a.get(k), b.get(k), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(Change {
            field: path.to_string(),
            old: a.cloned(),
            new: b.cloned(),
        }),
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
    fn only_differing_leaves_old_to_new() {
        let old =
            json!({"versionPriority": 15, "group": "g", "service": {"name": "a", "port": 443}});
        let new = json!({"versionPriority": 77, "group": "g", "service": {"name": "b", "port": 443},
                         "insecureSkipTLSVerify": true});
        let lines: Vec<String> = changes("spec", &old, &new)
            .iter()
            .map(Change::line)
            .collect();
        assert_eq!(
            lines,
            [
                "spec.insecureSkipTLSVerify: (none) → true",
                "spec.service.name: a → b",
                "spec.versionPriority: 15 → 77",
            ]
        );
    }

    #[test]
    fn a_ca_bundle_is_shown_by_size() {
        let c = changes("spec", &json!({}), &json!({"caBundle": "QUJD"}));
        assert_eq!(c[0].line(), "spec.caBundle: (none) → (4 bytes of base64)");
    }

    #[test]
    fn leaves_of_an_object() {
        assert_eq!(
            leaves("spec", &json!({"group": "g", "service": {"port": 443}})),
            ["spec.group: g", "spec.service.port: 443"]
        );
    }
}
