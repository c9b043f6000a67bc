//! Server-side apply: merging an applied configuration into the live object and settling
//! field ownership, as structured-merge-diff's `Updater.Apply` does
//! (`sigs.k8s.io/structured-merge-diff/v6/merge/update.go`) behind apimachinery's field
//! manager (`k8s.io/apimachinery/pkg/util/managedfields/internal`).
//!
//! One apply by manager M with configuration C:
//!
//! 1. The live object with no managedFields at all first gets a `before-first-apply`
//!    `Update` entry owning every field it has (`skipnonapplied.go`).
//! 2. C is merged into the live object: maps field by field, anything else replaced
//!    (`TypedValue.Merge`).
//! 3. M's `Apply` entry becomes exactly C's fields (`ToFieldSet`: its leaves; `stripmeta.go`
//!    leaves out name, uid, resourceVersion, ...).
//! 4. A field M applied last time and no longer applies is removed, unless another entry
//!    (an `Update` of M's own included: a different manager to SMD) owns it, a field
//!    under it or above it (`Updater.prune`, `addBackOwnedItems`).
//! 5. Against the live object, a field another entry owns whose value this changes is a
//!    conflict: without `force` the apply is refused with 409 (`update` with
//!    `force=false`, worded by `NewConflictError`); with `force` the other entry loses it.
//!    A field removed is lost by everyone; an entry owning nothing is dropped.
//! 6. M's entry is stamped with the time only when the object changed
//!    (`managedfieldsupdater.go`): an apply that changes nothing keeps its old time.
//!
//! Defaulting happens after (the store's validation): a defaulted field (a Service's port)
//! is owned by nobody, as on the real server, where the defaulter runs after the merge.
//! Simplifications: field sets at leaf granularity, lists atomic, one API version.

use std::collections::BTreeSet;
use std::time::SystemTime;

use serde_json::{json, Map, Value};

use super::errors::{self, ApiErr, FieldError};
use super::kinds::Kind;
use super::managedfields::{self, diff, leaves, scoped, Entry, Path};
use crate::api::{Status, StatusCause, StatusDetails};

/// The manager kube-apiserver names the owner of fields an object had before its first
/// apply (`skipnonapplied.go`).
pub(crate) const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Applies `config` as `manager` to `live` (`None`: the object does not exist yet).
/// Answers the new object with its managedFields settled; the caller defaults, validates
/// and stores it.
pub(crate) fn apply(
    kind: &Kind,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    subresource: Option<&str>,
) -> Result<Value, ApiErr> {
    let empty = json!({});
    let live_obj = live.unwrap_or(&empty);
    if let (Some(live), Some(uid)) = (live, config.pointer("/metadata/uid")) {
        // The UID is immutable (`ValidateObjectMetaUpdate`), checked twice by BeforeUpdate:
        // in its common fields and again in the strategy's ValidateUpdate, so the cause
        // comes twice (kube-apiserver logs "Found duplicate validation error").
        if live.pointer("/metadata/uid") != Some(uid) {
            let name = live
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let immutable = FieldError::invalid("metadata.uid", uid, "field is immutable");
            return Err(errors::invalid(kind, name, &[immutable.clone(), immutable]));
        }
    }
    let mut list = managedfields::entries(live_obj);
    if live.is_some() && list.is_empty() {
        let mut before = Entry::new(BEFORE_FIRST_APPLY, "Update", kind, subresource, now());
        before.fields = leaf_set(&scoped(kind, live_obj, subresource));
        if !before.fields.is_empty() {
            list.push(before);
        }
    }
    let mine = |e: &Entry| e.is(manager, "Apply", subresource);
    let last: BTreeSet<Path> = list
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let applied = leaf_set(&scoped(kind, config, subresource));
    let mut new = live_obj.clone();
    merge(&mut new, config);
    // A field applied last time and not now is released: removed unless someone keeps it.
    for p in last.difference(&applied) {
        let kept = list
            .iter()
            .filter(|e| !mine(e) && e.subresource() == subresource)
            .any(|e| {
                e.fields
                    .iter()
                    .any(|q| q.starts_with(p) || p.starts_with(q))
            })
            || applied.iter().any(|q| q.starts_with(p) || p.starts_with(q));
        if !kept {
            remove(&mut new, p);
        }
    }
    let mut changed = BTreeSet::new();
    let mut removed = BTreeSet::new();
    diff(
        &scoped(kind, live_obj, subresource),
        &scoped(kind, &new, subresource),
        &mut Vec::new(),
        &mut changed,
        &mut removed,
    );
    let conflicts: Vec<(&Entry, Vec<&Path>)> = list
        .iter()
        .filter(|e| !mine(e) && e.subresource() == subresource)
        .map(|e| (e, e.fields.intersection(&changed).collect::<Vec<_>>()))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    if !force && !conflicts.is_empty() {
        return Err(conflict(&conflicts));
    }
    let unchanged = without_managed_fields(&new) == without_managed_fields(live_obj);
    let previous_time = list
        .iter()
        .find(|e| mine(e))
        .and_then(|e| e.time().map(str::to_string));
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
    // The time says when the manager last changed the object.
    let time = if unchanged { previous_time } else { now() };
    let mut entry = Entry::new(manager, "Apply", kind, subresource, time);
    entry.fields = applied;
    if !entry.fields.is_empty() {
        list.push(entry);
    }
    if !new.get("metadata").is_some_and(Value::is_object) {
        new["metadata"] = json!({});
    }
    managedfields::set_entries(&mut new, list);
    Ok(new)
}

