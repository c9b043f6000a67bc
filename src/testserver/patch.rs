//! JSON merge patch (RFC 7386); strategic merge patch is the same for the kinds served here.

use serde_json::Value;

/// Applies `patch` to `target` as RFC 7386 describes.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    if let Value::Object(t) = target {
        for (k, v) in patch_map {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Applies an RFC 6902 JSON patch (add, remove, replace, test; enough for `kubectl patch --type json`).
pub(crate) fn json_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    let ops = patch.as_array().ok_or("a JSON patch must be an array")?;
    for op in ops {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or("op without path")?;
        let value = op.get("value").cloned();
        let (parent_path, last) = match path.rfind('/') {
            Some(i) => (
                &path[..i],
                path[i + 1..].replace("~1", "/").replace("~0", "~"),
            ),
            None => return Err(format!("bad path {path:?}")),
        };
        match kind {
            "test" => {
                if target.pointer(path) != value.as_ref() {
                    return Err(format!("test failed at {path}"));
                }
            }
            "remove" | "add" | "replace" => {
                let parent = target
                    .pointer_mut(parent_path)
                    .ok_or_else(|| format!("no such path {parent_path:?}"))?;
                match parent {
                    Value::Object(m) => {
                        if kind == "remove" || kind == "replace" {
                            m.remove(&last)
                                .ok_or_else(|| format!("no such path {path:?}"))?;
                        }
                        if kind != "remove" {
                            m.insert(last, value.ok_or("op without value")?);
                        }
                    }
                    Value::Array(a) => {
                        let idx = if last == "-" {
                            a.len()
                        } else {
                            last.parse::<usize>()
                                .map_err(|_| format!("bad index {last:?}"))?
                        };
                        if kind == "remove" || kind == "replace" {
                            if idx >= a.len() {
                                return Err(format!("no such path {path:?}"));
                            }
                            a.remove(idx);
                        }
                        if kind != "remove" {
                            if idx > a.len() {
                                return Err(format!("index out of range {path:?}"));
                            }
                            a.insert(idx, value.ok_or("op without value")?);
                        }
                    }
                    _ => return Err(format!("cannot patch into {parent_path:?}")),
                }
            }
            other => return Err(format!("unsupported JSON patch op {other:?}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc7386_examples() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut t, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(t, json!({"a": "z", "c": {"d": "e"}}));
        let mut t = json!({"a": ["b"]});
        merge_patch(&mut t, &json!({"a": "c"}));
        assert_eq!(t, json!({"a": "c"}));
        let mut t = json!({"a": "foo"});
        merge_patch(&mut t, &json!({"b": {"c": null}}));
        assert_eq!(t, json!({"a": "foo", "b": {}}));
    }

    #[test]
    fn json_patch_ops() {
        let mut t = json!({"a": {"b": 1}, "l": [1, 2]});
        json_patch(
            &mut t,
            &json!([
                {"op": "replace", "path": "/a/b", "value": 2},
                {"op": "add", "path": "/l/-", "value": 3},
                {"op": "remove", "path": "/l/0"},
                {"op": "test", "path": "/a/b", "value": 2}
            ]),
        )
        .unwrap();
        assert_eq!(t, json!({"a": {"b": 2}, "l": [2, 3]}));
        assert!(json_patch(&mut t, &json!([{"op": "test", "path": "/a/b", "value": 9}])).is_err());
    }
}
