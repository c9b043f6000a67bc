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
//!
//! "Managed" is decided by an [`Ownership`] policy: our own label key, never
//! kube-apiserver's unless that is our key. Beyond upstream, two guards: a desired
//! name held by someone else (3B/3C) is *blocked* (not converged) unless `adopt`
//! takes it over, and an empty desired set deletes nothing unless `allow_empty`.
//!
//! "Update" is a server-side apply of the fields the manifest declares (see
//! [`fields`](super::fields)), decided when a declared field differs from the object or a
//! field we own is no longer declared; upstream replaces the whole `.spec`, as the only
//! writer inside kube-apiserver, where a real cluster has injectors and webhooks too.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use super::availability::Observed;
use super::fields::{Applied, Takeover};
use crate::api::{
    APIService, FieldPath, ObjectMeta, Resource, AUTO_MANAGED_ALWAYS, AUTO_MANAGED_LABEL,
    AUTO_MANAGED_ON_START, DEFAULT_LABEL_KEY,
};

/// The `fieldManager` of our writes when nothing names another: the program's name.
pub const DEFAULT_FIELD_MANAGER: &str = "autoregister";

/// How a desired APIService is kept: once at start, or continuously.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncMode {
    /// Synced once, when the controller starts (label `onstart`).
    OnStart,
    /// Synced continuously (label `true`).
    Always,
}

impl SyncMode {
    /// The ownership label value that marks this mode.
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

/// Which objects are ours and how far the controller may reach: a value passed down, never a global.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ownership {
    /// The label whose value `onstart`/`true` marks our objects.
    pub label_key: String,
    /// Take over a desired object that carries no ownership label (in place, same UID).
    pub adopt: bool,
    /// Let an empty desired set deregister what we manage (decommissioning).
    pub allow_empty: bool,
    /// The `fieldManager` of our writes: whose `managedFields` entries are ours.
    pub field_manager: String,
}

impl Default for Ownership {
    fn default() -> Self {
        Ownership::new(DEFAULT_LABEL_KEY)
    }
}

/// Who holds an object that is not ours, as far as its labels tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// kube-apiserver's own autoregister (upstream's label, which is not our key).
    KubeApiserver(String),
    /// Another autoregister-style controller: `<prefix>/automanaged: onstart|true` under another key.
    OtherController {
        /// Its label key.
        key: String,
        /// Its label value.
        value: String,
    },
    /// No ownership label we recognise (created by hand, by Helm, by `kubectl apply`, ...).
    Unlabelled,
}

impl Owner {
    /// Whether `--adopt` may take the object over: only one nobody claims by label.
    pub fn adoptable(&self) -> bool {
        matches!(self, Owner::Unlabelled)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::KubeApiserver(v) => write!(f, "kube-apiserver (label {AUTO_MANAGED_LABEL}={v})"),
            Owner::OtherController { key, value } => {
                write!(f, "another controller (label {key}={value})")
            }
            Owner::Unlabelled => f.write_str("an object without ownership label"),
        }
    }
}

fn is_mode_value(v: &str) -> bool {
    v == AUTO_MANAGED_ON_START || v == AUTO_MANAGED_ALWAYS
}

impl Ownership {
    /// Our objects carry `label_key`; neither adopting nor deregistering on an empty set.
    pub fn new(label_key: impl Into<String>) -> Ownership {
        Ownership {
            label_key: label_key.into(),
            adopt: false,
            allow_empty: false,
            field_manager: DEFAULT_FIELD_MANAGER.to_string(),
        }
    }

    /// Whether our key is upstream's, which on a real cluster belongs to kube-apiserver.
    pub fn is_upstream_key(&self) -> bool {
        self.label_key == AUTO_MANAGED_LABEL
    }

    /// Our label's value (`onstart` or `true`) when `obj` is ours, else `None`.
    ///
    /// An object that also carries kube-apiserver's label is never ours unless that is our key.
    pub fn managed_value<'a>(&self, obj: &'a APIService) -> Option<&'a str> {
        if !self.is_upstream_key() && obj.auto_managed().is_some() {
            return None;
        }
        obj.ownership(&self.label_key).filter(|v| is_mode_value(v))
    }

    /// Whether `obj` is ours.
    pub fn is_managed(&self, obj: &APIService) -> bool {
        self.managed_value(obj).is_some()
    }

    /// Who holds `obj`, for an object that is not ours.
    pub fn owner(&self, obj: &APIService) -> Owner {
        if let Some(v) = obj.auto_managed().filter(|_| !self.is_upstream_key()) {
            return Owner::KubeApiserver(v.to_string());
        }
        let other = obj.metadata.labels.iter().flatten().find(|(k, v)| {
            *k != self.label_key
                && (k.ends_with("/automanaged") || *k == "automanaged")
                && is_mode_value(v)
        });
        match other {
            Some((k, v)) => Owner::OtherController {
                key: k.to_string(),
                value: v.to_string(),
            },
            None => Owner::Unlabelled,
        }
    }

    /// The mode a manifest object asks for (see [`manifest_mode`]).
    pub fn mode_in_manifest(&self, obj: &APIService) -> SyncMode {
        manifest_mode(obj, &self.label_key)
    }

    /// A copy of `obj` as we write it: our label for `mode`, and kube-apiserver's label
    /// removed unless it is our key (we never write that label on its behalf).
    pub fn labelled(&self, obj: &APIService, mode: SyncMode) -> APIService {
        let mut out = obj.clone();
        self.label(&mut out.metadata, mode);
        fill_type_meta(&mut out);
        out
    }

    /// Sets our label for `mode` on `meta`, removing kube-apiserver's unless it is our key.
    pub(crate) fn label(&self, meta: &mut ObjectMeta, mode: SyncMode) {
        if !self.is_upstream_key() {
            meta.remove_label(AUTO_MANAGED_LABEL);
        }
        meta.set_label(&self.label_key, mode.label_value());
    }
}

