//! Field ownership of our writes (server-side apply): the configuration a desired entry
//! declares, how an object and its `managedFields` compare with it, and how ownership
//! written by `update` moves to our apply.
//!
//! We own exactly the fields the manifest declares (plus our ownership label): an apply
//! sends them, kube-apiserver records them as our `Apply` entry, and fields other managers
//! write (an injected `caBundle`, a webhook's default) are theirs: never compared, never
//! removed. A field we stop declaring is released by the next apply (the server removes
//! it unless another manager owns it); we know what we declared before from our own
//! `Apply` entry, which is what the server says we own.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::decision::{Desired, Ownership};
use crate::api::{APIService, FieldOwnership, FieldPath, ObjectMeta, Operation, Resource};

/// What the server sets in an APIService the manifest leaves unset
/// (`SetDefaults_ServiceReference` in kube-aggregator's `apiregistration/v1/defaults.go`):
/// a field our old `update` entry owns only because it was defaulted is not "ours".
const DEFAULTS: &[(&[&str], i64)] = &[(&["spec", "service", "port"], 443)];

/// The metadata a configuration declares beside labels and annotations; the types keep
/// them among the unknown fields (`extra`).
const DECLARED_EXTRA: [&str; 2] = ["finalizers", "ownerReferences"];

/// `meta`'s `key` of [`DECLARED_EXTRA`], a null read as absent (as the server writes it).
fn declared_extra<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a Value> {
    meta.extra.get(key).filter(|v| !v.is_null())
}

/// Our applied configuration for one desired entry, and each field it declares.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    /// What an apply (or a create) sends: name, our label, the manifest's labels,
    /// annotations, finalizers and owner references, and its spec.
    pub config: APIService,
    /// The declared part of `config` as JSON (see [`scoped_object`]): its leaves are the
    /// declared fields. Decisions walk it beside the object's; listing the leaves (paths
    /// built, sorted) is left to what needs the list.
    tree: Value,
}

impl Applied {
    /// The configuration `ownership` applies for `desired` (its CA bundle filled in).
    pub fn of(ownership: &Ownership, desired: &Desired) -> Applied {
        Applied::from_config(Applied::config(ownership, desired))
    }

    /// What an apply or a create sends for `desired`, without listing its fields (a
    /// create compares nothing).
    pub fn config(ownership: &Ownership, desired: &Desired) -> APIService {
        // Built from the parts it takes, not from a labelled copy of the whole object.
        let obj = &desired.object;
        let mut config = APIService::new(obj.name(), obj.spec.clone());
        config.metadata.labels = obj.metadata.labels.clone();
        ownership.label(&mut config.metadata, desired.mode);
        config.metadata.annotations = obj.metadata.annotations.clone();
        for key in DECLARED_EXTRA {
            if let Some(v) = obj.metadata.extra.get(key) {
                config.metadata.extra.insert(key.to_string(), v.clone());
            }
        }
        config
    }

    /// Whether `current` holds exactly what `config` declares and nothing more in the
    /// declared scope (labels, annotations, finalizers, owner references, spec). Then the
    /// two scoped trees are the same, so [`compare`](Self::compare) finds no field that
    /// differs and none of ours to release, and a decision skips building them (the
    /// common case: the event of our own write). Unknown spec fields may hold nulls,
    /// which the trees treat as absent; a configuration with any takes the comparison.
    pub fn holds_exactly(config: &APIService, current: &APIService) -> bool {
        let (c, o) = (&config.metadata, &current.metadata);
        config.spec.extra.is_empty()
            && config
                .spec
                .service
                .as_ref()
                .is_none_or(|s| s.extra.is_empty())
            && config.spec == current.spec
            && c.labels == o.labels
            && c.annotations == o.annotations
            && DECLARED_EXTRA
                .iter()
                .all(|k| declared_extra(c, k) == declared_extra(o, k))
    }

    /// A configuration as it is: what it sets is what it declares.
    pub fn from_config(config: APIService) -> Applied {
        let tree = scoped_object(&config);
        Applied { config, tree }
    }

    /// The declared fields, sorted by path.
    pub fn declared(&self) -> Vec<FieldPath> {
        let mut out = Vec::new();
        leaves(&self.tree, &mut Vec::new(), &mut out);
        // Map keys are sorted (serde_json's `Map` is a `BTreeMap`), so the walk's order is
        // the paths' order; sorted anyway, not to depend on that.
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.into_iter().map(|(p, _)| p).collect()
    }

