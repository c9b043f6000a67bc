//! Generic object storage: one global resourceVersion, a bounded event history, list snapshots.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::{Condvar, Mutex};
use serde_json::{json, Value};

use super::errors::{self, ApiErr};
use super::kinds::Kind;
use super::managedfields::{self, Sent};
use super::util;

/// `(plural, namespace, name)`; namespace is empty for cluster-scoped kinds.
pub(crate) type Key = (&'static str, String, String);

/// Watch event types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change, as kept in the history for watch replay.
pub(crate) struct Event {
    pub(crate) rv: u64,
    pub(crate) type_: EventType,
    pub(crate) plural: &'static str,
    pub(crate) namespace: String,
    pub(crate) obj: Arc<Value>,
    /// The object before the change, so label-selected watches can turn edits into ADDED/DELETED.
    pub(crate) prev: Option<Arc<Value>>,
}

/// A consistent list result served page by page.
struct Snapshot {
    rv: u64,
    items: Arc<Vec<Arc<Value>>>,
}

/// Most list snapshots kept for `continue` tokens; older tokens answer 410 like a compacted etcd.
const MAX_SNAPSHOTS: usize = 64;

/// Everything behind the store lock.
pub(crate) struct State {
    pub(crate) rv: u64,
    pub(crate) objects: BTreeMap<Key, Arc<Value>>,
    pub(crate) history: VecDeque<Arc<Event>>,
    /// Watches from any resourceVersion >= this can be replayed completely.
    pub(crate) history_start: u64,
    pub(crate) history_cap: usize,
    snapshots: HashMap<u64, Snapshot>,
    snapshot_order: VecDeque<u64>,
    next_snapshot: u64,
    /// Bumped by every restart; watches of an older epoch end.
    pub(crate) epoch: u64,
    pub(crate) shutdown: bool,
}

/// The shared store; `changed` wakes watches after every write, restart and shutdown.
pub(crate) struct Store {
    pub(crate) state: Mutex<State>,
    pub(crate) changed: Condvar,
    /// An admission policy for creates and updates (after validation), as a
    /// ValidatingAdmissionPolicy would be: `Some(why)` refuses with 422.
    pub(crate) admission: Mutex<Option<Admission>>,
    /// A mutating admission policy for creates (before validation), as a
    /// MutatingAdmissionPolicy or webhook would be.
    pub(crate) mutation: Mutex<Option<Mutation>>,
}

/// Refuses an object (kind's plural, object) with a message, or lets it pass.
pub type Admission = Arc<dyn Fn(&str, &Value) -> Option<String> + Send + Sync>;

/// Changes an object (kind's plural, object) being created.
pub type Mutation = Arc<dyn Fn(&str, &mut Value) + Send + Sync>;

/// One page of a list.
pub(crate) struct Page {
    pub(crate) rv: u64,
    pub(crate) items: Vec<Arc<Value>>,
    pub(crate) continue_token: Option<String>,
    pub(crate) remaining: Option<usize>,
}

/// What a list asks for.
pub(crate) struct ListRequest<'a> {
    pub(crate) namespace: Option<&'a str>,
    pub(crate) selector: &'a super::selector::Selector,
    pub(crate) limit: Option<usize>,
    pub(crate) continue_token: Option<&'a str>,
    pub(crate) resource_version: Option<&'a str>,
}

/// Delete preconditions.
#[derive(Default)]
pub(crate) struct Preconditions {
    pub(crate) uid: Option<String>,
    pub(crate) resource_version: Option<String>,
}

fn rv_of(obj: &Value) -> &str {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn meta_mut(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        // Just made sure metadata is an object.
        _ => unreachable!("metadata is an object"),
    }
}

/// Everything but metadata and status: what a generation bump looks at.
fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}

