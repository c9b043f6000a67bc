//! `metadata.managedFields` as the real server records them for `Update` operations.
//!
//! Every create, update and patch stamps one entry per (manager, operation, subresource):
//! `{manager, operation: "Update", apiVersion, time, fieldsType: "FieldsV1", fieldsV1}`,
//! updated in place with a new time when the same manager writes again. The manager is the
//! `fieldManager` query parameter, else the User-Agent up to its first `/` (client-go's
//! default, e.g. `autoregister` or `kubectl`), as the real server defaults it.
//!
//! `fieldsV1` is a field set at leaf granularity (`{"f:spec": {"f:group": {}}}`): on create
//! every field the object sets, on update the union of what the manager owned and what it
//! changed. Fields a manager changes are taken from the other managers' entries, removed
//! fields from everyone, and an entry left owning nothing is dropped, as the real server
//! does for `Update` operations. Simplifications: no `.`/`k:`/`v:` markers, list items are
//! leaves, and no Apply operation (server-side apply is not served).
//!
//! A request body that carries `metadata.managedFields` replaces the stored entries when
//! non-empty (the current write is then stamped on top); an empty list (or `[{}]`) strips
//! them all and nothing is recorded for that write; absent (or null) keeps the stored ones.

use std::collections::BTreeSet;
use std::time::SystemTime;

use serde_json::{json, Map, Value};

use super::errors::{self, FieldError};
use super::http::Request;
use super::kinds::Kind;

/// Longest `fieldManager` the real server accepts (`FieldManagerMaxLength`).
pub(crate) const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// A field path such as `["f:spec", "f:group"]`.
type Path = Vec<String>;

/// The manager of a write request: `fieldManager`, else the User-Agent's product name.
///
/// A `fieldManager` over 128 bytes or with unprintable characters is refused as the real
/// server refuses it: 422 Invalid on `CreateOptions`/`UpdateOptions`/`PatchOptions`.
pub(crate) fn manager_of(req: &Request, verb: &str) -> Result<String, errors::ApiErr> {
    match req.query("fieldManager").filter(|m| !m.is_empty()) {
        Some(m) => {
            let mut errs = Vec::new();
            if m.len() > FIELD_MANAGER_MAX_LENGTH {
                errs.push(FieldError {
                    reason: "FieldValueTooLong",
                    field: "fieldManager".into(),
                    message: format!(
                        "Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"
                    ),
                });
            }
            if let Some((i, c)) = m.char_indices().find(|(_, c)| c.is_control()) {
                errs.push(FieldError::invalid(
                    "fieldManager",
                    &json!(m),
                    &format!("invalid character {c:?} (at position {i})"),
                ));
            }
            if errs.is_empty() {
                Ok(m.to_string())
            } else {
                let options = match verb {
                    "create" => "CreateOptions",
                    "patch" => "PatchOptions",
                    _ => "UpdateOptions",
                };
                Err(errors::invalid(&options_kind(options), "", &errs))
            }
        }
        None => Ok(prefix_from_user_agent(
            req.header("user-agent").unwrap_or(""),
        )),
    }
}

/// The real server's default manager: the User-Agent before its first `/`, printable
/// characters only, cut to 128 bytes.
pub(crate) fn prefix_from_user_agent(ua: &str) -> String {
    let mut out = String::new();
    for c in ua.split('/').next().unwrap_or("").chars() {
        if c.is_control() {
            continue;
        }
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// A `meta.k8s.io` options kind (`CreateOptions`, …), for the Invalid answer's wording.
fn options_kind(kind: &'static str) -> Kind {
    Kind {
        group: "meta.k8s.io",
        version: "v1",
        kind,
        plural: "",
        singular: "",
        namespaced: false,
        status_subresource: false,
        categories: &[],
        short_names: &[],
        default: |_| {},
        validate: |_| Ok(Vec::new()),
        unknown_fields: |_| Vec::new(),
        fields: super::selector::metadata_fields,
    }
}

/// What the write does to the stored entries, decided from what the body carried.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Keep the stored entries and stamp this write.
    Keep,
    /// The body replaced the entries; stamp this write on top.
    Replaced,
    /// The body reset the entries: strip them, record nothing.
    Reset,
}

/// Settles `new`'s `metadata.managedFields` from what the body sent and what is stored.
pub(crate) fn resolve(cur: Option<&Value>, new: &mut Value) -> Sent {
    let stored = cur
        .and_then(|c| c.pointer("/metadata/managedFields"))
        .cloned();
    let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Sent::Keep;
    };
    let sent = meta.get("managedFields").cloned();
    let outcome = match &sent {
        None | Some(Value::Null) => Sent::Keep,
        Some(v) if *v == stored.clone().unwrap_or(Value::Null) => Sent::Keep,
        Some(Value::Array(a)) if a.is_empty() || (a.len() == 1 && a[0] == json!({})) => Sent::Reset,
        Some(_) => Sent::Replaced,
    };
    match outcome {
        Sent::Keep => match stored {
            Some(s) => meta.insert("managedFields".into(), s),
            None => meta.remove("managedFields"),
        },
        Sent::Reset => meta.remove("managedFields"),
        Sent::Replaced => None,
    };
    outcome
}

