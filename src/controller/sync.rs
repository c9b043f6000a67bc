//! One sync of one name: gather the facts, decide, execute, record the outcome.

use log::{debug, info, warn};

use super::decision::{decide, Action, Cell, Current, Decision};
use super::events::EventReason;
use super::metrics::SyncResult;
use super::report::Reporters;
use super::state::State;
use crate::api::APIService;
use crate::client::{Api, DeleteParams, Error};
use crate::runtime::store::Store;

/// Decides for `name` from the current facts, without acting.
pub(crate) fn plan(state: &State, store: &Store<APIService>, name: &str) -> Decision {
    let desired = state.desired(name);
    let cached = store.get(name);
    let current = match cached.as_deref() {
        Some(obj) => Current::Present(obj),
        None => Current::NotFound,
    };
    decide(
        desired.as_ref(),
        current,
        state.synced_once(name),
        state.present_at_start(name),
    )
}

/// Syncs `name` once; `Ok` means the name needs no retry.
pub(crate) fn sync(
    state: &State,
    store: &Store<APIService>,
    api: &Api<APIService>,
    report: &Reporters,
    name: &str,
) -> Result<(), Error> {
    let decision = plan(state, store, name);
    let cell = decision.cell;
    let why = format!("{}; {}", cell.meaning(), decision.reason);
    let (verb, reason, outcome) = match decision.action {
        Action::None => {
            left_alone(report, name, cell, &why);
            report.metrics.observe_sync(cell, SyncResult::Skipped);
            state.record_outcome(name, Ok(()));
            return Ok(());
        }
        Action::Error(message) => ("error", None, Outcome::Failed(Error::Config(message))),
        Action::Create(obj) => (
            "create",
            Some(EventReason::Registered),
            outcome(
                api.create(&obj).map(|o| o.metadata.uid),
                Error::is_already_exists,
            ),
        ),
        Action::Update(obj) => {
            let uid = obj.metadata.uid.clone();
            (
                "update",
                Some(EventReason::Updated),
                outcome(api.update(&obj).map(|_| uid), |e| {
                    e.is_not_found() || e.is_conflict()
                }),
            )
        }
        Action::Delete { name: n, uid } => {
            let p = DeleteParams {
                uid: Some(uid.clone()),
                resource_version: None,
            };
            (
                "delete",
                Some(EventReason::Deregistered),
                outcome(api.delete(&n, &p).map(|()| Some(uid)), |e| {
                    e.is_not_found() || e.is_conflict()
                }),
            )
        }
    };
    let result = match outcome {
        Outcome::Written { uid } => {
            info!("{name} {cell} {verb} ({why}): ok");
            if let Some(reason) = reason {
                let note = format!("{verb} by autoregister: {why} (cell {cell})");
                report.events.record(name, uid.as_deref(), reason, &note);
            }
            Ok(())
        }
        Outcome::Benign(e) => {
            debug!("{name} {cell} {verb}: benign answer, a later event will requeue: {e}");
            Ok(())
        }
        Outcome::Failed(e) => {
            warn!("{name} {cell} {verb} ({why}): failed: {e}");
            Err(e)
        }
    };
    let counted = if result.is_ok() {
        SyncResult::Ok
    } else {
        SyncResult::Error
    };
    report.metrics.observe_sync(cell, counted);
    state.record_outcome(
        name,
        result
            .as_ref()
            .map(drop)
            .map_err(|e| format!("{verb}: {e}")),
    );
    result
}

/// Logs a "left alone" decision: once at INFO where a user would wonder why nothing
/// happened (an onstart object deleted or created after start), else at debug.
fn left_alone(report: &Reporters, name: &str, cell: Cell, why: &str) {
    let surprising = match (cell.row(), cell.column()) {
        // 2B after the first sync: upstream never recreates an onstart object.
        (2, 'B') => {
            Some("an onstart object deleted after its first sync is not recreated until restart")
        }
        // 4x: an onstart-labelled object that appeared after start is never touched.
        (4, _) => Some("an onstart object created after start is never written by this process"),
        _ => None,
    };
    match surprising {
        Some(explain) if report.first_notice(name, cell) => {
            info!("{name} {cell} left alone ({why}): {explain}")
        }
        _ => debug!("{name} {cell}: nothing to do ({why})"),
    }
}

/// What became of a write.
enum Outcome {
    /// Done; the object's UID when known.
    Written { uid: Option<String> },
    /// NotFound/Conflict/AlreadyExists: not an error, a later event brings the name back.
    Benign(Error),
    /// Retry with backoff.
    Failed(Error),
}

/// A write answered NotFound/Conflict/AlreadyExists is not an error: a later event brings the name back.
fn outcome(result: Result<Option<String>, Error>, benign: impl Fn(&Error) -> bool) -> Outcome {
    match result {
        Ok(uid) => Outcome::Written { uid },
        Err(e) if benign(&e) => Outcome::Benign(e),
        Err(e) => Outcome::Failed(e),
    }
}