/// Sets apiVersion/kind when missing (the API server defaults them from the URL), rejects others.
fn check_type(kind: &Kind, obj: &mut Value) -> Result<(), ApiErr> {
    let Some(m) = obj.as_object_mut() else {
        return Err(errors::bad_request("the body must be a JSON object"));
    };
    let want = kind.api_version();
    match m.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            m.insert("apiVersion".into(), json!(want));
        }
        Some(v) if v == want => {}
        Some(v) => {
            return Err(errors::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({want})"
            )))
        }
    }
    match m.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            m.insert("kind".into(), json!(kind.kind));
        }
        Some(k) if k == kind.kind => {}
        Some(k) => {
            return Err(errors::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                kind.kind
            )))
        }
    }
    if m.get("metadata")
        .is_some_and(|v| !v.is_object() && !v.is_null())
    {
        return Err(errors::bad_request("metadata must be an object"));
    }
    Ok(())
}

fn run_validation(kind: &Kind, obj: &mut Value, name: &str) -> Result<(), ApiErr> {
    (kind.default)(obj);
    let errs = (kind.validate)(obj).map_err(errors::bad_request)?;
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errors::invalid(kind, name, &errs))
    }
}

impl Store {
    /// An empty store keeping `history_cap` events for watch replay.
    pub(crate) fn new(history_cap: usize) -> Self {
        Store {
            state: Mutex::new(State {
                // etcd's revision, and so every resourceVersion kube-apiserver answers,
                // starts at 1: a list of an empty store must not answer "0", which a watch
                // reads as "from whatever is current", not "from the start" (a create and
                // delete between that list and its watch were never seen).
                rv: 1,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                history_start: 0,
                history_cap: history_cap.max(1),
                snapshots: HashMap::new(),
                snapshot_order: VecDeque::new(),
                next_snapshot: 1,
                epoch: 0,
                shutdown: false,
            }),
            changed: Condvar::new(),
            admission: Mutex::new(None),
            mutation: Mutex::new(None),
        }
    }

    /// The admission policy's verdict on `obj`.
    fn admit(&self, kind: &Kind, name: &str, obj: &Value) -> Result<(), ApiErr> {
        let policy = self.admission.lock().clone();
        match policy.and_then(|p| p(kind.plural, obj)) {
            Some(why) => Err(errors::denied(kind, name, &why)),
            None => Ok(()),
        }
    }

    fn record(&self, st: &mut State, ev: Event) {
        st.history.push_back(Arc::new(ev));
        while st.history.len() > st.history_cap {
            if let Some(old) = st.history.pop_front() {
                st.history_start = old.rv;
            }
        }
        self.changed.notify_all();
    }

    /// The current global resourceVersion.
    pub(crate) fn current_rv(&self) -> u64 {
        self.state.lock().rv
    }

