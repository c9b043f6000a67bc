//! `metadata.managedFields` as the real server records them.
//!
//! Every create, update and patch stamps one entry per (manager, operation, subresource):
//! `{manager, operation: "Update", apiVersion, time, fieldsType: "FieldsV1", fieldsV1}`,
//! updated in place with a new time when the same manager writes again. The manager is the
//! `fieldManager` query parameter, else the User-Agent up to its first `/` (client-go's
//! default, e.g. `autoregister` or `kubectl`), as the real server defaults it. A
//! server-side apply records an `Apply` entry instead (see `apply.rs`).
//!
//! `fieldsV1` is a field set at leaf granularity (`{"f:spec": {"f:group": {}}}`): on create
//! every field the object sets, on update the union of what the manager owned and what it
//! changed. Fields a manager changes are taken from the other managers' entries (`Apply`
//! ones too), removed fields from everyone, and an entry left owning nothing is dropped,
//! as structured-merge-diff's `Updater.Update` does (`merge/update.go`; apimachinery's
//! `managedfieldsupdater.go` merges the write into the manager's earlier entry and stamps
//! the time). Entries are sorted as apimachinery's `sortEncodedManagedFields` sorts them:
//! operation (`Apply` first), time, manager. Simplifications: no `k:`/`v:` markers are
//! written, a `.` marker read is ignored, and list items are leaves.
//!
//! A request body that carries `metadata.managedFields` replaces the stored entries when
//! they decode (the current write is then stamped on top); an empty list (or `[{}]`)
//! strips them all and nothing is recorded for that write; absent, null or undecodable
//! keeps the stored ones (`decodeLiveOrNew` in `managedfields/internal/fieldmanager.go`).

use std::collections::BTreeSet;
use std::time::SystemTime;

use serde_json::{json, Map, Value};

use super::errors::{self, FieldError};
use super::http::Request;
use super::kinds::Kind;

/// Longest `fieldManager` the real server accepts (`FieldManagerMaxLength`).
pub(crate) const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// A field path such as `["f:spec", "f:group"]`.
pub(crate) type Path = Vec<String>;

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
        // Entries that do not decode leave the stored ones in place (DecodeManagedFields).
        Some(Value::Array(a)) if a.iter().all(decodes) => Sent::Replaced,
        Some(_) => Sent::Keep,
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

/// Whether a sent entry decodes as apimachinery's `DecodeManagedFields` requires: operation
/// `Apply` or `Update`, an apiVersion, fieldsType `FieldsV1`, a field set object.
fn decodes(e: &Value) -> bool {
    let s = |k: &str| e.get(k).and_then(Value::as_str);
    matches!(s("operation"), Some("Apply" | "Update"))
        && s("apiVersion").is_some_and(|v| !v.is_empty())
        && s("fieldsType") == Some("FieldsV1")
        && e.get("fieldsV1").is_none_or(Value::is_object)
}

/// One entry of `metadata.managedFields`: who, how, when, and the fields it owns.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    /// Every member but `fieldsV1` (manager, operation, apiVersion, time, subresource, ...).
    meta: Map<String, Value>,
    /// The owned fields.
    pub(crate) fields: BTreeSet<Path>,
}

impl Entry {
    /// A new entry of `manager` for `operation` (`Apply`, `Update`), stamped `time`.
    pub(crate) fn new(
        manager: &str,
        operation: &str,
        kind: &Kind,
        subresource: Option<&str>,
        time: Option<String>,
    ) -> Entry {
        let mut meta = Map::new();
        meta.insert("manager".into(), json!(manager));
        meta.insert("operation".into(), json!(operation));
        meta.insert("apiVersion".into(), json!(kind.api_version()));
        if let Some(t) = time {
            meta.insert("time".into(), json!(t));
        }
        meta.insert("fieldsType".into(), json!("FieldsV1"));
        if let Some(s) = subresource {
            meta.insert("subresource".into(), json!(s));
        }
        Entry {
            meta,
            fields: BTreeSet::new(),
        }
    }

    fn str(&self, key: &str) -> Option<&str> {
        self.meta.get(key).and_then(Value::as_str)
    }

    /// The manager.
    pub(crate) fn manager(&self) -> &str {
        self.str("manager").unwrap_or("")
    }

    /// `Apply` or `Update`.
    pub(crate) fn operation(&self) -> &str {
        self.str("operation").unwrap_or("")
    }

    /// The subresource it wrote through, if any.
    pub(crate) fn subresource(&self) -> Option<&str> {
        self.str("subresource").filter(|s| !s.is_empty())
    }

