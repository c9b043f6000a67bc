//! The decision table: what to do with one APIService name, as a pure function.
//!
//! A port of `checkAPIService` in kube-aggregator's autoregister controller. The
//! checks run in upstream's order, because the order *is* the semantics: e.g. a
//! desired *onstart* entry that already synced is left alone even when the object
//! is gone (2B), before the "not found → create" rule gets a say.
//!
//! ```text
//!                                         | A. not desired | B. sync on start | C. sync always
//! 1. lookup error                         | error          | error            | error
//! 2. not found                            | -              | create once      | create
//! 3. present, not managed                 | -              | -                | -
//! 4. managed onstart, not present at start| -              | -                | -
//! 5. managed onstart, present at start    | delete once    | update once      | update once
//! 6. managed always                       | delete         | update once      | update
//! ```

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::api::{
    APIService, Resource, AUTO_MANAGED_ALWAYS, AUTO_MANAGED_LABEL, AUTO_MANAGED_ON_START,
};

/// How a desired APIService is kept: once at start, or continuously.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncMode {
    /// Synced once, when the controller starts (label `onstart`).
    OnStart,
    /// Synced continuously (label `true`).
    Always,
}

impl SyncMode {
    /// The automanaged label value that marks this mode.
    pub fn label_value(self) -> &'static str {
        match self {
            SyncMode::OnStart => AUTO_MANAGED_ON_START,
            SyncMode::Always => AUTO_MANAGED_ALWAYS,
        }
    }

    /// The mode a manifest asks for: `onstart` → on start, anything else → always.
    pub fn from_label(value: Option<&str>) -> SyncMode {
        if value == Some(AUTO_MANAGED_ON_START) {
            SyncMode::OnStart
        } else {
            SyncMode::Always
        }
    }
}

impl fmt::Display for SyncMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyncMode::OnStart => "onstart",
            SyncMode::Always => "always",
        })
    }
}

/// A copy of `obj` carrying the automanaged label for `mode`, as upstream's
/// `AddAPIServiceToSyncOnStart` (`onstart`) and `AddAPIServiceToSync` (`true`) store it.
pub fn with_label(obj: &APIService, mode: SyncMode) -> APIService {
    Arc::unwrap_or_clone(Desired::new(obj, mode).object)
}

/// Objects built with `Default` or read from a list may lack apiVersion/kind;
/// a request body should carry them.
fn fill_type_meta(obj: &mut APIService) {
    if obj.api_version.is_empty() {
        obj.api_version = APIService::api_version();
    }
    if obj.kind.is_empty() {
        obj.kind = APIService::KIND.to_string();
    }
}

/// One entry of the desired set.
///
/// The object is shared, not copied: the manifest set, the applied set, the controller's
/// desired set and every sync of the name read the same allocation.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The object to create; carries the automanaged label matching `mode`.
    pub object: Arc<APIService>,
    /// How it is kept.
    pub mode: SyncMode,
}

impl Desired {
    /// A desired entry for `obj`, labelled for `mode` (the caller's object is not changed).
    pub fn new(obj: &APIService, mode: SyncMode) -> Desired {
        Desired::owned(obj.clone(), mode)
    }

    /// A desired entry made of `obj` itself, labelled for `mode` (no copy).
    pub fn owned(mut obj: APIService, mode: SyncMode) -> Desired {
        obj.metadata
            .set_label(AUTO_MANAGED_LABEL, mode.label_value());
        fill_type_meta(&mut obj);
        Desired {
            object: Arc::new(obj),
            mode,
        }
    }

    /// A desired entry sharing `obj` when it already carries the label for `mode` and its
    /// apiVersion/kind (a manifest's entry); else a labelled copy, as [`new`](Self::new).
    pub fn shared(obj: Arc<APIService>, mode: SyncMode) -> Desired {
        let ready = obj.auto_managed() == Some(mode.label_value())
            && !obj.api_version.is_empty()
            && !obj.kind.is_empty();
        if ready {
            Desired { object: obj, mode }
        } else {
            Desired::owned(Arc::unwrap_or_clone(obj), mode)
        }
    }
}