/// The mode a manifest object asks for: the value of `label_key`, else (for manifests
/// written for upstream) the kube-aggregator label's; `onstart` or continuously.
pub fn manifest_mode(obj: &APIService, label_key: &str) -> SyncMode {
    SyncMode::from_label(obj.ownership(label_key).or(obj.auto_managed()))
}

/// Objects built with `Default` or read from a list may lack apiVersion/kind;
/// a request body should carry them.
fn fill_type_meta(obj: &mut APIService) {
    if obj.api_version.is_empty() {
        obj.api_version = APIService::api_version().into();
    }
    if obj.kind.is_empty() {
        obj.kind = APIService::KIND.into();
    }
}

/// One entry of the desired set.
///
/// The object is shared, not copied: the manifest set, the applied set, the controller's
/// desired set and every sync of the name read the same allocation.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The object as declared; the ownership label (and apiVersion/kind, when missing) are
    /// added when it is written.
    pub object: Arc<APIService>,
    /// How it is kept.
    pub mode: SyncMode,
}

impl Desired {
    /// A desired entry for `obj` in `mode` (the caller's object is not changed).
    pub fn new(obj: &APIService, mode: SyncMode) -> Desired {
        Desired::owned(obj.clone(), mode)
    }

    /// A desired entry made of `obj` itself (no copy). The usual apiVersion and kind are
    /// not kept: every write fills them in ([`Ownership::labelled`], updates), and two
    /// strings less per entry matter with thousands of entries.
    pub fn owned(mut obj: APIService, mode: SyncMode) -> Desired {
        obj.compact_for_cache();
        Desired {
            object: Arc::new(obj),
            mode,
        }
    }

    /// A desired entry sharing `obj` as it is (writes fill in what it lacks).
    pub fn shared(obj: Arc<APIService>, mode: SyncMode) -> Desired {
        Desired { object: obj, mode }
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

/// Everything the decision looks at for one name.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    /// The desired entry, if the name is desired.
    pub desired: Option<&'a Desired>,
    /// What the cache holds.
    pub current: Current<'a>,
    /// This process already synced the name successfully.
    pub synced_once: bool,
    /// The name was in the cache when it first synced.
    pub present_at_start: bool,
    /// The whole desired set is empty (the guard against mass deregistration).
    pub desired_set_empty: bool,
    /// Withdrawal of an unavailable registration (opt-in; [`Withdrawal::Keep`] otherwise).
    pub withdrawal: Withdrawal,
}

/// Whether a desired APIService of ours is withdrawn: deliberately absent while its backend
/// is unavailable, so the cluster's discovery stays healthy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Withdrawal {
    /// Keep it registered (withdrawal off, or the backend is available or looks ready again).
    #[default]
    Keep,
    /// It has been unavailable for longer than allowed: delete it (UID precondition).
    Due,
    /// Withdrawn, and its backend does not look ready yet (or the backoff holds it): do not create.
    Held,
}

/// The reason of a withdrawal's delete (the worker records the withdrawal on success).
pub const WITHDRAW_UNAVAILABLE: &str = "withdrawn: unavailable too long";

/// The reason of a withdrawn name left absent.
pub const WITHDRAWN_HELD: &str = "withdrawn: backend not ready";

/// What the worker should do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Nothing to write.
    None,
    /// Create this object: the applied configuration (the declared fields, labelled).
    Create(APIService),
    /// Apply the declared fields to our object.
    Update(Apply),
    /// Take over an object nobody claims: apply the declared fields, our label among them.
    Adopt(Apply),
    /// Delete the object, only if it still has this UID (and this resourceVersion, if any).
    Delete {
        /// Name of the object.
        name: String,
        /// UID precondition.
        uid: String,
        /// resourceVersion precondition: a withdrawal deletes only the very object it saw
        /// unavailable, never one the aggregator has since marked available.
        resource_version: Option<String>,
    },
    /// Nothing is written and the name is not converged: a guard holds it (why, for people).
    Blocked(String),
    /// Nothing can be decided; retry later with backoff.
    Error(String),
}