    /// Whether `path` is declared: a declared field, a field inside one, or a map or struct
    /// holding one.
    fn declares(&self, path: &FieldPath) -> bool {
        let mut v = &self.tree;
        for (depth, seg) in path.0.iter().enumerate() {
            if depth > 0 && is_leaf(v) {
                // A declared field holds `path`.
                return true;
            }
            match (seg.strip_prefix("f:"), v.as_object()) {
                (Some(key), Some(m)) => match m.get(key) {
                    Some(x) if !x.is_null() => v = x,
                    _ => return false,
                },
                _ => return false,
            }
        }
        // `path` is a declared field or holds one.
        has_leaf(v, !path.0.is_empty())
    }

    /// How `current` compares with this configuration, for `manager`'s writes.
    pub fn compare(&self, current: &APIService, manager: &str) -> Comparison {
        let object = scoped_object(current);
        let mut differs = Vec::new();
        differing(&self.tree, Some(&object), &mut Vec::new(), &mut differs);
        differs.sort();
        let owners = current.metadata.field_ownership();
        let owners = owners.as_deref();
        let entry = |op| owners.and_then(|o| o.entry(manager, op));
        let applied = entry(Operation::Apply);
        let updated = entry(Operation::Update);
        let mut released = BTreeSet::new();
        for (field, by_update_only) in applied
            .iter()
            .flat_map(|e| e.fields.iter().map(|f| (f, false)))
            .chain(
                updated
                    .iter()
                    .flat_map(|e| e.fields.iter().map(|f| (f, true))),
            )
        {
            // A declared field stays ours (most of what we own: checked first, before the
            // lookup). Releasing what the object does not hold changes nothing; a default
            // our old entry owns for having created the object comes back as it was. (Our
            // writes set only the scoped fields, so the scoped object holds all we can own.)
            if self.declares(field) {
                continue;
            }
            let present = value_at(&object, field);
            let defaulted = by_update_only
                && present.is_some_and(|v| is_default(field, v))
                && !applied.is_some_and(|a| a.fields.contains(field));
            if present.is_some() && !defaulted {
                released.insert(field.clone());
            }
        }
        // Only a release needs our update entry moved first: the apply releases what our
        // apply entry held, and that entry would keep the rest. Any other apply takes what
        // it changes from it anyway, so a create (which writes with update) costs no
        // extra write until a field is dropped.
        let migrate = updated.is_some_and(|u| released.iter().any(|r| u.touches(r)));
        Comparison {
            differs,
            released: released.into_iter().collect(),
            migrate,
        }
    }

    /// The fields of `current` this configuration does not declare that managers other
    /// than `manager` own, with those managers: what an apply leaves to them (`plan`).
    pub fn kept(&self, current: &APIService, manager: &str) -> Vec<(FieldPath, Vec<String>)> {
        let Some(owners) = current.metadata.field_ownership() else {
            return Vec::new();
        };
        let mut fields = Vec::new();
        leaves(&scoped_object(current), &mut Vec::new(), &mut fields);
        fields
            .into_iter()
            .filter(|(p, _)| !self.declares(p))
            .filter_map(|(p, _)| {
                let by: Vec<String> = owners
                    .owners_of(&p, manager)
                    .into_iter()
                    .map(str::to_string)
                    .collect();
                (!by.is_empty()).then_some((p, by))
            })
            .collect()
    }

    /// Whether `current`'s spec has every declared spec field's value (for an object that
    /// is not ours: the labels are its owner's business).
    pub fn spec_matches(&self, current: &APIService) -> bool {
        let Some(declared) = self.tree.get("spec") else {
            return true;
        };
        let spec = serde_json::to_value(&current.spec).unwrap_or(Value::Null);
        let mut differs = Vec::new();
        differing(declared, Some(&spec), &mut vec!["spec"], &mut differs);
        differs.is_empty()
    }
}

/// How an object compares with our applied configuration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// Declared fields whose value the object does not have.
    pub differs: Vec<FieldPath>,
    /// Fields we own and no longer declare: an apply releases them.
    pub released: Vec<FieldPath>,
    /// Our `update` entry (a create, earlier versions, an adoption by update) owns a
    /// field to release: the entry moves into our apply entry before the apply, so that
    /// the apply can release it.
    pub migrate: bool,
}