/// What the cache holds for the name.
#[derive(Clone, Copy, Debug)]
pub enum Current<'a> {
    /// The lookup failed for a reason other than "not found".
    LookupError(&'a str),
    /// No object of that name.
    NotFound,
    /// The cached object.
    Present(&'a APIService),
}

/// What the worker should do.
// One Action lives for one sync and is never stored: an inline Update costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Nothing to write.
    None,
    /// Create this object (the desired one, labelled; shared with the desired set).
    Create(Arc<APIService>),
    /// Replace the object with this one: the cached object with the desired `.spec`.
    Update(APIService),
    /// Delete the object, only if it still has this UID.
    Delete {
        /// Name of the object.
        name: String,
        /// UID precondition.
        uid: String,
    },
    /// Nothing can be decided; retry later with backoff.
    Error(String),
}

impl Action {
    /// One word for logs and `plan`: `none`, `create`, `update`, `delete`, `error`.
    pub fn verb(&self) -> &'static str {
        match self {
            Action::None => "none",
            Action::Create(_) => "create",
            Action::Update(_) => "update",
            Action::Delete { .. } => "delete",
            Action::Error(_) => "error",
        }
    }
}

/// A cell of the decision table, e.g. `5B`: row from the cache, column from the desired set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    row: u8,
    column: char,
}

impl Cell {
    /// The cell at `row` (1..=6) and `column` (`A`, `B`, `C`), if it exists.
    pub fn new(row: u8, column: char) -> Option<Cell> {
        ((1..=6).contains(&row) && ('A'..='C').contains(&column)).then_some(Cell { row, column })
    }

    /// Row, 1..=6: 1 lookup error, 2 not found, 3 not managed, 4 onstart created
    /// after start, 5 onstart present at start, 6 managed always.
    pub fn row(self) -> u8 {
        self.row
    }

    /// Column: `A` not desired, `B` desired on start, `C` desired always.
    pub fn column(self) -> char {
        self.column
    }

    /// The cell the facts fall in, whatever action fires.
    pub fn of(desired: Option<&Desired>, current: Current<'_>, present_at_start: bool) -> Cell {
        let row = match current {
            Current::LookupError(_) => 1,
            Current::NotFound => 2,
            Current::Present(curr) => match curr.auto_managed() {
                Some(AUTO_MANAGED_ON_START) if !present_at_start => 4,
                Some(AUTO_MANAGED_ON_START) => 5,
                Some(AUTO_MANAGED_ALWAYS) => 6,
                _ => 3,
            },
        };
        let column = match desired.map(|d| d.mode) {
            None => 'A',
            Some(SyncMode::OnStart) => 'B',
            Some(SyncMode::Always) => 'C',
        };
        Cell { row, column }
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.row, self.column)
    }
}

impl FromStr for Cell {
    type Err = String;

    fn from_str(s: &str) -> Result<Cell, String> {
        let mut chars = s.chars();
        let parsed = match (chars.next(), chars.next(), chars.next()) {
            (Some(r), Some(c), None) => r
                .to_digit(10)
                .and_then(|r| Cell::new(r as u8, c.to_ascii_uppercase())),
            _ => None,
        };
        parsed.ok_or_else(|| format!("not a decision table cell: {s:?} (expected 1A..6C)"))
    }
}

/// An action and the cell it was decided in.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// What to do.
    pub action: Action,
    /// Where in the table the facts fall.
    pub cell: Cell,
    /// Which rule fired, in a few words (for logs and `plan`).
    pub reason: &'static str,
}

/// Decides what to do with one name, exactly as upstream's `checkAPIService`.
///
/// `synced_once`: this process already synced the name successfully.
/// `present_at_start`: the name was in the cache when it first synced.
pub fn decide(
    desired: Option<&Desired>,
    current: Current<'_>,
    synced_once: bool,
    present_at_start: bool,
) -> Decision {
    let cell = Cell::of(desired, current, present_at_start);
    let (action, reason) = rule(desired, current, synced_once, present_at_start);
    Decision {
        action,
        cell,
        reason,
    }
}

