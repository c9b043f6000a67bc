//! One sync of one name: gather the facts, decide, execute, record the outcome.

use std::fmt;
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use super::apply::{self, NotNow};
use super::availability::Availability;
use super::ca::{CaSources, Unresolved};
use super::decision::{
    decide, Action, Cell, Current, Decision, Desired, Facts, Ownership, NOT_OURS_SPEC_MATCHES,
    ONSTART_CREATED_AFTER_START, ONSTART_ENTRY_SYNCED, ONSTART_OBJECT_SYNCED, WITHDRAW_UNAVAILABLE,
};
use super::events::EventReason;
use super::fields::Applied;
use super::fights::{FightDetector, FIGHT_WINDOW};
use super::metrics::SyncResult;
use super::report::Reporters;
use super::state::{Outcome, Rejection, State};
use crate::api::APIService;
use crate::client::{Api, DeleteParams, Error};
use crate::runtime::store::Store;

/// What one sync needs besides the name: bookkeeping, cache, policy, API and the fight detector.
pub(crate) struct SyncContext<'a> {
    /// Desired set and outcomes.
    pub state: &'a State,
    /// The APIService cache.
    pub store: &'a Store<APIService>,
    /// Which objects are ours.
    pub ownership: &'a Ownership,
    /// Where writes go (carrying our field manager).
    pub api: &'a Api<APIService>,
    /// Notices other writers undoing ours.
    pub fights: &'a FightDetector,
    /// Asked right before each write (stopping, leadership); `Err(why)` withholds it.
    pub may_write: &'a dyn Fn() -> Result<(), String>,
    /// Metrics, Events and "left alone" notices.
    pub report: &'a Reporters,
    /// Availability and withdrawal of unavailable registrations.
    pub availability: &'a Availability,
    /// Where desired CA bundles come from.
    pub ca: &'a CaSources,
}

/// The soonest retry of a write answered NotFound, Conflict or AlreadyExists. The change
/// behind such an answer (someone else's create, edit or delete) reaches the cache by the
/// watch, whose event requeues the name at once; retrying sooner only repeats the answer, in
/// a loop for as long as a watch is down (chaos seeds 258, 1217, 1289, 3415). The retry
/// itself covers an answer no change follows.
pub(crate) const STALE_CACHE_RETRY: Duration = Duration::from_secs(1);

/// How long a write the server refused (422 Invalid, 415, an apply's field conflict) waits
/// before it is sent again unchanged: the workqueue's maximum per-key backoff. A change of
/// the manifest or of the object retries it at once.
pub(crate) const REJECTED_RETRY: Duration = crate::runtime::workqueue::DEFAULT_MAX_DELAY;

/// A successful sync: `Some(wait)` when a put-back was held back by its pace in a fight
/// (see [`FightDetector`]): the name is to be decided again after `wait`.
pub(crate) type Pace = Option<Duration>;

/// Why one sync of one name failed.
#[derive(Debug, Clone)]
pub(crate) enum SyncError {
    /// The decision itself is an error (the table's lookup-error row; a cached object
    /// without name or UID): nothing was sent, the server is not to blame.
    Decision(String),
    /// The write was refused or got no answer.
    Write(Error),
    /// The server refused this spec as invalid (now or earlier, for the same write): not
    /// sent again before `retry_in` unless the manifest or the object changes.
    Rejected {
        /// The server's answer.
        message: String,
        /// When to try the same write again.
        retry_in: Duration,
    },
}