impl Comparison {
    /// Whether an apply would change the object or what we own.
    pub fn needs_apply(&self) -> bool {
        !self.differs.is_empty() || !self.released.is_empty()
    }
}

/// The part of an object a configuration declares: labels, annotations, finalizers and
/// owner references of its metadata, and its spec (from its JSON: the reference
/// [`scoped_object`] is tested against).
#[cfg(test)]
fn scoped(obj: &Value) -> Value {
    let mut out = Map::new();
    if let Some(meta) = obj.get("metadata") {
        let mut m = Map::new();
        for key in ["labels", "annotations", "finalizers", "ownerReferences"] {
            if let Some(v) = meta.get(key).filter(|v| !v.is_null()) {
                m.insert(key.into(), v.clone());
            }
        }
        if !m.is_empty() {
            out.insert("metadata".into(), Value::Object(m));
        }
    }
    if let Some(spec) = obj.get("spec").filter(|v| !v.is_null()) {
        out.insert("spec".into(), spec.clone());
    }
    Value::Object(out)
}

/// The part of an object a configuration declares: labels, annotations, finalizers and
/// owner references of its metadata, and its spec. Only those parts are serialized:
/// decisions compare every watched object, and its `managedFields` and status are most of
/// its JSON.
fn scoped_object(obj: &APIService) -> Value {
    let meta = &obj.metadata;
    let mut m = Map::new();
    let maps = [("labels", &meta.labels), ("annotations", &meta.annotations)];
    for (key, map) in maps {
        if let Some(v) = map.as_ref().and_then(|v| serde_json::to_value(v).ok()) {
            m.insert(key.into(), v);
        }
    }
    for key in DECLARED_EXTRA {
        if let Some(v) = declared_extra(meta, key) {
            m.insert(key.into(), v.clone());
        }
    }
    let mut out = Map::new();
    if !m.is_empty() {
        out.insert("metadata".into(), Value::Object(m));
    }
    if let Some(spec) = serde_json::to_value(&obj.spec)
        .ok()
        .filter(|v| !v.is_null())
    {
        out.insert("spec".into(), spec);
    }
    Value::Object(out)
}

/// Every field of `v` as the server's field sets count them: scalars, lists (as a whole)
/// and empty maps.
fn leaves(v: &Value, at: &mut Vec<String>, out: &mut Vec<(FieldPath, Value)>) {
    match v.as_object() {
        Some(m) if !m.is_empty() => {
            for (k, x) in m {
                at.push(format!("f:{k}"));
                leaves(x, at, out);
                at.pop();
            }
        }
        _ if !at.is_empty() && !v.is_null() => out.push((FieldPath(at.clone()), v.clone())),
        _ => {}
    }
}

/// A declared field by the rule of [`leaves`]: a scalar, a list or an empty map, below the
/// root.
fn is_leaf(v: &Value) -> bool {
    !v.is_null() && v.as_object().is_none_or(Map::is_empty)
}

/// Whether `v` is a leaf (`below_root`) or holds one.
fn has_leaf(v: &Value, below_root: bool) -> bool {
    match v.as_object() {
        Some(m) if !m.is_empty() => m.values().any(|x| has_leaf(x, true)),
        _ => below_root && !v.is_null(),
    }
}

/// The leaves of `declared` (below the keys `at`) whose value `current`, the same place in
/// the object, does not have as [`value_at`] reads it; a path is built only for those.
fn differing<'a>(
    declared: &'a Value,
    current: Option<&Value>,
    at: &mut Vec<&'a str>,
    out: &mut Vec<FieldPath>,
) {
    match declared.as_object() {
        Some(m) if !m.is_empty() => {
            for (k, x) in m {
                at.push(k);
                differing(x, current.and_then(|c| c.get(k)), at, out);
                at.pop();
            }
        }
        _ if !at.is_empty()
            && !declared.is_null()
            && current.filter(|c| !c.is_null()) != Some(declared) =>
        {
            out.push(FieldPath::of_keys(at.iter().copied()));
        }
        _ => {}
    }
}