impl Action {
    /// One word for logs and `plan`: `none`, `create`, `update`, `adopt`, `delete`, `blocked`, `error`.
    pub fn verb(&self) -> &'static str {
        match self {
            Action::None => "none",
            Action::Create(_) => "create",
            Action::Update(_) => "update",
            Action::Adopt(_) => "adopt",
            Action::Delete { .. } => "delete",
            Action::Blocked(_) => "blocked",
            Action::Error(_) => "error",
        }
    }
}

/// A server-side apply of our declared fields to an existing object.
#[derive(Clone, Debug, PartialEq)]
pub struct Apply {
    /// The applied configuration: the declared fields, and the object's UID, so that the
    /// apply reaches that object or none (kube-apiserver refuses another UID, and an
    /// absent object with one: an apply never creates what a create would not).
    pub config: APIService,
    /// Ownership to move into our apply entry first (see [`Takeover`]).
    pub takeover: Takeover,
    /// The declared fields whose value the object does not have.
    pub differs: Vec<FieldPath>,
    /// The fields we own and no longer declare, which the apply releases.
    pub released: Vec<FieldPath>,
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

    /// What the cell means in words, for logs: `managed always, desired always` for 6C.
    pub fn meaning(self) -> String {
        let row = match self.row {
            1 => "lookup failed",
            2 => "absent",
            3 => "not ours",
            4 => "ours onstart, created after start",
            5 => "ours onstart, present at start",
            _ => "managed always",
        };
        let column = match self.column {
            'A' => "not desired",
            'B' => "desired onstart",
            _ => "desired always",
        };
        format!("{row}, {column}")
    }