/// Stamps `manager`'s `Update` entry on `new` for the change from `cur` (`None` on create).
pub(crate) fn stamp(
    kind: &Kind,
    cur: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
) {
    let scope = |v: &Value| scoped(kind, v, subresource);
    let before = cur.map(scope).unwrap_or(Value::Object(Map::new()));
    let after = scope(new);
    let mut changed = BTreeSet::new();
    let mut removed = BTreeSet::new();
    diff(&before, &after, &mut Vec::new(), &mut changed, &mut removed);
    let mut entries: Vec<Value> = new
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mine = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some("Update")
            && e.get("subresource").and_then(Value::as_str) == subresource
    };
    let mut owned: BTreeSet<Path> = entries
        .iter()
        .find(|e| mine(e))
        .map(|e| paths_of(e.get("fieldsV1").unwrap_or(&Value::Null)))
        .unwrap_or_default();
    owned.extend(changed.iter().cloned());
    for p in &removed {
        owned.remove(p);
    }
    // Others lose what this write changed or removed; an entry owning nothing goes.
    entries.retain_mut(|e| {
        // A client-sent entry that is not an object is dropped, not indexed into.
        if mine(e) || !e.is_object() {
            return false;
        }
        if e.get("subresource").and_then(Value::as_str) != subresource {
            return true;
        }
        let mut theirs = paths_of(e.get("fieldsV1").unwrap_or(&Value::Null));
        let had = theirs.len();
        theirs.retain(|p| !changed.contains(p) && !removed.contains(p));
        if theirs.len() != had {
            e["fieldsV1"] = fields_v1(&theirs);
        }
        !theirs.is_empty()
    });
    let mut entry = json!({
        "manager": manager,
        "operation": "Update",
        "apiVersion": kind.api_version(),
        "time": crate::api::time::format_rfc3339(SystemTime::now()),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1(&owned),
    });
    if let Some(s) = subresource {
        entry["subresource"] = json!(s);
    }
    entries.push(entry);
    if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
}