/// The `switch` of `checkAPIService`, case by case in upstream's order.
fn rule(
    desired: Option<&Desired>,
    current: Current<'_>,
    synced_once: bool,
    present_at_start: bool,
) -> (Action, &'static str) {
    // Upstream's first four cases; each is about one kind of `current`, so a match
    // per kind keeps their order.
    let once_done = desired.is_some_and(|d| d.mode == SyncMode::OnStart) && synced_once;
    let curr = match current {
        // 1A, 1B, 1C
        Current::LookupError(e) => return (Action::Error(e.to_string()), "lookup failed"),
        Current::NotFound => {
            return match desired {
                // 2A
                None => (Action::None, "not desired, absent"),
                // 2B "once" enforcement: a missing onstart object is not recreated.
                Some(_) if once_done => (Action::None, "onstart entry already synced"),
                // 2B, 2C
                Some(d) => (Action::Create(d.object.clone()), "desired, absent"),
            };
        }
        // 5B, 6B "once" enforcement (3B and 4B would be no-ops anyway).
        Current::Present(_) if once_done => return (Action::None, "onstart entry already synced"),
        Current::Present(curr) => curr,
    };
    let label = curr.auto_managed();
    let curr_on_start = label == Some(AUTO_MANAGED_ON_START);
    if !(curr_on_start || label == Some(AUTO_MANAGED_ALWAYS)) {
        // 3A, 3B, 3C: never touch what we do not own.
        return (Action::None, "not managed");
    }
    if curr_on_start && !present_at_start {
        // 4A, 4B, 4C
        return (Action::None, "onstart object created after start");
    }
    if curr_on_start && synced_once {
        // 5A, 5B, 5C: "once" enforcement.
        return (Action::None, "onstart object already synced");
    }
    let Some(desired) = desired else {
        // 5A, 6A: a spurious object we manage.
        return match (&curr.metadata.name, &curr.metadata.uid) {
            (Some(name), Some(uid)) if !name.is_empty() && !uid.is_empty() => (
                Action::Delete {
                    name: name.clone(),
                    uid: uid.clone(),
                },
                "managed, not desired",
            ),
            // Never delete without a name (that URL is the collection) or without
            // the UID precondition; a cached object always has both.
            _ => (
                Action::Error("cached object has no name or uid; not deleting".to_string()),
                "managed, not desired",
            ),
        };
    };
    if curr.spec == desired.object.spec {
        return (Action::None, "spec up to date");
    }
    // 5B, 5C, 6B, 6C: keep everything of the cached object but its spec.
    let mut updated = curr.clone();
    updated.spec = desired.object.spec.clone();
    fill_type_meta(&mut updated);
    (Action::Update(updated), "spec differs")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::APIServiceSpec;
    use serde_json::json;

    fn spec(group: &str) -> APIServiceSpec {
        APIServiceSpec {
            group: group.to_string(),
            version: "v1".to_string(),
            group_priority_minimum: 100,
            version_priority: 10,
            ..Default::default()
        }
    }

    /// A cached object as the server returns it: with uid and resourceVersion.
    fn cached(label: Option<&str>, group: &str) -> APIService {
        let mut o = APIService::new("v1.foo", spec(group));
        o.metadata.uid = Some("uid-1".to_string());
        o.metadata.resource_version = Some("42".to_string());
        if let Some(l) = label {
            o.metadata.set_label(AUTO_MANAGED_LABEL, l);
        }
        o
    }

    fn desired(mode: SyncMode) -> Desired {
        Desired::new(&APIService::new("v1.foo", spec("foo")), mode)
    }

    /// The facts behind a cell: the cached object (by row) and the desired entry (by column).
    fn facts(cell: &str) -> (Option<Desired>, Option<APIService>, bool) {
        let cell: Cell = cell.parse().unwrap();
        let d = match cell.column() {
            'A' => None,
            'B' => Some(desired(SyncMode::OnStart)),
            _ => Some(desired(SyncMode::Always)),
        };
        // Stale spec so that every update cell has something to update.
        let (curr, at_start) = match cell.row() {
            1 | 2 => (None, false),
            3 => (Some(cached(None, "stale")), true),
            4 => (Some(cached(Some("onstart"), "stale")), false),
            5 => (Some(cached(Some("onstart"), "stale")), true),
            _ => (Some(cached(Some("true"), "stale")), true),
        };
        (d, curr, at_start)
    }

    fn decide_cell(cell: &str, synced_once: bool) -> Decision {
        let (d, curr, at_start) = facts(cell);
        let current = match (cell.starts_with('1'), &curr) {
            (true, _) => Current::LookupError("etcd timeout"),
            (false, None) => Current::NotFound,
            (false, Some(c)) => Current::Present(c),
        };
        decide(d.as_ref(), current, synced_once, at_start)
    }

    #[test]
    fn every_cell_and_every_once_rule() {
        // (name, cell, synced once, expected verb)
        #[rustfmt::skip]
        let cases: &[(&str, &str, bool, &str)] = &[
            ("lookup error, not desired: error", "1A", false, "error"),
            ("lookup error, onstart: error", "1B", false, "error"),
            ("lookup error, always: error", "1C", false, "error"),
            ("lookup error after sync, not desired: error", "1A", true, "error"),
            ("lookup error after sync, onstart: error", "1B", true, "error"),
            ("lookup error after sync, always: error", "1C", true, "error"),
            ("absent, not desired: nothing", "2A", false, "none"),
            ("absent, onstart: create once", "2B", false, "create"),
            ("absent, always: create", "2C", false, "create"),
            ("absent after sync, not desired: nothing", "2A", true, "none"),
            ("absent, onstart already synced: not recreated", "2B", true, "none"),
            ("absent, always after sync: recreated", "2C", true, "create"),
            ("unmanaged, not desired: untouched", "3A", false, "none"),
            ("unmanaged, onstart: untouched", "3B", false, "none"),
            ("unmanaged, always: untouched", "3C", false, "none"),
            ("unmanaged after sync, not desired: untouched", "3A", true, "none"),
            ("unmanaged after sync, onstart: untouched", "3B", true, "none"),
            ("unmanaged after sync, always: untouched", "3C", true, "none"),
            ("onstart created later, not desired: untouched", "4A", false, "none"),
            ("onstart created later, onstart: untouched", "4B", false, "none"),
            ("onstart created later, always: untouched", "4C", false, "none"),
            ("onstart created later after sync, not desired", "4A", true, "none"),
            ("onstart created later after sync, onstart", "4B", true, "none"),
            ("onstart created later after sync, always", "4C", true, "none"),
            ("onstart at start, not desired: delete once", "5A", false, "delete"),
            ("onstart at start, onstart: update once", "5B", false, "update"),
            ("onstart at start, always: update once", "5C", false, "update"),
            ("onstart at start, not desired, synced: no delete", "5A", true, "none"),
            ("onstart at start, onstart, synced: no update", "5B", true, "none"),
            ("onstart at start, always, synced: no update", "5C", true, "none"),
            ("always, not desired: delete", "6A", false, "delete"),
            ("always, onstart: update once", "6B", false, "update"),
            ("always, always: update", "6C", false, "update"),
            ("always, not desired, after sync: delete again", "6A", true, "delete"),
            ("always, onstart, synced: no update", "6B", true, "none"),
            ("always, always, after sync: update again", "6C", true, "update"),
        ];
        for &(name, cell, synced, verb) in cases {
            let got = decide_cell(cell, synced);
            assert_eq!(got.cell.to_string(), cell, "{name}: cell");
            assert_eq!(got.action.verb(), verb, "{name}: action {:?}", got.action);
        }
    }

    #[test]
    fn row_six_ignores_present_at_start() {
        let curr = cached(Some("true"), "stale");
        let d = desired(SyncMode::Always);
        for at_start in [false, true] {
            let got = decide(Some(&d), Current::Present(&curr), false, at_start);
            assert_eq!(got.cell.to_string(), "6C");
            assert_eq!(got.action.verb(), "update");
        }
    }

    #[test]
    fn unknown_label_value_is_not_managed() {
        let curr = cached(Some("false"), "stale");
        let got = decide(None, Current::Present(&curr), false, true);
        assert_eq!(got.cell.to_string(), "3A");
        assert_eq!(got.action, Action::None);
    }

    #[test]
    fn lookup_error_carries_the_message() {
        let got = decide(None, Current::LookupError("etcd timeout"), false, false);
        assert_eq!(got.action, Action::Error("etcd timeout".to_string()));
    }

    #[test]
    fn create_sends_the_labelled_desired_object() {
        for (mode, label) in [(SyncMode::OnStart, "onstart"), (SyncMode::Always, "true")] {
            let d = desired(mode);
            let Action::Create(obj) = decide(Some(&d), Current::NotFound, false, false).action
            else {
                panic!("{mode}: expected a create");
            };
            assert_eq!(obj.auto_managed(), Some(label));
            assert_eq!(obj, d.object);
        }
    }

    #[test]
    fn update_replaces_only_the_spec() {
        let mut curr = cached(Some("true"), "stale");
        curr.metadata.set_label("team", "x");
        curr.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
        curr.metadata
            .extra
            .insert("finalizers".into(), json!(["f"]));
        curr.status = Some(serde_json::from_value(json!({"conditions": []})).unwrap());
        curr.extra.insert("futureField".into(), json!({"x": 1}));
        curr.spec.extra.insert("futureSpec".into(), json!(true));
        let d = desired(SyncMode::Always);
        let Action::Update(obj) = decide(Some(&d), Current::Present(&curr), false, true).action
        else {
            panic!("expected an update");
        };
        assert_eq!(obj.spec, d.object.spec, "spec is the desired one, whole");
        let mut rest = obj.clone();
        rest.spec = curr.spec.clone();
        assert_eq!(rest, curr, "everything but the spec is the cached object's");
        assert_eq!(obj.metadata.resource_version.as_deref(), Some("42"));
    }

    #[test]
    fn written_objects_carry_api_version_and_kind() {
        let mut bare = cached(Some("true"), "stale");
        bare.api_version.clear();
        bare.kind.clear();
        let d = Desired::new(
            &APIService {
                metadata: bare.metadata.clone(),
                ..Default::default()
            },
            SyncMode::Always,
        );
        assert_eq!(
            (d.object.api_version.as_str(), d.object.kind.as_str()),
            ("apiregistration.k8s.io/v1", "APIService")
        );
        let Action::Update(obj) = decide(Some(&d), Current::Present(&bare), false, true).action
        else {
            panic!("expected an update");
        };
        assert_eq!(
            (obj.api_version.as_str(), obj.kind.as_str()),
            ("apiregistration.k8s.io/v1", "APIService")
        );
    }

    #[test]
    fn no_update_when_specs_are_equal() {
        for cell in ["5B", "5C", "6B", "6C"] {
            let (d, curr, at_start) = facts(cell);
            let mut curr = curr.unwrap();
            curr.spec = d.as_ref().unwrap().object.spec.clone();
            let got = decide(d.as_ref(), Current::Present(&curr), false, at_start);
            assert_eq!(got.cell.to_string(), cell);
            assert_eq!(got.action, Action::None, "{cell}");
            assert_eq!(got.reason, "spec up to date");
        }
    }

    #[test]
    fn spec_comparison_sees_unknown_spec_fields() {
        let d = desired(SyncMode::Always);
        let mut curr = cached(Some("true"), "foo");
        curr.spec.extra.insert("newField".into(), json!(1));
        let got = decide(Some(&d), Current::Present(&curr), false, true);
        assert_eq!(got.action.verb(), "update");
    }

    #[test]
    fn delete_carries_name_and_uid_precondition() {
        for cell in ["5A", "6A"] {
            let got = decide_cell(cell, false);
            assert_eq!(
                got.action,
                Action::Delete {
                    name: "v1.foo".to_string(),
                    uid: "uid-1".to_string()
                },
                "{cell}"
            );
        }
    }

    #[test]
    fn never_deletes_without_uid_or_name() {
        let mut no_uid = cached(Some("true"), "x");
        no_uid.metadata.uid = None;
        let mut no_name = cached(Some("true"), "x");
        no_name.metadata.name = Some(String::new());
        for curr in [no_uid, no_name] {
            let got = decide(None, Current::Present(&curr), false, true);
            assert_eq!(got.cell.to_string(), "6A");
            assert_eq!(got.action.verb(), "error");
        }
    }

    #[test]
    fn with_label_sets_the_mode_label_on_a_copy() {
        let mut obj = APIService::new("v1.foo", spec("foo"));
        obj.metadata.set_label(AUTO_MANAGED_LABEL, "false");
        obj.metadata.set_label("team", "x");
        let on_start = with_label(&obj, SyncMode::OnStart);
        let always = with_label(&obj, SyncMode::Always);
        assert_eq!(obj.auto_managed(), Some("false"), "input untouched");
        assert_eq!(on_start.auto_managed(), Some("onstart"));
        assert_eq!(always.auto_managed(), Some("true"));
        assert_eq!(always.metadata.label("team"), Some("x"));
        assert_eq!(*Desired::new(&obj, SyncMode::OnStart).object, on_start);
    }

    #[test]
    fn sync_mode_from_label() {
        assert_eq!(SyncMode::from_label(Some("onstart")), SyncMode::OnStart);
        for other in [Some("true"), Some("false"), Some("OnStart"), Some(""), None] {
            assert_eq!(SyncMode::from_label(other), SyncMode::Always, "{other:?}");
        }
    }

    #[test]
    fn cell_display_and_parse() {
        for row in 1..=6u8 {
            for column in ['A', 'B', 'C'] {
                let cell = Cell::new(row, column).unwrap();
                assert_eq!(cell.to_string().parse::<Cell>(), Ok(cell));
            }
        }
        assert_eq!("5b".parse::<Cell>().map(|c| c.to_string()), Ok("5B".into()));
        for bad in ["", "0A", "7A", "1D", "5BB", "B5"] {
            assert!(bad.parse::<Cell>().is_err(), "{bad}");
        }
    }

    /// Our rewrite of the 14 cases of upstream's `TestSync`, on the pure function.
    /// Upstream's objects have empty specs; "modified" ones have group `something`.
    #[test]
    fn upstream_test_sync_cases() {
        fn obj(label: Option<&str>, group: &str) -> APIService {
            let mut o = APIService::new("foo", APIServiceSpec::default());
            o.spec.group = group.to_string();
            o.metadata.uid = Some("uid-foo".to_string());
            if let Some(l) = label {
                o.metadata.set_label(AUTO_MANAGED_LABEL, l);
            }
            o
        }
        let plain = || APIService::new("foo", APIServiceSpec::default());
        let managed = obj(Some("true"), "");
        let managed_on_start = obj(Some("onstart"), "");
        let managed_modified = obj(Some("true"), "something");
        let unmanaged = obj(None, "");
        let always = Desired::new(&plain(), SyncMode::Always);
        let on_start = Desired::new(&plain(), SyncMode::OnStart);

        enum Want {
            Nothing,
            Create(&'static str),
            Update,
            Delete,
        }
        // (name, desired, current, synced once, present at start, wanted)
        type Case<'a> = (&'a str, Option<&'a Desired>, Current<'a>, bool, bool, Want);
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("adding an API service which isn't auto-managed does nothing",
                None, Current::Present(&unmanaged), false, false, Want::Nothing),
            ("adding one to auto-register should create",
                Some(&always), Current::NotFound, false, false, Want::Create("true")),
            ("duplicate AddAPIServiceToSync (decision part): equal spec, no write",
                Some(&always), Current::Present(&managed), false, false, Want::Nothing),
            ("duplicate RemoveAPIServiceToSync (decision part): managed, not desired, delete",
                None, Current::Present(&managed), false, false, Want::Delete),
            ("removing auto-managed then RemoveAPIService should not touch APIService",
                None, Current::Present(&unmanaged), false, false, Want::Nothing),
            ("create managed apiservice without a matching request",
                None, Current::Present(&managed), false, false, Want::Delete),
            ("modifying it should result in stomping",
                Some(&always), Current::Present(&managed_modified), false, false, Want::Update),
            ("adding one to auto-register on start should create",
                Some(&on_start), Current::NotFound, false, false, Want::Create("onstart")),
            ("adding one to auto-register on start already synced should do nothing",
                Some(&on_start), Current::NotFound, true, false, Want::Nothing),
            ("managed onstart apiservice present at start without a matching request should delete",
                None, Current::Present(&managed_on_start), false, true, Want::Delete),
            ("managed onstart apiservice present at start without a matching request already synced once should no-op",
                None, Current::Present(&managed_on_start), true, true, Want::Nothing),
            ("managed onstart apiservice not present at start without a matching request should no-op",
                None, Current::Present(&managed_on_start), false, false, Want::Nothing),
            ("modifying onstart it should result in stomping",
                Some(&on_start), Current::Present(&managed_modified), false, false, Want::Update),
            ("modifying onstart already synced should no-op",
                Some(&on_start), Current::Present(&managed_modified), true, false, Want::Nothing),
        ];
        assert_eq!(cases.len(), 14);
        for (name, d, current, synced, at_start, want) in cases {
            let got = decide(d, current, synced, at_start).action;
            match (want, got) {
                (Want::Nothing, Action::None) => {}
                (Want::Create(label), Action::Create(o)) => {
                    assert_eq!(o.metadata.name.as_deref(), Some("foo"), "{name}");
                    assert_eq!(o.auto_managed(), Some(label), "{name}");
                }
                // Upstream checks the label stays "true" (copied from the cached
                // object, even for an onstart entry) and the group is stomped back.
                (Want::Update, Action::Update(o)) => {
                    assert_eq!(o.metadata.name.as_deref(), Some("foo"), "{name}");
                    assert_eq!(o.auto_managed(), Some("true"), "{name}");
                    assert_eq!(o.spec.group, "", "{name}");
                }
                (Want::Delete, Action::Delete { name: n, uid }) => {
                    assert_eq!((n.as_str(), uid.as_str()), ("foo", "uid-foo"), "{name}");
                }
                (_, got) => panic!("{name}: unexpected {got:?}"),
            }
        }
    }
}