fn now() -> Option<String> {
    Some(crate::api::time::format_rfc3339(SystemTime::now()))
}

/// The fields a configuration sets, as `ToFieldSet` lists them: scalars, lists, empty
/// maps and nulls.
fn leaf_set(v: &Value) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    leaves(v, &mut Vec::new(), &mut out);
    out
}

/// `obj` without `metadata.managedFields`, to tell whether an apply changed the object.
fn without_managed_fields(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    o
}

/// Merges `config` into `target`: maps field by field, anything else replaced; a null
/// removes the field.
fn merge(target: &mut Value, config: &Value) {
    match (target.as_object_mut(), config.as_object()) {
        (Some(t), Some(c)) => {
            for (k, v) in c {
                if v.is_null() {
                    t.remove(k);
                } else if v.is_object() && t.get(k).is_some_and(Value::is_object) {
                    if let Some(slot) = t.get_mut(k) {
                        merge(slot, v);
                    }
                } else {
                    t.insert(k.clone(), v.clone());
                }
            }
        }
        _ => *target = config.clone(),
    }
}

/// Removes the field at `path` (`f:` segments) and every map it leaves empty.
fn remove(obj: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(key) = first.strip_prefix("f:") else {
        return;
    };
    let Some(m) = obj.as_object_mut() else {
        return;
    };
    if rest.is_empty() {
        m.remove(key);
        return;
    }
    if let Some(child) = m.get_mut(key) {
        remove(child, rest);
        if child.as_object().is_some_and(Map::is_empty) {
            m.remove(key);
        }
    }
}

/// A field path as structured-merge-diff prints it (`fieldpath.Path.String`):
/// `.spec.caBundle`.
pub(crate) fn printed_path(p: &[String]) -> String {
    p.iter()
        .map(|seg| match seg.strip_prefix("f:") {
            Some(name) => format!(".{name}"),
            None => format!("[{seg}]"),
        })
        .collect()
}