impl SyncError {
    /// The server's `Retry-After`, when it gave one.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            SyncError::Decision(_) | SyncError::Rejected { .. } => None,
            SyncError::Write(e) => e.retry_after(),
        }
    }

    /// For a write the server refused as invalid: when to send it again unchanged.
    pub(crate) fn rejected_retry(&self) -> Option<Duration> {
        match self {
            SyncError::Rejected { retry_in, .. } => Some(*retry_in),
            _ => None,
        }
    }

    /// No retry sooner than this: the server's `Retry-After`, and for an answer that means
    /// the cache is behind, [`STALE_CACHE_RETRY`].
    pub(crate) fn retry_floor(&self) -> Duration {
        let floor = self.retry_after().unwrap_or_default();
        if self.is_benign() {
            floor.max(STALE_CACHE_RETRY)
        } else {
            floor
        }
    }

    /// The write was cut short or withheld by shutdown (or lost leadership).
    pub(crate) fn is_cancelled(&self) -> bool {
        matches!(self, SyncError::Write(e) if e.is_cancelled())
    }

    /// Answers that mean "the cache is behind the server", not "the server is failing".
    fn is_benign(&self) -> bool {
        match self {
            SyncError::Decision(_) | SyncError::Rejected { .. } => false,
            SyncError::Write(e) => {
                !refused(e) && (e.is_not_found() || e.is_conflict() || e.is_already_exists())
            }
        }
    }
}

impl fmt::Display for SyncError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncError::Decision(m) => write!(f, "cannot decide: {m}"),
            SyncError::Write(e) => e.fmt(f),
            SyncError::Rejected { message, .. } => write!(f, "refused by the server: {message}"),
        }
    }
}

/// Decides for `name` from the current facts, without acting, on `cached`: the cached
/// object as the caller read it (once, for everything it decides on).
pub(crate) fn plan(
    state: &State,
    cached: Option<&APIService>,
    ownership: &Ownership,
    availability: &Availability,
    name: &str,
    desired: Option<Desired>,
) -> Decision {
    let withdrawal = availability.withdrawal(name, desired.as_ref());
    let current = match cached {
        Some(obj) => Current::Present(obj),
        None => Current::NotFound,
    };
    decide(
        ownership,
        &Facts {
            desired: desired.as_ref(),
            current,
            synced_once: state.synced_once(name),
            present_at_start: state.present_at_start(name),
            desired_set_empty: state.desired_is_empty(),
            withdrawal,
        },
    )
}