/// The part of an object a write through the main resource (or `subresource`) manages.
fn scoped(kind: &Kind, obj: &Value, subresource: Option<&str>) -> Value {
    let mut out = Map::new();
    let Some(m) = obj.as_object() else {
        return Value::Object(out);
    };
    for (k, v) in m {
        match (k.as_str(), subresource) {
            ("status", Some("status")) => {
                out.insert(k.clone(), v.clone());
            }
            (_, Some(_)) => {}
            ("apiVersion" | "kind", None) => {}
            ("status", None) if kind.status_subresource => {}
            ("metadata", None) => {
                let mut meta = Map::new();
                for key in ["labels", "annotations", "finalizers", "ownerReferences"] {
                    if let Some(x) = v.get(key).filter(|x| !x.is_null()) {
                        meta.insert(key.into(), x.clone());
                    }
                }
                if !meta.is_empty() {
                    out.insert(k.clone(), Value::Object(meta));
                }
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// Leaf paths that differ: `changed` where `after` has a (new) value, `removed` where it has none.
fn diff(
    before: &Value,
    after: &Value,
    at: &mut Path,
    changed: &mut BTreeSet<Path>,
    removed: &mut BTreeSet<Path>,
) {
    let b = before.as_object().filter(|m| !m.is_empty());
    let a = after.as_object().filter(|m| !m.is_empty());
    match (b, a) {
        (Some(b), Some(a)) => {
            for (k, av) in a {
                at.push(format!("f:{k}"));
                diff(b.get(k).unwrap_or(&Value::Null), av, at, changed, removed);
                at.pop();
            }
            for (k, bv) in b {
                if !a.contains_key(k) {
                    at.push(format!("f:{k}"));
                    leaves(bv, at, removed);
                    at.pop();
                }
            }
        }
        (None, Some(_)) => {
            leaves(after, at, changed);
            if !before.is_null() && !at.is_empty() {
                removed.insert(at.clone());
            }
        }
        (Some(_), None) => {
            leaves(before, at, removed);
            if !after.is_null() && !at.is_empty() {
                changed.insert(at.clone());
            }
        }
        (None, None) if before != after && !at.is_empty() => {
            if after.is_null() {
                removed.insert(at.clone());
            } else {
                changed.insert(at.clone());
            }
        }
        (None, None) => {}
    }
}

/// Every leaf path of `v` under `at`; an empty object or a non-object is a leaf.
fn leaves(v: &Value, at: &mut Path, out: &mut BTreeSet<Path>) {
    match v.as_object() {
        Some(m) if !m.is_empty() => {
            for (k, x) in m {
                at.push(format!("f:{k}"));
                leaves(x, at, out);
                at.pop();
            }
        }
        _ if !at.is_empty() => {
            out.insert(at.clone());
        }
        _ => {}
    }
}

/// Leaf paths of a stored `fieldsV1` (any key kind, `.` markers ignored).
fn paths_of(fields: &Value) -> BTreeSet<Path> {
    fn walk(v: &Value, at: &mut Path, out: &mut BTreeSet<Path>) {
        let kids: Vec<(&String, &Value)> = v
            .as_object()
            .map(|m| m.iter().filter(|(k, _)| k.as_str() != ".").collect())
            .unwrap_or_default();
        if kids.is_empty() {
            if !at.is_empty() {
                out.insert(at.clone());
            }
            return;
        }
        for (k, x) in kids {
            at.push(k.clone());
            walk(x, at, out);
            at.pop();
        }
    }
    let mut out = BTreeSet::new();
    walk(fields, &mut Vec::new(), &mut out);
    out
}

/// The nested `fieldsV1` object of a set of leaf paths.
fn fields_v1(paths: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for p in paths {
        let mut node = &mut root;
        for seg in p {
            let next = node
                .entry(seg.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if !next.is_object() {
                *next = Value::Object(Map::new());
            }
            node = match next {
                Value::Object(m) => m,
                // Just made sure it is an object.
                _ => unreachable!("a fieldsV1 node is an object"),
            };
        }
    }
    Value::Object(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind() -> &'static Kind {
        super::super::kinds::by_plural("apiservices").unwrap()
    }

    #[test]
    fn user_agent_prefix_is_the_product_name() {
        assert_eq!(
            prefix_from_user_agent("autoregister/0.1.0 (linux)"),
            "autoregister"
        );
        assert_eq!(prefix_from_user_agent(""), "");
        assert_eq!(prefix_from_user_agent(&"x".repeat(300)).len(), 128);
    }

    #[test]
    fn create_owns_every_set_field_and_update_moves_changed_ones() {
        let mut created = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1.a", "labels": {"l": "x"}, "uid": "u"},
            "spec": {"group": "a", "version": "v1"}, "status": {}});
        stamp(kind(), None, &mut created, "one", None);
        let mf = &created["metadata"]["managedFields"][0];
        assert_eq!(mf["manager"], "one");
        assert_eq!(
            mf["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:l": {}}}, "f:spec": {"f:group": {}, "f:version": {}}})
        );
        let mut edited = created.clone();
        edited["spec"]["group"] = json!("b");
        assert_eq!(resolve(Some(&created), &mut edited), Sent::Keep);
        stamp(kind(), Some(&created), &mut edited, "two", None);
        let entries = edited["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(
            entries[0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:l": {}}}, "f:spec": {"f:version": {}}})
        );
        assert_eq!(entries[1]["fieldsV1"], json!({"f:spec": {"f:group": {}}}));
    }

    #[test]
    fn malformed_sent_entries_are_dropped_not_a_panic() {
        let cur = json!({"metadata": {"name": "v1.a"}, "spec": {"group": "a"}});
        let mut new = json!({"metadata": {"name": "v1.a", "managedFields": [1, "x", {"manager": "m", "fieldsV1": 3}]}, "spec": {"group": "b"}});
        assert_eq!(resolve(Some(&cur), &mut new), Sent::Replaced);
        stamp(kind(), Some(&cur), &mut new, "me", None);
        let managers: Vec<&str> = new["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["me"]);
    }

    #[test]
    fn sent_entries_replace_or_reset() {
        let cur = json!({"metadata": {"managedFields": [{"manager": "a"}]}});
        let mut same = cur.clone();
        assert_eq!(resolve(Some(&cur), &mut same), Sent::Keep);
        let mut absent = json!({"metadata": {}});
        assert_eq!(resolve(Some(&cur), &mut absent), Sent::Keep);
        assert_eq!(absent, cur);
        let mut reset = json!({"metadata": {"managedFields": []}});
        assert_eq!(resolve(Some(&cur), &mut reset), Sent::Reset);
        assert!(reset.pointer("/metadata/managedFields").is_none());
        let mut other = json!({"metadata": {"managedFields": [{"manager": "b"}]}});
        assert_eq!(resolve(Some(&cur), &mut other), Sent::Replaced);
    }
}