    /// Reads one object.
    pub(crate) fn get(&self, kind: &Kind, ns: &str, name: &str) -> Result<Arc<Value>, ApiErr> {
        self.state
            .lock()
            .objects
            .get(&(kind.plural, ns.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| errors::not_found(kind, name))
    }

    /// Creates an object after defaulting, validation and admission; `manager` gets its
    /// managedFields entry. A dry run (`dryRun=All`) answers what would be stored and
    /// stores nothing: no resourceVersion, no event.
    pub(crate) fn create(
        &self,
        kind: &'static Kind,
        ns: &str,
        obj: Value,
        manager: &str,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiErr> {
        self.create_as(kind, ns, obj, Some(manager), dry_run)
    }

    /// [`create`](Self::create) of an object whose managedFields are already settled (a
    /// server-side apply creating it): nothing is stamped.
    pub(crate) fn create_settled(
        &self,
        kind: &'static Kind,
        ns: &str,
        obj: Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiErr> {
        self.create_as(kind, ns, obj, None, dry_run)
    }

    fn create_as(
        &self,
        kind: &'static Kind,
        ns: &str,
        mut obj: Value,
        manager: Option<&str>,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiErr> {
        check_type(kind, &mut obj)?;
        {
            let meta = meta_mut(&mut obj);
            let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
            if name.is_empty() {
                if let Some(g) = meta.get("generateName").and_then(Value::as_str) {
                    if !g.is_empty() {
                        let n = format!("{g}{}", util::name_suffix());
                        meta.insert("name".into(), json!(n));
                    }
                }
            }
            if kind.namespaced {
                match meta.get("namespace").and_then(Value::as_str) {
                    None | Some("") => {
                        meta.insert("namespace".into(), json!(ns));
                    }
                    Some(n) if n == ns => {}
                    Some(n) => {
                        return Err(errors::bad_request(format!(
                            "the namespace of the provided object ({n}) does not match the namespace sent on the request ({ns})"
                        )))
                    }
                }
            } else {
                meta.remove("namespace");
            }
        }
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !rv_of(&obj).is_empty() {
            return Err(errors::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        if kind.status_subresource {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
        // kube-apiserver's order: mutating admission, validation, validating admission.
        if let Some(mutate) = self.mutation.lock().clone() {
            mutate(kind.plural, &mut obj);
        }
        run_validation(kind, &mut obj, &name)?;
        self.admit(kind, &name, &obj)?;
        if let Some(manager) = manager {
            if managedfields::resolve(None, &mut obj) != Sent::Reset {
                managedfields::stamp(kind, None, &mut obj, manager, None);
            }
        }
        let mut st = self.state.lock();
        let key = (kind.plural, ns.to_string(), name.clone());
        if st.objects.contains_key(&key) {
            return Err(errors::already_exists(kind, &name));
        }
        if dry_run {
            let meta = meta_mut(&mut obj);
            meta.insert("uid".into(), json!(util::uuid4()));
            meta.insert(
                "creationTimestamp".into(),
                json!(crate::api::time::format_rfc3339(SystemTime::now())),
            );
            meta.insert("generation".into(), json!(1));
            return Ok(Arc::new(obj));
        }
        st.rv += 1;
        let rv = st.rv;
        let meta = meta_mut(&mut obj);
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        meta.insert("uid".into(), json!(util::uuid4()));
        meta.insert(
            "creationTimestamp".into(),
            json!(crate::api::time::format_rfc3339(SystemTime::now())),
        );
        meta.insert("generation".into(), json!(1));
        let obj = Arc::new(obj);
        st.objects.insert(key, obj.clone());
        self.record(
            &mut st,
            Event {
                rv,
                type_: EventType::Added,
                plural: kind.plural,
                namespace: ns.to_string(),
                obj: obj.clone(),
                prev: None,
            },
        );
        Ok(obj)
    }

    /// Stores `obj` as given (no validation), creating or replacing; server fields are filled
    /// only when missing.
    pub(crate) fn seed(
        &self,
        kind: &'static Kind,
        ns: &str,
        mut obj: Value,
    ) -> Result<Arc<Value>, ApiErr> {
        check_type(kind, &mut obj)?;
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name.is_empty() {
            return Err(errors::bad_request("seeded objects need metadata.name"));
        }
        let ns = if kind.namespaced { ns } else { "" };
        let mut st = self.state.lock();
        st.rv += 1;
        let rv = st.rv;
        let meta = meta_mut(&mut obj);
        if kind.namespaced {
            meta.insert("namespace".into(), json!(ns));
        }
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        for (k, v) in [
            ("uid", json!(util::uuid4())),
            (
                "creationTimestamp",
                json!(crate::api::time::format_rfc3339(SystemTime::now())),
            ),
            ("generation", json!(1)),
        ] {
            if meta.get(k).is_none_or(Value::is_null) {
                meta.insert(k.to_string(), v);
            }
        }
        let obj = Arc::new(obj);
        let key = (kind.plural, ns.to_string(), name);
        let prev = st.objects.insert(key, obj.clone());
        let type_ = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(
            &mut st,
            Event {
                rv,
                type_,
                plural: kind.plural,
                namespace: ns.to_string(),
                obj: obj.clone(),
                prev,
            },
        );
        Ok(obj)
    }

    /// Replaces an object with what `change` makes of the current one, as PUT and PATCH do.
    ///
    /// `status_only` updates only `.status` (the `/status` subresource); `manager` gets its
    /// managedFields entry when the object changes. A dry run answers the would-be object
    /// with the current resourceVersion and stores nothing.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn update(
        &self,
        kind: &'static Kind,
        ns: &str,
        name: &str,
        status_only: bool,
        manager: &str,
        dry_run: bool,
        change: impl FnOnce(&Value) -> Result<Value, ApiErr>,
    ) -> Result<Arc<Value>, ApiErr> {
        self.update_as(kind, ns, name, status_only, Some(manager), dry_run, change)
    }

    /// [`update`](Self::update) where `change` settles the managedFields itself (a
    /// server-side apply): nothing is stamped.
    pub(crate) fn update_settled(
        &self,
        kind: &'static Kind,
        ns: &str,
        name: &str,
        status_only: bool,
        dry_run: bool,
        change: impl FnOnce(&Value) -> Result<Value, ApiErr>,
    ) -> Result<Arc<Value>, ApiErr> {
        self.update_as(kind, ns, name, status_only, None, dry_run, change)
    }

    #[allow(clippy::too_many_arguments)]
    fn update_as(
        &self,
        kind: &'static Kind,
        ns: &str,
        name: &str,
        status_only: bool,
        manager: Option<&str>,
        dry_run: bool,
        change: impl FnOnce(&Value) -> Result<Value, ApiErr>,
    ) -> Result<Arc<Value>, ApiErr> {
        let mut st = self.state.lock();
        let key = (kind.plural, ns.to_string(), name.to_string());
        let cur = st
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| errors::not_found(kind, name))?;
        let mut new = change(&cur)?;
        check_type(kind, &mut new)?;
        let body_name = new
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if body_name != name {
            return Err(errors::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let sent_rv = rv_of(&new).to_string();
        let cur_rv = rv_of(&cur).to_string();
        if !sent_rv.is_empty() && sent_rv != cur_rv {
            return Err(errors::conflict(kind, name, errors::MODIFIED));
        }
        if status_only {
            let status = new.get("status").cloned();
            let settled = new.pointer("/metadata/managedFields").cloned();
            new = (*cur).clone();
            if manager.is_none() {
                // An apply through /status settled the entries beside the status.
                let meta = meta_mut(&mut new);
                match settled {
                    Some(mf) => meta.insert("managedFields".into(), mf),
                    None => meta.remove("managedFields"),
                };
            }
            if let Some(m) = new.as_object_mut() {
                match status {
                    Some(s) => m.insert("status".into(), s),
                    None => m.remove("status"),
                };
            }
        } else {
            let meta = meta_mut(&mut new);
            for k in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "generation",
            ] {
                match cur.pointer(&format!("/metadata/{k}")) {
                    Some(v) => meta.insert(k.to_string(), v.clone()),
                    None => meta.remove(k),
                };
            }
            if kind.namespaced {
                meta.insert("namespace".into(), json!(ns));
            }
            if kind.status_subresource {
                if let Some(m) = new.as_object_mut() {
                    match cur.get("status") {
                        Some(s) => m.insert("status".into(), s.clone()),
                        None => m.remove("status"),
                    };
                }
            }
            super::core_kinds::carry_allocated(kind.plural, &cur, &mut new);
            run_validation(kind, &mut new, name)?;
            self.admit(kind, name, &new)?;
            if spec_part(&new) != spec_part(&cur) {
                let g = cur
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                meta_mut(&mut new).insert("generation".into(), json!(g + 1));
            }
        }
        meta_mut(&mut new).insert("resourceVersion".into(), json!(cur_rv));
        let sent = match manager {
            Some(_) => managedfields::resolve(Some(&cur), &mut new),
            None => Sent::Replaced,
        };
        if new == *cur {
            // A no-op update is not a write: same resourceVersion, no event, no new time.
            return Ok(cur);
        }
        if let (Some(manager), true) = (manager, sent != Sent::Reset) {
            let sub = status_only.then_some("status");
            managedfields::stamp(kind, Some(&cur), &mut new, manager, sub);
        }
        if dry_run {
            return Ok(Arc::new(new));
        }
        let finalizing = new.pointer("/metadata/deletionTimestamp").is_some()
            && new
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
        st.rv += 1;
        let rv = st.rv;
        meta_mut(&mut new).insert("resourceVersion".into(), json!(rv.to_string()));
        let new = Arc::new(new);
        let type_ = if finalizing {
            st.objects.remove(&key);
            EventType::Deleted
        } else {
            st.objects.insert(key, new.clone());
            EventType::Modified
        };
        self.record(
            &mut st,
            Event {
                rv,
                type_,
                plural: kind.plural,
                namespace: ns.to_string(),
                obj: new.clone(),
                prev: Some(cur),
            },
        );
        Ok(new)
    }

    /// Deletes an object; with finalizers it only gets a deletionTimestamp, as the real server does.
    pub(crate) fn delete(
        &self,
        kind: &'static Kind,
        ns: &str,
        name: &str,
        pre: &Preconditions,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiErr> {
        let mut st = self.state.lock();
        let key = (kind.plural, ns.to_string(), name.to_string());
        let cur = st
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| errors::not_found(kind, name))?;
        let uid = cur
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(want) = pre.uid.as_deref() {
            if want != uid {
                return Err(errors::conflict(
                    kind,
                    name,
                    &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"),
                ));
            }
        }
        if let Some(want) = pre.resource_version.as_deref() {
            let have = rv_of(&cur);
            if want != have {
                return Err(errors::conflict(
                    kind,
                    name,
                    &format!("Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {have}"),
                ));
            }
        }
        let has_finalizers = cur
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        let already_deleting = cur.pointer("/metadata/deletionTimestamp").is_some();
        if (has_finalizers && already_deleting) || dry_run {
            return Ok(cur);
        }
        st.rv += 1;
        let rv = st.rv;
        let mut obj = (*cur).clone();
        let meta = meta_mut(&mut obj);
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        let type_ = if has_finalizers {
            meta.insert(
                "deletionTimestamp".into(),
                json!(crate::api::time::format_rfc3339(SystemTime::now())),
            );
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            EventType::Modified
        } else {
            EventType::Deleted
        };
        let obj = Arc::new(obj);
        if type_ == EventType::Deleted {
            st.objects.remove(&key);
        } else {
            st.objects.insert(key, obj.clone());
        }
        self.record(
            &mut st,
            Event {
                rv,
                type_,
                plural: kind.plural,
                namespace: ns.to_string(),
                obj: obj.clone(),
                prev: Some(cur),
            },
        );
        Ok(obj)
    }

    /// One page of a list; later pages come from the first page's snapshot.
    pub(crate) fn list(&self, kind: &Kind, req: &ListRequest<'_>) -> Result<Page, ApiErr> {
        let mut st = self.state.lock();
        let (rv, items, offset, snap_id) = match req.continue_token {
            Some(tok) if !tok.is_empty() => {
                let (id, off) = decode_continue(tok)?;
                let snap = st.snapshots.get(&id).ok_or_else(|| {
                    errors::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
                })?;
                (snap.rv, snap.items.clone(), off, Some(id))
            }
            _ => {
                if let Some(v) = req.resource_version.filter(|v| !v.is_empty() && *v != "0") {
                    let n: u64 = v.parse().map_err(|_| {
                        errors::bad_request(format!("invalid resource version: {v}"))
                    })?;
                    if n > st.rv {
                        return Err(errors::too_large_rv(n, st.rv));
                    }
                }
                let items: Vec<Arc<Value>> = st
                    .objects
                    .iter()
                    .filter(|((p, ns, _), _)| {
                        *p == kind.plural && req.namespace.is_none_or(|want| want == ns)
                    })
                    .map(|(_, o)| o.clone())
                    .filter(|o| req.selector.matches(o))
                    .collect();
                (st.rv, Arc::new(items), 0, None)
            }
        };
        let limit = req.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let end = offset.saturating_add(limit).min(items.len());
        let page: Vec<Arc<Value>> = items.get(offset..end).unwrap_or(&[]).to_vec();
        let (continue_token, remaining) = if end < items.len() {
            let id = match snap_id {
                Some(id) => id,
                None => {
                    let id = st.next_snapshot;
                    st.next_snapshot += 1;
                    st.snapshots.insert(
                        id,
                        Snapshot {
                            rv,
                            items: items.clone(),
                        },
                    );
                    st.snapshot_order.push_back(id);
                    while st.snapshot_order.len() > MAX_SNAPSHOTS {
                        if let Some(old) = st.snapshot_order.pop_front() {
                            st.snapshots.remove(&old);
                        }
                    }
                    id
                }
            };
            (Some(encode_continue(rv, id, end)), Some(items.len() - end))
        } else {
            (None, None)
        };
        Ok(Page {
            rv,
            items: page,
            continue_token,
            remaining,
        })
    }

    /// Ends every watch and bumps the epoch; optionally moves the resourceVersion.
    pub(crate) fn restart(&self, rv: RvChange) {
        let mut st = self.state.lock();
        st.epoch += 1;
        st.snapshots.clear();
        st.snapshot_order.clear();
        match rv {
            RvChange::Keep => {}
            RvChange::Jump(n) => {
                st.rv += n;
                // Events between the old and new resourceVersion never happened; a watch
                // from before the jump can still be served (nothing to replay).
            }
            RvChange::Rewind(to) => {
                st.rv = to;
                st.history.clear();
                st.history_start = to;
                let keys: Vec<Key> = st.objects.keys().cloned().collect();
                for k in keys {
                    if let Some(o) = st.objects.get(&k) {
                        let over = rv_of(o).parse::<u64>().is_ok_and(|r| r > to);
                        if over {
                            let mut o = (**o).clone();
                            meta_mut(&mut o)
                                .insert("resourceVersion".into(), json!(to.to_string()));
                            st.objects.insert(k, Arc::new(o));
                        }
                    }
                }
            }
        }
        self.changed.notify_all();
    }

    /// After a restart on lost data: the loss counts as one change, and the history begins
    /// after it, so a watch from before is answered 410 (a restarted kube-apiserver's watch
    /// cache begins at its restart) and the client relists.
    pub(crate) fn expire_history_before_now(&self) {
        let mut st = self.state.lock();
        st.rv += 1;
        st.history.clear();
        st.history_start = st.rv;
    }

    /// Forgets every object and the event history, as an API server whose etcd came back
    /// empty. The resourceVersion keeps counting and a watch from any older version is
    /// accepted with nothing to replay: only a client that relists notices the loss.
    pub(crate) fn wipe(&self) {
        let mut st = self.state.lock();
        st.objects.clear();
        st.history.clear();
        st.history_start = 0;
        st.snapshots.clear();
        st.snapshot_order.clear();
    }

    /// Wakes and ends every watch for good.
    pub(crate) fn shutdown(&self) {
        self.state.lock().shutdown = true;
        self.changed.notify_all();
    }

    /// Waits for a change or `timeout`; used by watches.
    pub(crate) fn wait(&self, st: &mut parking_lot::MutexGuard<'_, State>, timeout: Duration) {
        self.changed.wait_for(st, timeout);
    }
}

/// How a restart moves the resourceVersion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RvChange {
    /// Keep the resourceVersion and history (a plain restart).
    #[default]
    Keep,
    /// Jump forward by this much (a restored or migrated etcd with a higher revision).
    Jump(u64),
    /// Move back to this resourceVersion and forget the history (restore from an old backup).
    Rewind(u64),
}

fn encode_continue(rv: u64, snap: u64, offset: usize) -> String {
    use base64::Engine as _;
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "snap": snap, "start": offset}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(tok: &str) -> Result<(u64, usize), ApiErr> {
    use base64::Engine as _;
    let bad = || {
        errors::bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tok.trim_end_matches('='))
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let snap = v.get("snap").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_u64).ok_or_else(bad)?;
    Ok((snap, start as usize))
}