/// Syncs `name` once; `Ok` means the name needs no retry.
///
/// A write answered NotFound, Conflict or AlreadyExists does not count as synced (nothing
/// was written, and `--once` must not report success); it is decided again when the watch
/// brings the change behind the answer, and retried no sooner than [`STALE_CACHE_RETRY`].
/// `cx.may_write` is asked right before a write is sent; when it refuses, nothing is sent
/// and the sync ends as a cancelled write.
pub(crate) fn sync(cx: &SyncContext<'_>, name: &str) -> Result<Pace, SyncError> {
    let desired = match with_ca_bundle(cx, name) {
        Ok(d) => d,
        Err(held) => return held.map(|()| None),
    };
    // One read of the cache for the decision and for what our last apply says about it: an
    // event between two reads would make the decision's object look like a newer one.
    let cached = cx.store.get(name);
    let decision = plan(
        cx.state,
        cached.as_deref(),
        cx.ownership,
        cx.availability,
        name,
        desired.clone(),
    );
    let withdrawing = decision.reason == WITHDRAW_UNAVAILABLE;
    // A create of a withdrawn name restores it: that Event says why.
    let restoring = cx.availability.is_withdrawn(name);
    let cell = decision.cell;
    let why = Why(cell, decision.reason);
    let uid = cached
        .as_deref()
        .and_then(|o| o.metadata.uid.as_deref().map(str::to_string));
    if matches!(decision.action, Action::Create(_)) && cx.state.created_unseen(name) {
        // Our own create has not reached the cache yet (a relist's re-queue, another
        // registration of the name): creating again would only be answered 409. The watch
        // event that shows it decides the name again.
        debug!("{name} {cell}: created, waiting for the watch to show it");
        cx.report.metrics.observe_sync(cell, SyncResult::Skipped);
        cx.state.record_outcome(name, Outcome::Synced);
        return Ok(None);
    }
    let prior = match apply::prior(cx, name, &decision.action, cached.as_deref()) {
        Ok(p) => p,
        Err(NotNow::Unseen) => {
            // Our apply has not reached the cache yet (its watch event decides the name
            // again): the same apply now would be a write the server already has.
            debug!("{name} {cell}: our apply is answered, waiting for the watch to show it");
            cx.report.metrics.observe_sync(cell, SyncResult::Skipped);
            cx.state.record_outcome(name, Outcome::Synced);
            return Ok(None);
        }
        Err(NotNow::Paced(wait)) => {
            // In a fight: this put-back waits for its pace; the name is decided again
            // then (a manifest change is no put-back and is not held by this).
            let verb = decision.action.verb();
            debug!("{name} {cell}: {verb} again in {wait:?} (paced fight)");
            cx.report.metrics.observe_sync(cell, SyncResult::Skipped);
            return Ok(Some(wait));
        }
    };
    let fingerprint = write_fingerprint(&decision.action, &prior);
    if let (Some(fp), Some(r)) = (fingerprint, cx.state.rejection(name)) {
        let age = r.at.elapsed();
        if r.fingerprint == fp && age < REJECTED_RETRY {
            debug!(
                "{name} {cell}: not sent again, the server refused this write: {}",
                r.message
            );
            cx.report.metrics.observe_sync(cell, SyncResult::Skipped);
            cx.state
                .record_outcome(name, Outcome::Rejected(r.message.clone()));
            return Err(SyncError::Rejected {
                message: r.message,
                retry_in: REJECTED_RETRY - age,
            });
        }
    }
    // The fields a put-back restores and who else owns them, before it makes them ours.
    let contest = apply::contest(cx, name, &decision.action, &prior);
    if !matches!(
        decision.action,
        Action::None | Action::Blocked(_) | Action::Error(_)
    ) {
        if let Err(held) = (cx.may_write)() {
            debug!(name, cell:% = cell; "{name} {cell}: write withheld: {held}");
            cx.state
                .record_outcome(name, Outcome::Failed(format!("not written: {held}")));
            return Err(SyncError::Write(Error::Cancelled));
        }
    }
    let differs = match &decision.action {
        Action::Update(a) | Action::Adopt(a) => apply::describe(a),
        _ => String::new(),
    };
    // The resourceVersion our takeover of managedFields wrote before the apply, if any.
    let mut taken_over = None;
    let (verb, reason, result) = match decision.action {
        Action::None => {
            if decision.reason == NOT_OURS_SPEC_MATCHES {
                unowned_but_matching(cx, name, cell, uid.as_deref());
            }
            // The declared fields (CA bundle filled in) against the object, as the
            // decision saw them.
            let manifest_differs = || {
                let cached = cx.store.get(name);
                matches!((&desired, cached), (Some(d), Some(c))
                    if Applied::of(cx.ownership, d).compare(&c, &cx.ownership.field_manager).needs_apply())
            };
            left_alone(cx.report, name, &decision, &why, manifest_differs);
            cx.report.metrics.observe_sync(cell, SyncResult::Skipped);
            cx.state.record_outcome(name, Outcome::Synced);
            removal_synced(cx, name, cell);
            return Ok(None);
        }
        Action::Blocked(blocked) => {
            cx.report.metrics.observe_sync(cell, SyncResult::Skipped);
            // Before the outcome is recorded, so a `--once` that sees it can flush the Event;
            // repeats are dropped by the recorder's dedup window.
            // Row 3: someone else's object; rows 5/6 of column A: the empty-set guard.
            let refusal = if cell.row() == 3 {
                EventReason::NotOwned
            } else {
                EventReason::EmptySetRefused
            };
            cx.report
                .events
                .record(name, uid.as_deref(), refusal, &blocked);
            if cx
                .state
                .record_outcome(name, Outcome::Blocked(blocked.clone()))
            {
                warn!(name, cell:% = cell, action = "blocked"; "{name} {cell}: not written ({}): {blocked}", cell.meaning());
            } else {
                debug!(name, cell:% = cell, action = "blocked"; "{name} {cell}: still not written: {blocked}");
            }
            return Ok(None);
        }
        Action::Error(message) => ("error", None, Err(SyncError::Decision(message))),
        Action::Create(obj) => {
            // Ours and unseen from before it is sent: a removal while it is on its way must
            // wait for the object it makes, not find nothing to delete.
            cx.state.note_creating(name);
            let created = cx.api.create_uid(&obj);
            if created.is_err() {
                cx.state.forget_create(name);
            }
            (
                "create",
                (!restoring).then_some(EventReason::Registered),
                write(created),
            )
        }
        Action::Update(a) => (
            "update",
            Some(EventReason::Updated),
            write(apply::send(cx, name, &a, &mut taken_over).map(|()| uid.clone())),
        ),
        Action::Adopt(a) => (
            "adopt",
            Some(EventReason::Adopted),
            write(apply::send(cx, name, &a, &mut taken_over).map(|()| uid.clone())),
        ),
        Action::Delete {
            name: n,
            uid,
            resource_version,
        } => {
            let p = DeleteParams {
                uid: Some(uid.clone()),
                resource_version,
            };
            (
                "delete",
                // A withdrawal has an Event of its own.
                (!withdrawing).then_some(EventReason::Deregistered),
                write(cx.api.delete(&n, &p).map(|()| Some(uid))),
            )
        }
    };
    match &result {
        Ok(written_uid) => {
            info!(name, cell:% = cell, action = verb; "{name} {cell} {verb} ({why}){differs}: ok");
            apply::note_written(cx, name, &prior, taken_over);
            if verb == "create" {
                // Noted first, then checked: the watch may have shown the object already
                // (its event can overtake this answer); if not, its event clears the note.
                cx.state.note_created(name, written_uid.as_deref());
                if let Some(o) = cx.store.get(name) {
                    cx.state.note_seen(name, o.metadata.uid.as_deref());
                }
            }
            if let Some(reason) = reason {
                cx.report
                    .events
                    .record_with(name, written_uid.as_deref(), reason, || {
                        format!("{verb} by autoregister: {why} (cell {cell})")
                    });
            }
            // Our own withdrawal and restore undo nobody's work.
            let ours = if withdrawing {
                cx.availability.withdrawn(name, written_uid.as_deref());
                true
            } else {
                verb == "create" && cx.availability.created(name, written_uid.as_deref())
            };
            if let Some(contest) = &contest {
                apply::fight_over_fields(cx, name, uid.as_deref(), contest);
            } else if cx.state.synced_once(name) && !ours && verb != "update" {
                notice_contested(cx, name, verb);
            }
        }
        // Shutdown cut the request short: not a failure worth a warning.
        Err(e) if e.is_cancelled() => {
            debug!(name, cell:% = cell, action = verb; "{name} {cell} {verb}: cancelled")
        }
        // Said once for all names by the pause that follows.
        Err(SyncError::Write(e)) if e.is_unreachable() => {
            debug!(name, cell:% = cell, action = verb; "{name} {cell} {verb}: {e}; waiting for the server")
        }
        Err(e) if e.is_benign() => info!(
            name, cell:% = cell, action = verb;
            "{name} {cell} {verb}: {e}; deciding again when the cache catches up"
        ),
        // A refused write is warned about once, by `rejected` below.
        Err(SyncError::Write(e)) if refused(e) => {}
        Err(e) => {
            warn!(name, cell:% = cell, action = verb; "{name} {cell} {verb} ({why}): failed: {e}")
        }
    }
    if let (Err(SyncError::Write(e)), Some(fp)) = (&result, fingerprint) {
        if refused(e) {
            return Err(rejected(cx, name, &why, verb, fp, uid.as_deref(), e));
        }
    }
    match &result {
        Ok(_) => cx.report.metrics.observe_sync(cell, SyncResult::Ok),
        // A cancelled request says nothing about the cell: shutdown cut it.
        Err(e) if e.is_cancelled() => {}
        Err(_) => cx.report.metrics.observe_sync(cell, SyncResult::Error),
    }
    let outcome = match &result {
        Ok(_) => Outcome::Synced,
        Err(e) => Outcome::Failed(format!("{verb}: {e}")),
    };
    cx.state.record_outcome(name, outcome);
    if result.is_ok() {
        removal_synced(cx, name, cell);
    }
    result.map(|_| None)
}