/// The value at `path` in `obj`, if every segment names a field that is there.
fn value_at<'a>(obj: &'a Value, path: &FieldPath) -> Option<&'a Value> {
    let mut v = obj;
    for seg in &path.0 {
        v = v.get(seg.strip_prefix("f:")?)?;
    }
    (!v.is_null()).then_some(v)
}

fn is_default(path: &FieldPath, v: &Value) -> bool {
    // Compared segment by segment: every field we own passes here (a path built to compare
    // with was most of a decision's cost).
    let is_path = |keys: &[&str]| {
        path.0.len() == keys.len()
            && path
                .0
                .iter()
                .zip(keys)
                .all(|(seg, key)| seg.strip_prefix("f:") == Some(*key))
    };
    DEFAULTS
        .iter()
        .any(|(keys, default)| v.as_i64() == Some(*default) && is_path(keys))
}

/// Why ownership moves before an apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takeover {
    /// Nothing to move: our apply entry is all we own.
    None,
    /// Our `update` entry (earlier versions of this program, and every create, wrote with
    /// `update`) moves into our apply entry, as kubectl's `csaupgrade` moves its own.
    OwnUpdates,
    /// An adoption: the object was someone else's.
    Adoption,
}

/// The `managedFields` list after a takeover of `declared` by `manager`, from the live
/// list; `None` when nothing moves. Entries are rewritten as kubectl's `csaupgrade`
/// rewrites them (`client-go/util/csaupgrade`): our `Update` entry's field set is merged
/// into our `Apply` entry (which it becomes when there is none) and dropped. Beyond
/// `csaupgrade`, the declared fields leave every other `Update` entry (an adopted object's
/// creator, `before-first-apply`, whoever wrote the same value as ours): what we declare
/// becomes ours alone, so dropping it later removes it; the rest stays theirs.
pub fn takeover(
    live: &Value,
    manager: &str,
    declared: &[FieldPath],
    how: Takeover,
    api_version: &str,
) -> Option<Value> {
    let list = live.as_array()?;
    let is = |e: &Value, op: &str| {
        e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some(op)
            && e.get("subresource")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
    };
    let mut out: Vec<Value> = Vec::with_capacity(list.len() + 1);
    let mut ours: Option<Value> = list.iter().find(|e| is(e, "Apply")).cloned();
    let mut moved = json!({});
    for e in list {
        if is(e, "Apply") {
            continue;
        }
        if is(e, "Update") {
            merge_fields(&mut moved, e.get("fieldsV1").unwrap_or(&Value::Null));
            if ours.is_none() {
                let mut renamed = e.clone();
                renamed["operation"] = json!("Apply");
                renamed["fieldsV1"] = json!({});
                ours = Some(renamed);
            }
            continue;
        }
        let mut e = e.clone();
        let theirs = e.get("operation").and_then(Value::as_str) == Some("Update")
            && e.get("subresource")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
        if theirs {
            if let Some(fields) = e.get_mut("fieldsV1") {
                for p in declared {
                    remove_field(fields, &p.0);
                }
                if fields.as_object().is_some_and(Map::is_empty) {
                    continue;
                }
            }
        }
        out.push(e);
    }
    let mut ours = ours.unwrap_or_else(|| {
        json!({"manager": manager, "operation": "Apply", "apiVersion": api_version,
               "fieldsType": "FieldsV1", "fieldsV1": {}})
    });
    if let Some(fields) = ours.get_mut("fieldsV1") {
        if !fields.is_object() {
            *fields = json!({});
        }
        merge_fields(fields, &moved);
        if how == Takeover::Adoption {
            for p in declared {
                add_field(fields, &p.0);
            }
        }
    }
    if ours["fieldsV1"].as_object().is_some_and(|m| !m.is_empty()) {
        out.insert(0, ours);
    }
    let new = Value::Array(out);
    (new != *live).then_some(new)
}

/// Adds every field of the set `from` to the set `into`.
fn merge_fields(into: &mut Value, from: &Value) {
    let (Some(i), Some(f)) = (into.as_object_mut(), from.as_object()) else {
        return;
    };
    for (k, v) in f {
        let slot = i.entry(k.clone()).or_insert_with(|| json!({}));
        merge_fields(slot, v);
    }
}