/// 409 Conflict of an apply without `force`, worded by apimachinery's `NewConflictError`
/// and `getConflictMessage` (`managedfields/internal/conflict.go`): one cause
/// `FieldManagerConflict` per field, the message naming manager and field (several:
/// grouped by manager, managers sorted).
fn conflict(conflicts: &[(&Entry, Vec<&Path>)]) -> ApiErr {
    let mut all: Vec<(String, String)> = conflicts
        .iter()
        .flat_map(|(e, paths)| paths.iter().map(|p| (e.printed(), printed_path(p))))
        .collect();
    let causes: Vec<StatusCause> = all
        .iter()
        .map(|(who, field)| StatusCause {
            reason: Some("FieldManagerConflict".into()),
            message: Some(format!("conflict with {who}")),
            field: Some(field.clone()),
        })
        .collect();
    let message = if let [(who, field)] = all.as_slice() {
        format!("Apply failed with 1 conflict: conflict with {who}: {field}")
    } else {
        all.sort();
        let mut lines: Vec<String> = Vec::new();
        let mut current: Option<&str> = None;
        for (who, field) in &all {
            if current != Some(who.as_str()) {
                lines.push(format!("conflicts with {who}:"));
                current = Some(who);
            }
            lines.push(format!("- {field}"));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            all.len(),
            lines.join("\n")
        )
    };
    let mut status = Status::failure(409, "Conflict", message);
    status.details = Some(StatusDetails {
        causes,
        ..Default::default()
    });
    status
        .extra
        .insert("metadata".into(), serde_json::json!({}));
    ApiErr {
        status: Box::new(status),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind() -> &'static Kind {
        super::super::kinds::by_plural("apiservices").unwrap()
    }

    fn config(spec: Value) -> Value {
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": "v1.a.io", "labels": {"o": "true"}}, "spec": spec})
    }

    fn owners(obj: &Value) -> Vec<(String, String, Value)> {
        obj["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["manager"].as_str().unwrap().to_string(),
                    e["operation"].as_str().unwrap().to_string(),
                    e["fieldsV1"].clone(),
                )
            })
            .collect()
    }

    #[test]
    fn an_apply_owns_exactly_its_fields_and_releases_the_ones_it_drops() {
        let c1 =
            config(json!({"group": "a.io", "versionPriority": 1, "insecureSkipTLSVerify": true}));
        let created = apply(kind(), None, &c1, "me", true, None).unwrap();
        assert_eq!(
            owners(&created),
            [(
                "me".into(),
                "Apply".into(),
                json!({"f:metadata": {"f:labels": {"f:o": {}}},
                       "f:spec": {"f:group": {}, "f:insecureSkipTLSVerify": {}, "f:versionPriority": {}}})
            )]
        );
        let c2 = config(json!({"group": "a.io", "versionPriority": 1}));
        let after = apply(kind(), Some(&created), &c2, "me", true, None).unwrap();
        assert!(
            after["spec"].get("insecureSkipTLSVerify").is_none(),
            "{after}"
        );
        assert_eq!(after["spec"]["group"], "a.io");
    }

    #[test]
    fn a_dropped_field_another_manager_owns_stays() {
        let c1 = config(json!({"group": "a.io", "caBundle": "QQ=="}));
        let mut obj = apply(kind(), None, &c1, "me", true, None).unwrap();
        obj["metadata"]["uid"] = json!("u");
        // Another applier sets the same value: both own it, and no conflict.
        let theirs = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1.a.io"}, "spec": {"caBundle": "QQ=="}});
        let shared = apply(kind(), Some(&obj), &theirs, "other", false, None).unwrap();
        let c2 = config(json!({"group": "a.io"}));
        let after = apply(kind(), Some(&shared), &c2, "me", true, None).unwrap();
        assert_eq!(after["spec"]["caBundle"], "QQ==");
        // Without them, it goes.
        let alone = apply(kind(), Some(&obj), &c2, "me", true, None).unwrap();
        assert!(alone["spec"].get("caBundle").is_none(), "{alone}");
        // An update by an injector takes the field: dropping it leaves it theirs.
        let before = obj.clone();
        obj["spec"]["caBundle"] = json!("Qg==");
        managedfields::stamp(kind(), Some(&before), &mut obj, "cainjector", None);
        let after = apply(kind(), Some(&obj), &c2, "me", true, None).unwrap();
        assert_eq!(after["spec"]["caBundle"], "Qg==");
    }

    #[test]
    fn without_force_a_changed_field_of_another_manager_is_a_conflict_naming_it() {
        let c1 = config(json!({"group": "a.io", "caBundle": "QQ=="}));
        let mut obj = apply(kind(), None, &c1, "me", true, None).unwrap();
        obj["metadata"]["uid"] = json!("u");
        let before = obj.clone();
        obj["spec"]["caBundle"] = json!("Qg==");
        managedfields::stamp(kind(), Some(&before), &mut obj, "cainjector", None);
        let e = apply(kind(), Some(&obj), &c1, "me", false, None).unwrap_err();
        assert_eq!(e.code(), 409);
        let msg = e.status.message.clone().unwrap();
        assert_eq!(
            msg,
            "Apply failed with 1 conflict: conflict with \"cainjector\" using apiregistration.k8s.io/v1: .spec.caBundle"
        );
        let causes = &e.status.details.as_ref().unwrap().causes;
        assert_eq!(causes[0].reason.as_deref(), Some("FieldManagerConflict"));
        assert_eq!(causes[0].field.as_deref(), Some(".spec.caBundle"));
        // With force the field is ours again, and theirs no more.
        let forced = apply(kind(), Some(&obj), &c1, "me", true, None).unwrap();
        assert_eq!(forced["spec"]["caBundle"], "QQ==");
        assert!(owners(&forced).iter().all(|(m, _, _)| m != "cainjector"));
    }

    #[test]
    fn an_object_without_managed_fields_gets_a_before_first_apply_owner() {
        let live = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1.a.io", "uid": "u"}, "spec": {"group": "a.io", "versionPriority": 1}});
        let c = config(json!({"group": "a.io", "versionPriority": 2}));
        let e = apply(kind(), Some(&live), &c, "me", false, None).unwrap_err();
        assert!(e.status.message.unwrap().contains("\"before-first-apply\""));
        let forced = apply(kind(), Some(&live), &c, "me", true, None).unwrap();
        let who: Vec<(String, String)> = owners(&forced)
            .into_iter()
            .map(|(m, o, _)| (m, o))
            .collect();
        assert_eq!(
            who,
            [
                ("me".into(), "Apply".into()),
                ("before-first-apply".into(), "Update".into())
            ]
        );
    }

    #[test]
    fn an_apply_that_changes_nothing_keeps_its_time() {
        let c = config(json!({"group": "a.io"}));
        let mut obj = apply(kind(), None, &c, "me", true, None).unwrap();
        obj["metadata"]["managedFields"][0]["time"] = json!("2020-01-01T00:00:00Z");
        let again = apply(kind(), Some(&obj), &c, "me", true, None).unwrap();
        assert_eq!(again, obj);
    }

    #[test]
    fn a_uid_that_is_not_the_objects_is_refused() {
        let c = config(json!({"group": "a.io"}));
        let mut obj = apply(kind(), None, &c, "me", true, None).unwrap();
        obj["metadata"]["uid"] = json!("u");
        let mut other = c.clone();
        other["metadata"]["uid"] = json!("v");
        let e = apply(kind(), Some(&obj), &other, "me", true, None).unwrap_err();
        assert_eq!(e.code(), 422);
        assert!(e
            .status
            .message
            .unwrap()
            .contains("metadata.uid: Invalid value: \"v\": field is immutable"));
    }
}