/// Answers that waiting will not change: the server refused the write as invalid (422),
/// does not take its media type (415), or an apply found fields another manager owns
/// (409 without `force`, which we always send: should one happen anyway).
fn refused(e: &Error) -> bool {
    e.is_invalid() || e.is_unsupported_media_type() || e.is_apply_conflict()
}

/// After a successful sync decided in column A (not desired): the name's removal is done,
/// unless the object appeared in the cache since the decision saw it absent (its event
/// decides the name again, and that sync finishes the removal).
fn removal_synced(cx: &SyncContext<'_>, name: &str, cell: Cell) {
    if cell.column() == 'A' && !(cell.row() == 2 && cx.store.get(name).is_some()) {
        cx.state.note_removal_synced(name);
    }
}

/// The desired entry of `name` with its CA bundle filled from its source; a source that
/// gives none ends the sync here, before any write: not read yet is a failure (retried),
/// unusable holds the name (a change of the source re-queues it).
fn with_ca_bundle(
    cx: &SyncContext<'_>,
    name: &str,
) -> Result<Option<Desired>, Result<(), SyncError>> {
    let Some(desired) = cx.state.desired(name) else {
        return Ok(None);
    };
    match super::ca::fill(cx.ca, desired) {
        Ok((filled, bundle)) => {
            if let Some(expiry) = cx.ca.observe(name, bundle.as_ref()) {
                let when = crate::api::time::format_rfc3339(expiry);
                let note = format!(
                    "the CA bundle's first certificate expires at {when}; renew the CA and                      update its source"
                );
                warn!("{name}: {note}");
                let uid = cx.store.get(name).and_then(|o| o.metadata.uid.clone());
                cx.report
                    .events
                    .record(name, uid.as_deref(), EventReason::CABundleExpiring, &note);
            }
            Ok(Some(filled))
        }
        Err(Unresolved::Pending(why)) => {
            debug!("{name}: CA bundle not available yet: {why}");
            let why = format!("CA bundle not available: {why}");
            cx.state.record_outcome(name, Outcome::Failed(why.clone()));
            Err(Err(SyncError::Decision(why)))
        }
        Err(Unresolved::Invalid(why)) => {
            let why = format!("CA bundle not usable, nothing written: {why}");
            let uid = cx.store.get(name).and_then(|o| o.metadata.uid.clone());
            cx.report
                .events
                .record(name, uid.as_deref(), EventReason::CABundleInvalid, &why);
            if cx.state.record_outcome(name, Outcome::Blocked(why.clone())) {
                warn!("{name}: {why}");
            } else {
                debug!("{name}: still held: {why}");
            }
            Err(Ok(()))
        }
    }
}