fn add_field(set: &mut Value, path: &[String]) {
    let mut node = set;
    for seg in path {
        let Some(m) = node.as_object_mut() else {
            return;
        };
        node = m.entry(seg.clone()).or_insert_with(|| json!({}));
    }
}

/// Removes `path` from a field set, and every node it leaves owning nothing (a `.` alone
/// says the node itself is owned, as a parent of fields that are now someone else's).
fn remove_field(set: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(m) = set.as_object_mut() else {
        return;
    };
    if rest.is_empty() {
        m.remove(first);
        return;
    }
    if let Some(child) = m.get_mut(first) {
        remove_field(child, rest);
        let emptied = child
            .as_object()
            .is_some_and(|c| c.is_empty() || (c.len() == 1 && c.contains_key(".")));
        if emptied {
            m.remove(first);
        }
    }
}

/// One field an apply changes: its value now and after (`None`: absent; a released field
/// goes unless another manager owns it).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldChange {
    /// The field.
    pub field: FieldPath,
    /// Its value in the object.
    pub old: Option<Value>,
    /// Its value after the apply.
    pub new: Option<Value>,
}

/// What applying `config` to `current` changes: `differs` set to their declared values,
/// `released` removed.
pub fn field_changes(
    config: &APIService,
    differs: &[FieldPath],
    released: &[FieldPath],
    current: &APIService,
) -> Vec<FieldChange> {
    let object = serde_json::to_value(current).unwrap_or(Value::Null);
    let config = serde_json::to_value(config).unwrap_or(Value::Null);
    let set = differs.iter().map(|p| FieldChange {
        field: p.clone(),
        old: value_at(&object, p).cloned(),
        new: value_at(&config, p).cloned(),
    });
    let gone = released.iter().map(|p| FieldChange {
        field: p.clone(),
        old: value_at(&object, p).cloned(),
        new: None,
    });
    set.chain(gone).collect()
}