    /// The cell the facts fall in, whatever action fires.
    pub fn of(ownership: &Ownership, facts: &Facts<'_>) -> Cell {
        let row = match facts.current {
            Current::LookupError(_) => 1,
            Current::NotFound => 2,
            Current::Present(curr) => match ownership.managed_value(curr) {
                Some(AUTO_MANAGED_ON_START) if !facts.present_at_start => 4,
                Some(AUTO_MANAGED_ON_START) => 5,
                Some(_) => 6,
                None => 3,
            },
        };
        let column = match facts.desired.map(|d| d.mode) {
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

/// Decides what to do with one name: upstream's `checkAPIService` under `ownership`.
pub fn decide(ownership: &Ownership, facts: &Facts<'_>) -> Decision {
    let cell = Cell::of(ownership, facts);
    let (action, reason) = rule(ownership, facts);
    Decision {
        action,
        cell,
        reason,
    }
}

/// The reason of the 4A/4B/4C rule (logs single it out: a user may wonder about it).
pub const ONSTART_CREATED_AFTER_START: &str = "onstart object created after start";

/// The reason of the 2B/5B/6B "once" rule: an onstart entry this process has synced.
pub const ONSTART_ENTRY_SYNCED: &str = "onstart entry already synced";
/// The reason of the row-5 "once" rule: an onstart object this process has synced.
pub const ONSTART_OBJECT_SYNCED: &str = "onstart object already synced";
/// The rule of a desired name held by an object that is not ours whose spec already
/// matches: nothing to write, but the object is not managed (a manifest change will not
/// reach it), which `autoregister_unowned_desired_apiservices` counts.
pub const NOT_OURS_SPEC_MATCHES: &str = "not ours, spec already as desired";
/// The rule of an object of ours whose declared fields all hold (nothing to apply).
pub const DECLARED_UP_TO_DATE: &str = "declared fields up to date";
/// The rule of an apply: a declared field differs from the object.
pub const DECLARED_DIFFERS: &str = "declared field differs";
/// The rule of an apply that only releases fields we no longer declare.
pub const NO_LONGER_DECLARED: &str = "field no longer declared";

/// The `switch` of `checkAPIService`, case by case in upstream's order.
fn rule(ownership: &Ownership, facts: &Facts<'_>) -> (Action, &'static str) {
    let desired = facts.desired;
    // Upstream's first four cases; each is about one kind of `current`, so a match
    // per kind keeps their order.
    let once_done = desired.is_some_and(|d| d.mode == SyncMode::OnStart) && facts.synced_once;
    let curr = match facts.current {
        // 1A, 1B, 1C
        Current::LookupError(e) => return (Action::Error(e.to_string()), "lookup failed"),
        Current::NotFound => {
            return match desired {
                // 2A
                None => (Action::None, "not desired, absent"),
                // 2B "once" enforcement: a missing onstart object is not recreated.
                Some(_) if once_done => (Action::None, ONSTART_ENTRY_SYNCED),
                // Deliberately absent: restored when its backend looks ready.
                Some(_) if facts.withdrawal == Withdrawal::Held => (Action::None, WITHDRAWN_HELD),
                // 2B, 2C
                Some(d) => (
                    Action::Create(Applied::config(ownership, d)),
                    "desired, absent",
                ),
            };
        }
        // 5B, 6B "once" enforcement (3B and 4B would be no-ops anyway).
        Current::Present(_) if once_done => return (Action::None, ONSTART_ENTRY_SYNCED),
        Current::Present(curr) => curr,
    };
    let Some(label) = ownership.managed_value(curr) else {
        // 3A, 3B, 3C: never touch what we do not own, unless adopting it.
        return not_ours(ownership, desired, curr);
    };
    let curr_on_start = label == AUTO_MANAGED_ON_START;
    if curr_on_start && !facts.present_at_start {
        // 4A, 4B, 4C
        return (Action::None, ONSTART_CREATED_AFTER_START);
    }
    if curr_on_start && facts.synced_once {
        // 5A, 5B, 5C: "once" enforcement.
        return (Action::None, ONSTART_OBJECT_SYNCED);
    }
    let Some(desired) = desired else {
        // 5A, 6A: a spurious object we manage.
        if facts.desired_set_empty && !ownership.allow_empty {
            return (
                Action::Blocked(
                    "the desired set is empty: not deregistering without --allow-empty".into(),
                ),
                "managed, not desired, empty set",
            );
        }
        return match (&curr.metadata.name, &curr.metadata.uid) {
            (Some(name), Some(uid)) if !name.is_empty() && !uid.is_empty() => (
                Action::Delete {
                    name: name.to_string(),
                    uid: uid.to_string(),
                    resource_version: None,
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
    if facts.withdrawal == Withdrawal::Due && !curr_on_start {
        // 6B/6C: ours, continuously synced, unavailable too long. (Onstart objects are never
        // withdrawn: nothing would bring them back before a restart.) The object deleted is
        // the one in hand, and only while it itself says unavailable: the withdrawal's clock
        // may be read just before the watch brings `Available=True`.
        let meta = &curr.metadata;
        if let (Some(name), Some(uid), Some(rv)) = (&meta.name, &meta.uid, &meta.resource_version) {
            if Observed::of(curr).is_unavailable() {
                return (
                    Action::Delete {
                        name: name.to_string(),
                        uid: uid.to_string(),
                        resource_version: Some(rv.to_string()),
                    },
                    WITHDRAW_UNAVAILABLE,
                );
            }
        }
    }
    // 5B, 5C, 6B, 6C: apply what the manifest declares, when the object lacks it or we
    // own a field it no longer declares.
    let config = Applied::config(ownership, desired);
    if Applied::holds_exactly(&config, curr) {
        return (Action::None, DECLARED_UP_TO_DATE);
    }
    let applied = Applied::from_config(config);
    let cmp = applied.compare(curr, &ownership.field_manager);
    if !cmp.needs_apply() {
        return (Action::None, DECLARED_UP_TO_DATE);
    }
    let reason = if cmp.differs.is_empty() {
        NO_LONGER_DECLARED
    } else {
        DECLARED_DIFFERS
    };
    let takeover = if cmp.migrate {
        Takeover::OwnUpdates
    } else {
        Takeover::None
    };
    let mut config = applied.config;
    config.metadata.uid = curr.metadata.uid.clone();
    let apply = Apply {
        config,
        takeover,
        differs: cmp.differs,
        released: cmp.released,
    };
    (Action::Update(apply), reason)
}

/// 3A, 3B, 3C: an object that is not ours.
fn not_ours(
    ownership: &Ownership,
    desired: Option<&Desired>,
    curr: &APIService,
) -> (Action, &'static str) {
    let Some(desired) = desired else {
        return (Action::None, "not ours");
    };
    let owner = ownership.owner(curr);
    let applied = Applied::of(ownership, desired);
    if ownership.adopt && owner.adoptable() {
        // In place (same UID): the declared fields become ours alone, the rest stays its
        // owners'.
        let cmp = applied.compare(curr, &ownership.field_manager);
        let mut config = applied.config;
        config.metadata.uid = curr.metadata.uid.clone();
        let apply = Apply {
            config,
            takeover: Takeover::Adoption,
            differs: cmp.differs,
            released: cmp.released,
        };
        return (Action::Adopt(apply), "not ours, adopting");
    }
    if applied.spec_matches(curr) {
        return (Action::None, NOT_OURS_SPEC_MATCHES);
    }
    let managers = curr.metadata.field_managers();
    let managers = if managers.is_empty() {
        String::new()
    } else {
        format!(", written by {}", managers.join(", "))
    };
    let remedy = match (&owner, ownership.adopt) {
        (Owner::Unlabelled, _) => "--adopt would take it over in place",
        (Owner::KubeApiserver(_), _) => "never adopted: kube-apiserver owns it",
        (Owner::OtherController { .. }, _) => "never adopted: another controller claims it",
    };
    (
        Action::Blocked(format!("held by {owner}{managers}, spec differs; {remedy}")),
        "not ours, spec differs",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::APIServiceSpec;
    use crate::controller::availability::status::available_status;
    use serde_json::json;

    const KEY: &str = DEFAULT_LABEL_KEY;

    /// `decide` with the default ownership and a non-empty desired set.
    fn decide4(
        desired: Option<&Desired>,
        current: Current<'_>,
        synced_once: bool,
        present_at_start: bool,
    ) -> Decision {
        decide(
            &Ownership::default(),
            &Facts {
                desired,
                current,
                synced_once,
                present_at_start,
                desired_set_empty: false,
                withdrawal: Withdrawal::Keep,
            },
        )
    }

    fn spec(group: &str) -> APIServiceSpec {
        APIServiceSpec {
            group: group.into(),
            version: "v1".into(),
            group_priority_minimum: 100,
            version_priority: 10,
            ..Default::default()
        }
    }

    /// A cached object as the server returns it: with uid and resourceVersion.
    fn cached(label: Option<&str>, group: &str) -> APIService {
        let mut o = APIService::new("v1.foo", spec(group));
        o.metadata.uid = Some("uid-1".into());
        o.metadata.resource_version = Some("42".into());
        if let Some(l) = label {
            o.metadata.set_label(KEY, l);
        }
        o
    }

    fn desired(mode: SyncMode) -> Desired {
        Desired::new(&APIService::new("v1.foo", spec("foo")), mode)
    }

    /// The facts behind a cell: the cached object (by row) and the desired entry (by column).
    fn facts_for(cell: &str) -> (Option<Desired>, Option<APIService>, bool) {
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
        let (d, curr, at_start) = facts_for(cell);
        let current = match (cell.starts_with('1'), &curr) {
            (true, _) => Current::LookupError("etcd timeout"),
            (false, None) => Current::NotFound,
            (false, Some(c)) => Current::Present(c),
        };
        decide4(d.as_ref(), current, synced_once, at_start)
    }

    #[test]
    fn every_cell_has_a_distinct_meaning() {
        let mut seen = std::collections::HashSet::new();
        for row in 1..=6 {
            for column in ['A', 'B', 'C'] {
                let cell = Cell::new(row, column).unwrap();
                assert!(seen.insert(cell.meaning()), "{cell} repeats a meaning");
            }
        }
        assert_eq!(
            Cell::new(6, 'C').unwrap().meaning(),
            "managed always, desired always"
        );
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
            ("not ours, onstart, spec differs: blocked", "3B", false, "blocked"),
            ("not ours, always, spec differs: blocked", "3C", false, "blocked"),
            ("unmanaged after sync, not desired: untouched", "3A", true, "none"),
            ("unmanaged after sync, onstart: untouched", "3B", true, "none"),
            ("not ours after sync, always: still blocked", "3C", true, "blocked"),
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
            let got = decide4(Some(&d), Current::Present(&curr), false, at_start);
            assert_eq!(got.cell.to_string(), "6C");
            assert_eq!(got.action.verb(), "update");
        }
    }

    #[test]
    fn unknown_label_value_is_not_managed() {
        let curr = cached(Some("false"), "stale");
        let got = decide4(None, Current::Present(&curr), false, true);
        assert_eq!(got.cell.to_string(), "3A");
        assert_eq!(got.action, Action::None);
    }

    #[test]
    fn lookup_error_carries_the_message() {
        let got = decide4(None, Current::LookupError("etcd timeout"), false, false);
        assert_eq!(got.action, Action::Error("etcd timeout".to_string()));
    }

    #[test]
    fn create_sends_the_labelled_desired_object() {
        for (mode, label) in [(SyncMode::OnStart, "onstart"), (SyncMode::Always, "true")] {
            let d = desired(mode);
            let Action::Create(obj) = decide4(Some(&d), Current::NotFound, false, false).action
            else {
                panic!("{mode}: expected a create");
            };
            assert_eq!(obj.ownership(KEY), Some(label));
            assert_eq!(obj, Ownership::default().labelled(&d.object, mode));
        }
    }

    #[test]
    fn an_update_applies_exactly_the_declared_fields_to_that_object() {
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
        let got = decide4(Some(&d), Current::Present(&curr), false, true);
        assert_eq!(got.reason, DECLARED_DIFFERS);
        let Action::Update(a) = got.action else {
            panic!("expected an update");
        };
        // What the manifest declares and our label, nothing the object has besides: the
        // server keeps the rest as its writers left it.
        let mut want = Ownership::default().labelled(&d.object, d.mode);
        want.metadata.uid = Some("uid-1".into());
        assert_eq!(a.config, want);
        assert_eq!(
            a.differs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["spec.group"]
        );
        assert!(a.released.is_empty());
        assert_eq!(a.takeover, Takeover::None);
    }

    #[test]
    fn the_declared_mode_is_applied_to_our_label() {
        for (cell, label) in [("5C", "true"), ("6B", "onstart")] {
            let (d, curr, at_start) = facts_for(cell);
            let mut curr = curr.unwrap();
            curr.spec = d.as_ref().unwrap().object.spec.clone();
            let got = decide4(d.as_ref(), Current::Present(&curr), false, at_start);
            let Action::Update(a) = got.action else {
                panic!("{cell}: expected an update: {got:?}");
            };
            assert_eq!(a.config.ownership(KEY), Some(label), "{cell}");
        }
    }

    #[test]
    fn written_objects_carry_api_version_and_kind() {
        let mut bare = cached(Some("true"), "stale");
        bare.api_version = Box::default();
        bare.kind = Box::default();
        let d = Desired::new(
            &APIService {
                metadata: bare.metadata.clone(),
                ..Default::default()
            },
            SyncMode::Always,
        );
        let Action::Create(obj) = decide4(Some(&d), Current::NotFound, false, false).action else {
            panic!("expected a create");
        };
        assert_eq!(
            (&*obj.api_version, &*obj.kind),
            ("apiregistration.k8s.io/v1", "APIService")
        );
        let Action::Update(a) = decide4(Some(&d), Current::Present(&bare), false, true).action
        else {
            panic!("expected an update");
        };
        assert_eq!(
            (&*a.config.api_version, &*a.config.kind),
            ("apiregistration.k8s.io/v1", "APIService")
        );
    }

    #[test]
    fn no_update_when_the_declared_fields_hold() {
        for cell in ["5B", "6C"] {
            let (d, curr, at_start) = facts_for(cell);
            let mut curr = curr.unwrap();
            curr.spec = d.as_ref().unwrap().object.spec.clone();
            let got = decide4(d.as_ref(), Current::Present(&curr), false, at_start);
            assert_eq!(got.cell.to_string(), cell);
            assert_eq!(got.action, Action::None, "{cell}");
            assert_eq!(got.reason, DECLARED_UP_TO_DATE);
        }
    }

    #[test]
    fn fields_the_manifest_does_not_declare_are_left_alone() {
        let d = desired(SyncMode::Always);
        let mut curr = cached(Some("true"), "foo");
        // A newer server's field, an injected CA bundle, someone's label.
        curr.spec.extra.insert("newField".into(), json!(1));
        curr.spec.ca_bundle = Some(b"injected".to_vec().into_boxed_slice());
        curr.metadata.set_label("team", "x");
        let got = decide4(Some(&d), Current::Present(&curr), false, true);
        assert_eq!(got.action, Action::None);
    }

    #[test]
    fn a_field_we_own_and_no_longer_declare_is_applied_away() {
        let d = desired(SyncMode::Always);
        let mut curr = cached(Some("true"), "foo");
        curr.metadata.set_label("team", "x");
        curr.metadata.managed_fields = Some(crate::api::RawJson::from_value(&json!([
            {"manager": DEFAULT_FIELD_MANAGER, "operation": "Apply", "apiVersion": "apiregistration.k8s.io/v1",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}}
        ])));
        let got = decide4(Some(&d), Current::Present(&curr), false, true);
        assert_eq!(got.reason, NO_LONGER_DECLARED);
        let Action::Update(a) = got.action else {
            panic!("expected an update: {got:?}");
        };
        assert_eq!(a.released[0].to_string(), "metadata.labels[\"team\"]");
    }

    #[test]
    fn delete_carries_name_and_uid_precondition() {
        for cell in ["5A", "6A"] {
            let got = decide_cell(cell, false);
            assert_eq!(
                got.action,
                Action::Delete {
                    name: "v1.foo".to_string(),
                    uid: "uid-1".to_string(),
                    resource_version: None,
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
        no_name.metadata.name = Some(Box::default());
        for curr in [no_uid, no_name] {
            let got = decide4(None, Current::Present(&curr), false, true);
            assert_eq!(got.cell.to_string(), "6A");
            assert_eq!(got.action.verb(), "error");
        }
    }

    #[test]
    fn labelled_sets_our_label_and_strips_kube_apiservers_on_a_copy() {
        let mut obj = APIService::new("v1.foo", spec("foo"));
        obj.metadata.set_label(AUTO_MANAGED_LABEL, "true");
        obj.metadata.set_label("team", "x");
        let own = Ownership::default();
        let on_start = own.labelled(&obj, SyncMode::OnStart);
        let always = own.labelled(&obj, SyncMode::Always);
        assert_eq!(obj.auto_managed(), Some("true"), "input untouched");
        assert_eq!(on_start.ownership(KEY), Some("onstart"));
        assert_eq!(always.ownership(KEY), Some("true"));
        assert_eq!(
            always.auto_managed(),
            None,
            "never written on kube-apiserver's behalf"
        );
        assert_eq!(always.metadata.label("team"), Some("x"));
        // The one legitimate use of upstream's key: the program is the aggregator.
        let upstream = Ownership::new(AUTO_MANAGED_LABEL).labelled(&obj, SyncMode::OnStart);
        assert_eq!(upstream.auto_managed(), Some("onstart"));
    }

    #[test]
    fn manifest_mode_from_our_key_or_for_compatibility_kube_aggregators() {
        let own = Ownership::default();
        let mut obj = APIService::new("v1.foo", spec("foo"));
        assert_eq!(own.mode_in_manifest(&obj), SyncMode::Always);
        obj.metadata.set_label(AUTO_MANAGED_LABEL, "onstart");
        assert_eq!(own.mode_in_manifest(&obj), SyncMode::OnStart);
        obj.metadata.set_label(KEY, "true");
        assert_eq!(own.mode_in_manifest(&obj), SyncMode::Always, "our key wins");
    }

    fn facts<'a>(
        d: Option<&'a Desired>,
        curr: &'a APIService,
        synced_once: bool,
        desired_set_empty: bool,
    ) -> Facts<'a> {
        Facts {
            desired: d,
            current: Current::Present(curr),
            synced_once,
            present_at_start: true,
            desired_set_empty,
            withdrawal: Withdrawal::Keep,
        }
    }

    #[test]
    fn withdrawal_deletes_an_unavailable_registration_and_holds_it_absent() {
        let own = Ownership::default();
        let d = desired(SyncMode::Always);
        let with_available = |status: &str| {
            let mut o = cached(Some("true"), "foo");
            o.status = Some(available_status(status, "", ""));
            o
        };
        let curr = with_available("False");
        let mut f = facts(Some(&d), &curr, true, false);
        f.withdrawal = Withdrawal::Due;
        let got = decide(&own, &f);
        assert_eq!(got.cell.to_string(), "6C");
        assert_eq!(got.reason, WITHDRAW_UNAVAILABLE);
        assert_eq!(
            got.action,
            Action::Delete {
                name: "v1.foo".into(),
                uid: "uid-1".into(),
                resource_version: Some("42".into()),
            }
        );
        // Due by the clock, but the object in hand is available (or says nothing): kept.
        for status in ["True", "Unknown"] {
            let curr = with_available(status);
            let mut f = facts(Some(&d), &curr, true, false);
            f.withdrawal = Withdrawal::Due;
            assert_eq!(decide(&own, &f).action, Action::None, "{status}");
        }
        let curr = cached(Some("true"), "foo");
        let mut f = facts(Some(&d), &curr, true, false);
        f.withdrawal = Withdrawal::Due;
        assert_eq!(decide(&own, &f).action, Action::None, "no status");
        // Not ours: never withdrawn.
        let theirs = cached(None, "foo");
        let mut f = facts(Some(&d), &theirs, true, false);
        f.withdrawal = Withdrawal::Due;
        assert_eq!(decide(&own, &f).action, Action::None);
        // Withdrawn and absent: no create until the backend looks ready.
        let held = Facts {
            desired: Some(&d),
            current: Current::NotFound,
            synced_once: true,
            present_at_start: true,
            desired_set_empty: false,
            withdrawal: Withdrawal::Held,
        };
        let got = decide(&own, &held);
        assert_eq!(
            (got.cell.to_string(), got.action),
            ("2C".into(), Action::None)
        );
        assert_eq!(got.reason, WITHDRAWN_HELD);
        let back = Facts {
            withdrawal: Withdrawal::Keep,
            ..held
        };
        assert_eq!(decide(&own, &back).action.verb(), "create");
    }

    #[test]
    fn kube_apiservers_objects_are_never_ours() {
        let own = Ownership::default();
        let d = desired(SyncMode::Always);
        for value in ["onstart", "true"] {
            let mut builtin = cached(None, "stale");
            builtin.metadata.set_label(AUTO_MANAGED_LABEL, value);
            // Even with our key beside it: the kube-aggregator label wins.
            let mut both = builtin.clone();
            both.metadata.set_label(KEY, "true");
            for curr in [&builtin, &both] {
                for (d, cell) in [(None, "3A"), (Some(&d), "3C")] {
                    for adopt in [false, true] {
                        let own = Ownership {
                            adopt,
                            ..own.clone()
                        };
                        let got = decide(&own, &facts(d, curr, false, false));
                        assert_eq!(got.cell.to_string(), cell, "{value} adopt={adopt}");
                        assert!(
                            matches!(got.action, Action::None | Action::Blocked(_)),
                            "{value} {cell} adopt={adopt}: {:?}",
                            got.action
                        );
                    }
                }
            }
        }
        // Unless upstream's key is ours: then they are rows 5 and 6 as upstream.
        let mut builtin = cached(None, "stale");
        builtin.metadata.set_label(AUTO_MANAGED_LABEL, "onstart");
        let got = decide(
            &Ownership::new(AUTO_MANAGED_LABEL),
            &facts(None, &builtin, false, false),
        );
        assert_eq!(
            (got.cell.to_string().as_str(), got.action.verb()),
            ("5A", "delete")
        );
    }

    #[test]
    fn desired_but_not_ours_is_blocked_naming_the_owner_unless_specs_match() {
        let own = Ownership::default();
        let d = desired(SyncMode::Always);
        let mut curr = cached(None, "stale");
        curr.metadata.managed_fields = Some(crate::api::RawJson::from_value(&json!([
            {"manager": "helm", "operation": "Update", "time": "2026-01-01T00:00:00Z"}
        ])));
        let got = decide(&own, &facts(Some(&d), &curr, false, false));
        let Action::Blocked(why) = &got.action else {
            panic!("expected blocked: {got:?}");
        };
        assert!(
            why.contains("held by an object without ownership label"),
            "{why}"
        );
        assert!(why.contains("helm"), "{why}");
        assert!(why.contains("--adopt would take it over"), "{why}");
        curr.spec = d.object.spec.clone();
        let got = decide(&own, &facts(Some(&d), &curr, false, false));
        assert_eq!(
            (got.cell.to_string().as_str(), got.action),
            ("3C", Action::None)
        );
        // Another instance's key: named, and never adopted.
        let mut other = cached(None, "stale");
        other
            .metadata
            .set_label("team-b.example.com/automanaged", "true");
        let adopting = Ownership { adopt: true, ..own };
        let got = decide(&adopting, &facts(Some(&d), &other, false, false));
        let Action::Blocked(why) = &got.action else {
            panic!("expected blocked: {got:?}");
        };
        assert!(why.contains("team-b.example.com/automanaged=true"), "{why}");
    }

    #[test]
    fn adopt_takes_an_unlabelled_object_over_in_place() {
        let own = Ownership {
            adopt: true,
            ..Ownership::default()
        };
        for mode in [SyncMode::OnStart, SyncMode::Always] {
            let d = desired(mode);
            let mut curr = cached(None, "stale");
            curr.metadata.set_label("team", "x");
            curr.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
            let got = decide(&own, &facts(Some(&d), &curr, false, false));
            let Action::Adopt(a) = got.action else {
                panic!("{mode}: expected adopt: {got:?}");
            };
            assert_eq!(got.cell.row(), 3);
            // The declared fields only: the object's other labels and annotations stay
            // its other writers'.
            let obj = &a.config;
            assert_eq!(obj.spec, d.object.spec);
            assert_eq!(obj.ownership(KEY), Some(mode.label_value()));
            assert_eq!(obj.metadata.label("team"), None);
            assert_eq!(obj.metadata.annotations, None);
            assert_eq!(obj.metadata.uid.as_deref(), Some("uid-1"), "same object");
            assert_eq!(obj.metadata.resource_version, None);
            assert_eq!(a.takeover, Takeover::Adoption);
        }
        // Once an onstart entry synced, nothing more: not even adoption.
        let d = desired(SyncMode::OnStart);
        let curr = cached(None, "stale");
        let got = decide(&own, &facts(Some(&d), &curr, true, false));
        assert_eq!(got.action, Action::None);
    }

    #[test]
    fn empty_desired_set_deletes_nothing_unless_allowed() {
        for cell in ["5A", "6A"] {
            let (_, curr, _) = facts_for(cell);
            let curr = curr.unwrap();
            let guarded = decide(&Ownership::default(), &facts(None, &curr, false, true));
            assert_eq!(guarded.cell.to_string(), cell);
            assert_eq!(guarded.action.verb(), "blocked", "{cell}");
            let allowed = Ownership {
                allow_empty: true,
                ..Ownership::default()
            };
            let got = decide(&allowed, &facts(None, &curr, false, true));
            assert_eq!(got.action.verb(), "delete", "{cell} with allow_empty");
        }
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
    /// Upstream's objects have empty specs; "modified" ones have group `something`. Here
    /// the base group is `g`: an empty group is a field the manifest does not declare, and
    /// an undeclared field another writer sets is left alone, not stomped.
    #[test]
    fn upstream_test_sync_cases() {
        fn obj(label: Option<&str>, group: &str) -> APIService {
            let mut o = APIService::new("foo", APIServiceSpec::default());
            o.spec.group = group.into();
            o.metadata.uid = Some("uid-foo".into());
            if let Some(l) = label {
                o.metadata.set_label(KEY, l);
            }
            o
        }
        let plain = || {
            let mut o = APIService::new("foo", APIServiceSpec::default());
            o.spec.group = "g".into();
            o
        };
        let managed = obj(Some("true"), "g");
        let managed_on_start = obj(Some("onstart"), "g");
        let managed_modified = obj(Some("true"), "something");
        let unmanaged = obj(None, "g");
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
            let got = decide4(d, current, synced, at_start).action;
            match (want, got) {
                (Want::Nothing, Action::None) => {}
                (Want::Create(label), Action::Create(o)) => {
                    assert_eq!(o.metadata.name.as_deref(), Some("foo"), "{name}");
                    assert_eq!(o.ownership(KEY), Some(label), "{name}");
                }
                // The group is stomped back. Upstream's label stays "true" (its update
                // copies the cached object's); ours is declared, so an onstart entry
                // applies "onstart".
                (Want::Update, Action::Update(a)) => {
                    let o = &a.config;
                    assert_eq!(o.metadata.name.as_deref(), Some("foo"), "{name}");
                    let label = d.map(|d| d.mode.label_value());
                    assert_eq!(o.ownership(KEY), label, "{name}");
                    assert_eq!(&*o.spec.group, "g", "{name}");
                    assert!(
                        a.differs.iter().any(|p| p.to_string() == "spec.group"),
                        "{name}"
                    );
                }
                (Want::Delete, Action::Delete { name: n, uid, .. }) => {
                    assert_eq!((n.as_str(), uid.as_str()), ("foo", "uid-foo"), "{name}");
                }
                (_, got) => panic!("{name}: unexpected {got:?}"),
            }
        }
    }
}