/// Remembers a write the server refused as invalid, so the same write is not sent again
/// until the manifest or the object changes: warned about and recorded as an Event once per
/// distinct answer, then the name waits (the worker requeues it after the maximum backoff).
fn rejected(
    cx: &SyncContext<'_>,
    name: &str,
    why: &Why,
    verb: &str,
    fingerprint: u64,
    uid: Option<&str>,
    e: &Error,
) -> SyncError {
    let message = e.to_string();
    let previous = cx.state.record_rejection(
        name,
        Rejection {
            fingerprint,
            message: message.clone(),
            at: std::time::Instant::now(),
        },
    );
    if previous.is_none_or(|p| p.message != message) {
        warn!(
            "{name} {} {verb} ({why}): refused by the server, not retried until the manifest or \
             the object changes: {message}",
            why.0
        );
        let note = format!("{verb} refused by the server: {message}");
        cx.report
            .events
            .record(name, uid, EventReason::Rejected, &note);
    } else {
        debug!("{name} {} {verb}: refused again: {message}", why.0);
    }
    cx.state
        .record_outcome(name, Outcome::Rejected(format!("{verb}: {message}")));
    SyncError::Rejected {
        message,
        retry_in: REJECTED_RETRY,
    }
}

/// What a write would send and to which version of the object, hashed: the same
/// fingerprint means the same write to the same object. `None` for no write.
fn write_fingerprint(action: &Action, prior: &apply::Prior) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let verb = match action {
        Action::Create(_) => "create",
        Action::Update(_) => "update",
        Action::Adopt(_) => "adopt",
        _ => return None,
    };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    verb.hash(&mut h);
    prior.written?.hash(&mut h);
    prior.cached_rv.hash(&mut h);
    Some(h.finish())
}