/// The other managers owning any of `paths` on `owners`, each once.
pub fn others_owning<'a>(
    owners: &'a FieldOwnership,
    paths: &[FieldPath],
    manager: &str,
) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for p in paths {
        for m in owners.owners_of(p, manager) {
            if !out.contains(&m) {
                out.push(m);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{APIServiceSpec, RawJson, ServiceReference, StringMap};
    use crate::controller::decision::SyncMode;

    const ME: &str = "autoregister";

    fn desired(ca: Option<&[u8]>) -> Desired {
        let mut o = APIService::new(
            "v1.a.io",
            APIServiceSpec {
                group: "a.io".into(),
                version: "v1".into(),
                group_priority_minimum: 100,
                version_priority: 10,
                service: Some(ServiceReference {
                    namespace: "ns".into(),
                    name: "svc".into(),
                    ..Default::default()
                }),
                ca_bundle: ca.map(|c| c.to_vec().into_boxed_slice()),
                ..Default::default()
            },
        );
        o.metadata.set_label("team", "x");
        Desired::new(&o, SyncMode::Always)
    }

    /// The object the server would hold after our apply of `d`, with `managed_fields`.
    fn stored(d: &Desired, managed_fields: Value) -> APIService {
        let mut o = Applied::of(&Ownership::default(), d).config;
        if let Some(s) = o.spec.service.as_mut() {
            s.port = Some(443);
        }
        o.metadata.uid = Some("u".into());
        o.metadata.managed_fields = Some(RawJson::from_value(&managed_fields));
        o
    }

    fn ours(fields: Value) -> Value {
        json!({"manager": ME, "operation": "Apply", "apiVersion": "apiregistration.k8s.io/v1",
               "fieldsType": "FieldsV1", "fieldsV1": fields})
    }

    fn names(paths: &[FieldPath]) -> Vec<String> {
        paths.iter().map(ToString::to_string).collect()
    }

    fn spec_fields() -> Value {
        json!({"f:group": {}, "f:groupPriorityMinimum": {}, "f:service": {"f:name": {}, "f:namespace": {}},
               "f:version": {}, "f:versionPriority": {}})
    }

    #[test]
    fn the_typed_scope_is_the_scope_of_the_whole_objects_json() {
        let d = desired(Some(b"ca"));
        let mut obj = stored(&d, json!([ours(json!({"f:spec": spec_fields()}))]));
        obj.metadata.annotations = Some(StringMap::from([("a".to_string(), "b".to_string())]));
        obj.metadata
            .extra
            .insert("finalizers".into(), json!(["x/y"]));
        obj.metadata
            .extra
            .insert("ownerReferences".into(), json!([{"uid": "o", "name": "n"}]));
        obj.metadata.extra.insert("generateName".into(), json!("g"));
        obj.status = serde_json::from_value(
            json!({"conditions": [{"type": "Available", "status": "True"}]}),
        )
        .unwrap();
        let whole = serde_json::to_value(&obj).unwrap();
        assert!(whole["metadata"]["managedFields"].is_array());
        assert_eq!(scoped_object(&obj), scoped(&whole));
        assert_eq!(
            scoped_object(&APIService::default()),
            scoped(&serde_json::to_value(APIService::default()).unwrap())
        );
    }

    #[test]
    fn the_configuration_declares_the_manifests_fields_and_our_label_only() {
        let a = Applied::of(&Ownership::default(), &desired(None));
        assert_eq!(
            a.declared()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "metadata.labels[\"autoregister.dev/automanaged\"]",
                "metadata.labels[\"team\"]",
                "spec.group",
                "spec.groupPriorityMinimum",
                "spec.service.name",
                "spec.service.namespace",
                "spec.version",
                "spec.versionPriority",
            ]
        );
    }

    #[test]
    fn a_field_another_manager_set_is_kept_not_a_difference() {
        let d = desired(None);
        let mut obj = stored(
            &d,
            json!([ours(json!({"f:metadata": {"f:labels": {"f:autoregister.dev/automanaged": {}, "f:team": {}}}, "f:spec": spec_fields()})),
                   {"manager": "cainjector", "operation": "Update", "apiVersion": "apiregistration.k8s.io/v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:caBundle": {}}}}]),
        );
        obj.spec.ca_bundle = Some(b"injected".to_vec().into_boxed_slice());
        let a = Applied::of(&Ownership::default(), &d);
        let c = a.compare(&obj, ME);
        assert!(!c.needs_apply(), "{c:?}");
        assert_eq!(
            a.kept(&obj, ME)
                .iter()
                .map(|(p, by)| format!("{p}: {}", by.join(",")))
                .collect::<Vec<_>>(),
            ["spec.caBundle: cainjector"]
        );
        // Declaring it makes it ours: a difference, owned by the injector.
        let c = Applied::of(&Ownership::default(), &desired(Some(b"mine"))).compare(&obj, ME);
        assert_eq!(names(&c.differs), ["spec.caBundle"]);
        let owners = obj.metadata.field_ownership().unwrap();
        assert_eq!(others_owning(&owners, &c.differs, ME), ["cainjector"]);
    }

    #[test]
    fn a_field_we_own_and_no_longer_declare_is_released() {
        let d = desired(None);
        let mut obj = stored(
            &d,
            json!([ours(
                json!({"f:metadata": {"f:labels": {"f:autoregister.dev/automanaged": {}, "f:team": {}, "f:old": {}}},
                                "f:spec": spec_fields()})
            )]),
        );
        obj.metadata.set_label("old", "y");
        let c = Applied::of(&Ownership::default(), &d).compare(&obj, ME);
        assert!(c.differs.is_empty());
        assert_eq!(names(&c.released), ["metadata.labels[\"old\"]"]);
        assert!(!c.migrate);
    }

    #[test]
    fn an_update_entry_of_ours_migrates_and_its_defaults_are_not_released() {
        let d = desired(None);
        // As created by POST (or by an earlier version): the update entry owns the port.
        let mut spec = spec_fields();
        spec["f:service"]["f:port"] = json!({});
        spec["f:service"]["."] = json!({});
        let obj = stored(
            &d,
            json!([{"manager": ME, "operation": "Update", "apiVersion": "apiregistration.k8s.io/v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:autoregister.dev/automanaged": {}, "f:team": {}}},
                                 "f:spec": spec}}]),
        );
        let c = Applied::of(&Ownership::default(), &d).compare(&obj, ME);
        assert!(!c.needs_apply(), "{c:?}");
        assert!(!c.migrate, "nothing to release: no extra write");
        // A manifest that drops the label team: released, and the entry migrates first.
        let mut fewer = (*d.object).clone();
        fewer.metadata.remove_label("team");
        let c = Applied::of(&Ownership::default(), &Desired::new(&fewer, d.mode)).compare(&obj, ME);
        assert_eq!(names(&c.released), ["metadata.labels[\"team\"]"]);
        assert!(c.migrate);
    }

    /// The shortcut of a decision agrees with the comparison: an object that holds exactly
    /// the configuration's scope needs no apply, whatever we own; any change to that scope
    /// (or unknown spec fields) takes the comparison.
    #[test]
    fn an_object_holding_exactly_the_configuration_needs_no_apply() {
        let mut with_port = (*desired(None).object).clone();
        if let Some(s) = with_port.spec.service.as_mut() {
            s.port = Some(443);
        }
        let d = Desired::new(&with_port, SyncMode::Always);
        let labels = json!({"f:autoregister.dev/automanaged": {}, "f:team": {}, "f:old": {}});
        let fields = json!([ours(
            json!({"f:metadata": {"f:labels": labels}, "f:spec": spec_fields()})
        )]);
        let config = Applied::config(&Ownership::default(), &d);
        let base = stored(&d, fields);
        assert!(Applied::holds_exactly(&config, &base));
        type Change = (&'static str, fn(&mut APIService));
        let changes: [Change; 7] = [
            ("a label we own and no longer declare", |o| {
                o.metadata.set_label("old", "y")
            }),
            ("a spec field", |o| o.spec.version_priority = 11),
            ("an injected CA bundle", |o| {
                o.spec.ca_bundle = Some(b"x".to_vec().into_boxed_slice())
            }),
            ("an annotation", |o| {
                o.metadata.annotations = Some(StringMap::from([("a".into(), "b".into())]))
            }),
            ("a finalizer", |o| {
                o.metadata.extra.insert("finalizers".into(), json!(["f"]));
            }),
            ("the port", |o| {
                if let Some(s) = o.spec.service.as_mut() {
                    s.port = None;
                }
            }),
            ("an unknown spec field", |o| {
                o.spec.extra.insert("x".into(), json!({"y": null}));
            }),
        ];
        let mut object = base.clone();
        object
            .metadata
            .extra
            .insert("finalizers".into(), Value::Null);
        assert!(Applied::holds_exactly(&config, &object), "null is absent");
        for (what, change) in changes {
            let mut object = base.clone();
            change(&mut object);
            assert!(!Applied::holds_exactly(&config, &object), "{what}");
            // The configuration changed the same way: held exactly only when the
            // comparison agrees.
            let mut declared = (*d.object).clone();
            change(&mut declared);
            let config = Applied::config(&Ownership::default(), &Desired::new(&declared, d.mode));
            if Applied::holds_exactly(&config, &object) {
                let c = Applied::from_config(config).compare(&object, ME);
                assert!(!c.needs_apply(), "{what}: {c:?}");
            }
        }
        let c = Applied::from_config(config).compare(&base, ME);
        assert!(!c.needs_apply(), "{c:?}");
    }

    #[test]
    fn a_not_ours_object_matches_on_its_declared_spec_fields() {
        let d = desired(None);
        let mut theirs = stored(&d, json!([]));
        theirs.metadata.labels = None;
        theirs.spec.ca_bundle = Some(b"injected".to_vec().into_boxed_slice());
        let a = Applied::of(&Ownership::default(), &d);
        assert!(a.spec_matches(&theirs));
        theirs.spec.version_priority = 11;
        assert!(!a.spec_matches(&theirs));
    }

    #[test]
    fn takeover_moves_our_update_entry_into_our_apply_entry() {
        let live = json!([
            {"manager": "kube-apiserver", "operation": "Update", "subresource": "status",
             "apiVersion": "apiregistration.k8s.io/v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}},
            {"manager": ME, "operation": "Update", "time": "2026-01-01T00:00:00Z",
             "apiVersion": "apiregistration.k8s.io/v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:group": {}, "f:insecureSkipTLSVerify": {}}}},
        ]);
        let new = takeover(
            &live,
            ME,
            &[],
            Takeover::OwnUpdates,
            "apiregistration.k8s.io/v1",
        )
        .unwrap();
        assert_eq!(
            new,
            json!([
                {"manager": ME, "operation": "Apply", "time": "2026-01-01T00:00:00Z",
                 "apiVersion": "apiregistration.k8s.io/v1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:group": {}, "f:insecureSkipTLSVerify": {}}}},
                live[0].clone(),
            ])
        );
        // Nothing left to move: no patch.
        assert_eq!(takeover(&new, ME, &[], Takeover::OwnUpdates, "v"), None);
    }

    #[test]
    fn an_adoption_takes_the_declared_fields_from_other_updaters_and_leaves_the_rest() {
        let live = json!([
            {"manager": "kubectl-create", "operation": "Update", "apiVersion": "apiregistration.k8s.io/v1",
             "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:group": {}, "f:insecureSkipTLSVerify": {},
                                     "f:service": {".": {}, "f:name": {}}}}},
        ]);
        let declared = vec![
            FieldPath::of_keys(["spec", "group"]),
            FieldPath::of_keys(["spec", "service", "name"]),
        ];
        let new = takeover(
            &live,
            ME,
            &declared,
            Takeover::Adoption,
            "apiregistration.k8s.io/v1",
        )
        .unwrap();
        assert_eq!(new[0]["manager"], ME);
        assert_eq!(new[0]["operation"], "Apply");
        assert_eq!(
            new[0]["fieldsV1"],
            json!({"f:spec": {"f:group": {}, "f:service": {"f:name": {}}}})
        );
        assert_eq!(
            new[1]["fieldsV1"],
            json!({"f:spec": {"f:insecureSkipTLSVerify": {}}})
        );
    }

    /// The tree walks (`declares`, `differing`) against the rules on the list of declared
    /// fields they replace: `d.is_within(path) || path.is_within(d)` for some declared `d`,
    /// and `value_at(object, d) != Some(value)`.
    #[test]
    fn the_tree_walks_agree_with_the_declared_list() {
        let tree = json!({"metadata": {"labels": {"a": "1", "b": ""}, "finalizers": ["x"]},
            "spec": {"group": "g", "n": null, "empty": {}, "service": {"name": "s", "port": 443}}});
        let mut list = Vec::new();
        leaves(&tree, &mut Vec::new(), &mut list);
        let applied = Applied {
            config: APIService::default(),
            tree: tree.clone(),
        };
        let p = |keys: &[&str]| FieldPath(keys.iter().map(|k| k.to_string()).collect());
        let paths = [
            p(&[]),
            p(&["f:metadata"]),
            p(&["f:metadata", "f:labels"]),
            p(&["f:metadata", "f:labels", "f:a"]),
            p(&["f:metadata", "f:labels", "f:c"]),
            p(&["f:metadata", "f:finalizers"]),
            p(&["f:metadata", "f:finalizers", "v:\"x\""]),
            p(&["f:metadata", "f:annotations"]),
            p(&["f:spec", "f:n"]),
            p(&["f:spec", "f:empty"]),
            p(&["f:spec", "f:empty", "f:x"]),
            p(&["f:spec", "f:service"]),
            p(&["f:spec", "f:service", "."]),
            p(&["f:spec", "f:service", "f:port", "f:deeper"]),
            p(&["f:status"]),
            p(&["k:{}"]),
        ];
        for path in &paths {
            let by_list = list
                .iter()
                .any(|(d, _)| d.is_within(path) || path.is_within(d));
            assert_eq!(applied.declares(path), by_list, "{path:?}");
        }
        let objects = [
            tree.clone(),
            json!({}),
            json!({"metadata": {"labels": {"a": "2", "b": ""}, "finalizers": ["x", "y"]},
                "spec": {"group": "g", "n": 1, "empty": {"k": 1}, "service": {"name": "s"}}}),
            json!({"metadata": {"labels": "a"}, "spec": {"group": null, "empty": {},
                "service": {"name": "s", "port": 443, "extra": true}}}),
        ];
        for object in &objects {
            let by_list: Vec<FieldPath> = list
                .iter()
                .filter(|(d, v)| value_at(object, d) != Some(v))
                .map(|(d, _)| d.clone())
                .collect();
            let mut walked = Vec::new();
            differing(&tree, Some(object), &mut Vec::new(), &mut walked);
            assert_eq!(walked, by_list, "{object}");
        }
        assert_eq!(
            applied.declared(),
            list.into_iter().map(|(d, _)| d).collect::<Vec<_>>()
        );
    }
}
