//! One sync of one name: gather the facts, decide, execute, record the outcome.

use std::fmt;
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use super::availability::Availability;
use super::decision::{
    decide, Action, Cell, Current, Decision, Facts, Ownership, ONSTART_CREATED_AFTER_START,
    WITHDRAW_UNAVAILABLE,
};
use super::events::EventReason;
use super::fights::{FightDetector, FIGHT_WINDOW};
use super::metrics::SyncResult;
use super::report::Reporters;
use super::state::{Outcome, State};
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
}

/// The soonest retry of a write answered NotFound, Conflict or AlreadyExists. The change
/// behind such an answer (someone else's create, edit or delete) reaches the cache by the
/// watch, whose event requeues the name at once; retrying sooner only repeats the answer, in
/// a loop for as long as a watch is down (chaos seeds 258, 1217, 1289, 3415). The retry
/// itself covers an answer no change follows.
pub(crate) const STALE_CACHE_RETRY: Duration = Duration::from_secs(1);

/// Why one sync of one name failed.
#[derive(Debug, Clone)]
pub(crate) enum SyncError {
    /// The decision itself is an error (the table's lookup-error row; a cached object
    /// without name or UID): nothing was sent, the server is not to blame.
    Decision(String),
    /// The write was refused or got no answer.
    Write(Error),
}

impl SyncError {
    /// The server's `Retry-After`, when it gave one.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            SyncError::Decision(_) => None,
            SyncError::Write(e) => e.retry_after(),
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
            SyncError::Decision(_) => false,
            SyncError::Write(e) => e.is_not_found() || e.is_conflict() || e.is_already_exists(),
        }
    }
}

impl fmt::Display for SyncError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncError::Decision(m) => write!(f, "cannot decide: {m}"),
            SyncError::Write(e) => e.fmt(f),
        }
    }
}

/// Decides for `name` from the current facts, without acting.
pub(crate) fn plan(
    state: &State,
    store: &Store<APIService>,
    ownership: &Ownership,
    availability: &Availability,
    name: &str,
) -> Decision {
    let desired = state.desired(name);
    let withdrawal = availability.withdrawal(name, desired.as_ref());
    let cached = store.get(name);
    let current = match cached.as_deref() {
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
pub(crate) fn sync(cx: &SyncContext<'_>, name: &str) -> Result<(), SyncError> {
    let decision = plan(cx.state, cx.store, cx.ownership, cx.availability, name);
    let withdrawing = decision.reason == WITHDRAW_UNAVAILABLE;
    // A create of a withdrawn name restores it: that Event says why.
    let restoring = cx.availability.is_withdrawn(name);
    let cell = decision.cell;
    let why = Why(cell, decision.reason);
    let uid = cx
        .store
        .get(name)
        .and_then(|o| o.metadata.uid.as_deref().map(str::to_string));
    if !matches!(
        decision.action,
        Action::None | Action::Blocked(_) | Action::Error(_)
    ) {
        if let Err(held) = (cx.may_write)() {
            debug!("{name} {cell}: write withheld: {held}");
            cx.state
                .record_outcome(name, Outcome::Failed(format!("not written: {held}")));
            return Err(SyncError::Write(Error::Cancelled));
        }
    }
    let (verb, reason, result) = match decision.action {
        Action::None => {
            left_alone(cx.report, name, &decision, &why);
            cx.report.metrics.observe_sync(cell, SyncResult::Skipped);
            cx.state.record_outcome(name, Outcome::Synced);
            return Ok(());
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
                warn!("{name} {cell}: not written ({}): {blocked}", cell.meaning());
            } else {
                debug!("{name} {cell}: still not written: {blocked}");
            }
            return Ok(());
        }
        Action::Error(message) => ("error", None, Err(SyncError::Decision(message))),
        Action::Create(obj) => (
            "create",
            (!restoring).then_some(EventReason::Registered),
            write(cx.api.create_uid(&obj)),
        ),
        Action::Update(obj) => (
            "update",
            Some(EventReason::Updated),
            write(cx.api.update_unread(&obj).map(|()| uid.clone())),
        ),
        Action::Adopt(obj) => (
            "adopt",
            Some(EventReason::Adopted),
            write(cx.api.update_unread(&obj).map(|()| uid.clone())),
        ),
        Action::Delete { name: n, uid } => {
            let p = DeleteParams {
                uid: Some(uid.clone()),
                resource_version: None,
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
            info!("{name} {cell} {verb} ({why}): ok");
            if let Some(reason) = reason {
                let note = format!("{verb} by autoregister: {why} (cell {cell})");
                cx.report
                    .events
                    .record(name, written_uid.as_deref(), reason, &note);
            }
            // Our own withdrawal and restore undo nobody's work.
            let ours = if withdrawing {
                cx.availability.withdrawn(name, written_uid.as_deref());
                true
            } else {
                verb == "create" && cx.availability.created(name, written_uid.as_deref())
            };
            if cx.state.synced_once(name) && !ours {
                notice_contested(cx, name, verb);
            }
        }
        // Shutdown cut the request short: not a failure worth a warning.
        Err(e) if e.is_cancelled() => debug!("{name} {cell} {verb}: cancelled"),
        Err(e) if e.is_benign() => {
            info!("{name} {cell} {verb}: {e}; deciding again when the cache catches up")
        }
        Err(e) => warn!("{name} {cell} {verb} ({why}): failed: {e}"),
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
    result.map(drop)
}

/// Logs a "left alone" decision: once at INFO where a user would wonder why nothing
/// happened (an onstart object deleted or created after start), else at debug.
fn left_alone(report: &Reporters, name: &str, decision: &Decision, why: &Why) {
    let cell = decision.cell;
    let surprising = match (cell.row(), cell.column()) {
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
            info!("{name} {cell} left alone ({why}): {explain}")
        }
        _ => debug!("{name} {cell}: nothing to do ({why})"),
    }
}

/// Why a decision was taken: the cell's meaning and the rule, formatted only when logged
/// (most syncs are the no-op answer to a watch event and log nothing).
struct Why(Cell, &'static str);

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.0.meaning(), self.1)
    }
}

fn write<T>(r: Result<T, Error>) -> Result<T, SyncError> {
    r.map_err(SyncError::Write)
}

/// A write to a name we had already synced: someone undid our work. Counted, and
/// reported when it amounts to a fight.
fn notice_contested(cx: &SyncContext<'_>, name: &str, verb: &str) {
    let Some(fight) = cx.fights.contested_write(name, Instant::now()) else {
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
         instance with the same --label-key? Run one instance (or one leader-elected group) per label key",
        fight.writes,
        FIGHT_WINDOW.as_secs()
    );
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

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