/// Logs a "left alone" decision: once at INFO where a user would wonder why nothing
/// happened (an onstart object deleted or created after start), else at debug.
fn left_alone(
    report: &Reporters,
    name: &str,
    decision: &Decision,
    why: &Why,
    manifest_differs: impl Fn() -> bool,
) {
    let cell = decision.cell;
    let surprising = match (cell.row(), cell.column()) {
        // 5x/6B by the once rule, with a manifest that no longer matches the object: the
        // user edited an onstart manifest and expects it applied.
        (5 | 6, _) if is_once_rule(decision.reason) && manifest_differs() => Some(
            "its manifest changed after this process synced it, and an onstart APIService is \
             written only once per process (upstream's rule): the change is applied at the next \
             start; label it \"true\" to sync it continuously",
        ),
        // 2B after the first sync: upstream never recreates an onstart object.
        (2, 'B') => {
            Some("an onstart object deleted after its first sync is not recreated until restart")
        }
        // 4x by its own rule: an onstart-labelled object someone created after start is never
        // touched. (One we created ourselves lands in 4B too, by the "already synced" rule:
        // nothing to wonder about there.)
        (4, _) if decision.reason == ONSTART_CREATED_AFTER_START => {
            Some("an onstart object created after start is never written by this process")
        }
        _ => None,
    };
    match surprising {
        Some(explain) if report.first_notice(name, cell) => {
            info!(name, cell:% = cell, action = "none"; "{name} {cell} left alone ({why}): {explain}")
        }
        _ => debug!(name, cell:% = cell, action = "none"; "{name} {cell}: nothing to do ({why})"),
    }
}

/// A desired name held by someone else's object that already has the desired spec: the
/// case `autoregister_unowned_desired_apiservices` counts. Nothing is written, but a later
/// manifest change would not reach it, so it is said once at WARN and as a `NotOwned`
/// Warning Event (repeats are dropped by the recorder's dedup window).
fn unowned_but_matching(cx: &SyncContext<'_>, name: &str, cell: Cell, uid: Option<&str>) {
    let Some(obj) = cx.store.get(name) else {
        return;
    };
    let owner = cx.ownership.owner(&obj);
    let remedy = if owner.adoptable() {
        "--adopt would take it over in place"
    } else {
        "it is never adopted"
    };
    let note = format!(
        "held by {owner}; its spec already matches, so nothing is written, but it is not \
         managed: a change to the manifest will not reach it ({remedy})"
    );
    cx.report
        .events
        .record(name, uid, EventReason::NotOwned, &note);
    if cx.report.first_notice(name, cell) {
        warn!(name, cell:% = cell, action = "none"; "{name} {cell}: not managed: {note}");
    }
}

/// Whether `reason` is the decision's "onstart, already synced" rule.
fn is_once_rule(reason: &str) -> bool {
    matches!(reason, ONSTART_ENTRY_SYNCED | ONSTART_OBJECT_SYNCED)
}

/// Why a decision was taken: the cell's meaning and what the rule adds to it, formatted
/// only when logged (most syncs are the no-op answer to a watch event and log nothing).
/// A rule's part that only repeats the meaning is left out: `2B` reads `absent, desired
/// onstart`, not `absent, desired onstart; desired, absent`.
struct Why(Cell, &'static str);

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let meaning = self.0.meaning();
        let new: Vec<&str> = self
            .1
            .split(", ")
            .filter(|part| !meaning.contains(part))
            .collect();
        if new.is_empty() {
            f.write_str(&meaning)
        } else {
            write!(f, "{meaning}; {}", new.join(", "))
        }
    }
}