    /// When it last changed the object, as written (RFC 3339).
    pub(crate) fn time(&self) -> Option<&str> {
        self.str("time")
    }

    /// Whether this is `manager`'s entry for `operation` through `subresource`.
    pub(crate) fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager() == manager
            && self.operation() == operation
            && self.subresource() == subresource
    }

    /// How a conflict names the entry, as apimachinery's `printManager`
    /// (`managedfields/internal/conflict.go`) prints the manager's identifier: `"m"` for an
    /// apply, `"m" using apiregistration.k8s.io/v1` for an update, with `with subresource
    /// "status"` after the name when there is one. The identifier carries no time
    /// (`BuildManagerIdentifier` clears it), so printManager's ` at TIME` never shows.
    pub(crate) fn printed(&self) -> String {
        let mut out = format!("{:?}", self.manager());
        if let Some(s) = self.subresource() {
            out.push_str(&format!(" with subresource {s:?}"));
        }
        if self.operation() == "Update" {
            out.push_str(&format!(" using {}", self.str("apiVersion").unwrap_or("")));
        }
        out
    }

    fn to_value(&self) -> Value {
        let mut m = self.meta.clone();
        m.insert("fieldsV1".into(), fields_v1(&self.fields));
        Value::Object(m)
    }
}

/// The entries stored on `obj` (anything that is not an object is dropped).
pub(crate) fn entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let mut meta = e.as_object()?.clone();
            let fields = paths_of(meta.remove("fieldsV1").as_ref().unwrap_or(&Value::Null));
            Some(Entry { meta, fields })
        })
        .collect()
}

/// Stores `entries` on `obj`, sorted as the real server sorts them (operation, time,
/// manager, apiVersion, subresource: `sortEncodedManagedFields`); none removes the list.
pub(crate) fn set_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.sort_by(|p, q| {
        let key = |e: &Entry| {
            (
                e.operation().to_string(),
                e.time().unwrap_or("").to_string(),
                e.manager().to_string(),
                e.str("apiVersion").unwrap_or("").to_string(),
                e.subresource().unwrap_or("").to_string(),
            )
        };
        key(p).cmp(&key(q))
    });
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        let list = entries.iter().map(Entry::to_value).collect();
        meta.insert("managedFields".into(), Value::Array(list));
    }
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
    let mut list = entries(new);
    let mine = |e: &Entry| e.is(manager, "Update", subresource);
    let mut owned: BTreeSet<Path> = list
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    owned.extend(changed.iter().cloned());
    for p in &removed {
        owned.remove(p);
    }
    // Others (appliers too) lose what this write changed or removed; an entry owning
    // nothing goes.
    list.retain_mut(|e| {
        if mine(e) {
            return false;
        }
        if e.subresource() != subresource {
            return true;
        }
        e.fields
            .retain(|p| !changed.contains(p) && !removed.contains(p));
        !e.fields.is_empty()
    });
    // A write that took no field records nothing (its "current-operation" set is empty:
    // e.g. a JSON patch that only rewrites managedFields).
    if !owned.is_empty() {
        let now = crate::api::time::format_rfc3339(SystemTime::now());
        let mut entry = Entry::new(manager, "Update", kind, subresource, Some(now));
        entry.fields = owned;
        list.push(entry);
    }
    set_entries(new, list);
}

/// The part of an object a write through the main resource (or `subresource`) manages.
pub(crate) fn scoped(kind: &Kind, obj: &Value, subresource: Option<&str>) -> Value {
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
pub(crate) fn diff(
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
pub(crate) fn leaves(v: &Value, at: &mut Path, out: &mut BTreeSet<Path>) {
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
    fn malformed_sent_entries_are_ignored_not_a_panic() {
        let cur = json!({"metadata": {"name": "v1.a"}, "spec": {"group": "a"}});
        let mut new = json!({"metadata": {"name": "v1.a", "managedFields": [1, "x", {"manager": "m", "fieldsV1": 3}]}, "spec": {"group": "b"}});
        // Entries that do not decode leave the stored ones (none here) in place.
        assert_eq!(resolve(Some(&cur), &mut new), Sent::Keep);
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
        let mut other = json!({"metadata": {"managedFields": [{"manager": "b", "operation": "Update",
            "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}}]}});
        assert_eq!(resolve(Some(&cur), &mut other), Sent::Replaced);
        let mut undecodable = json!({"metadata": {"managedFields": [{"manager": "b"}]}});
        assert_eq!(resolve(Some(&cur), &mut undecodable), Sent::Keep);
        assert_eq!(undecodable, cur);
    }
}