fn write<T>(r: Result<T, Error>) -> Result<T, SyncError> {
    r.map_err(SyncError::Write)
}

/// A create or delete of a name we had already synced: someone undid our work (deleted
/// it, or brought back one we removed). Counted, and reported when it amounts to a fight.
fn notice_contested(cx: &SyncContext<'_>, name: &str, verb: &str) {
    let contested = cx.fights.contested_write(name, Instant::now());
    let Some(fight) = contested.fight else {
        return;
    };
    let ours = cx.api.field_manager().unwrap_or_default();
    let writer = cx
        .store
        .get(name)
        .and_then(|o| o.metadata.field_managers().into_iter().find(|m| m != ours))
        .unwrap_or_else(|| "an unknown writer".to_string());
    warn!(
        "{name}: {} writes within {}s undoing another writer's changes (last: {verb}; \
         other writer: {writer}); is another controller managing it, e.g. a second \
         instance with the same --label-key? Run one instance (or one leader-elected group) per label key; {}",
        fight.writes,
        FIGHT_WINDOW.as_secs(),
        apply::fight_pace_note(contested.pace, cx.fights.max_pace())
    );
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    #[test]
    fn why_says_each_thing_once() {
        let why = |cell: &str, rule: &'static str| {
            let cell: Cell = cell.parse().unwrap();
            Why(cell, rule).to_string()
        };
        assert_eq!(why("2B", "desired, absent"), "absent, desired onstart");
        assert_eq!(why("3A", "not ours"), "not ours, not desired");
        assert_eq!(
            why("6C", "spec differs"),
            "managed always, desired always; spec differs"
        );
        assert_eq!(
            why("3C", "not ours, spec already as desired"),
            "not ours, desired always; spec already as desired"
        );
    }

    use super::*;
    use crate::api::{ObjectMeta, AUTO_MANAGED_ALWAYS};
    use crate::client::{Client, Config};

    #[test]
    fn a_decision_error_is_not_blamed_on_the_client_configuration() {
        let ownership = Ownership {
            allow_empty: true,
            ..Ownership::default()
        };
        // Ours and not desired, so deleted, but without the UID a delete must carry.
        let mut meta = ObjectMeta::named("v1.x.example.com");
        meta.labels = Some(
            [(ownership.label_key.clone(), AUTO_MANAGED_ALWAYS.to_string())]
                .into_iter()
                .collect(),
        );
        let store = Store::new();
        store.insert(Arc::new(APIService {
            metadata: meta,
            ..Default::default()
        }));
        store.mark_synced();
        let state = State::default();
        state.record_at_start(["v1.x.example.com".to_string()].into_iter().collect());
        // Nothing is sent: nothing listens here.
        let api = Api::all(Client::new(Config::new("http://127.0.0.1:9")).unwrap());
        let cx = SyncContext {
            state: &state,
            store: &store,
            ownership: &ownership,
            api: &api,
            fights: &FightDetector::default(),
            may_write: &|| Ok(()),
            ca: &CaSources::new(
                api.client().clone(),
                Arc::new(crate::runtime::workqueue::RateLimitingQueue::with_defaults(
                    "t",
                )),
                crate::controller::ca::DEFAULT_EXPIRY_WARNING,
            ),
            report: &Reporters::new(
                Arc::new(crate::controller::metrics::ControllerMetrics::new()),
                crate::controller::events::EventRecorder::disabled(),
            ),
            availability: &Availability::new(
                api.client().clone(),
                Default::default(),
                Arc::new(crate::runtime::workqueue::RateLimitingQueue::with_defaults(
                    "t",
                )),
                crate::controller::events::EventRecorder::disabled(),
                None,
            ),
        };
        let e = sync(&cx, "v1.x.example.com").unwrap_err();
        assert!(matches!(e, SyncError::Decision(_)), "{e:?}");
        assert!(e.to_string().contains("no name or uid"), "{e}");
        assert_eq!(e.retry_after(), None);
    }
}
