//! One sync of one name: gather the facts, decide, execute, record the outcome.

use log::{debug, info, warn};

use super::decision::{decide, Action, Current, Decision};
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

/// Syncs `name` once; `Ok` means the name needs no retry. `may_write` is asked right before
/// a write is sent; when it refuses, nothing is sent and the sync ends as
/// [`Error::Cancelled`].
pub(crate) fn sync(
    state: &State,
    store: &Store<APIService>,
    api: &Api<APIService>,
    name: &str,
    may_write: &dyn Fn() -> Result<(), String>,
) -> Result<(), Error> {
    let decision = plan(state, store, name);
    let cell = decision.cell;
    if !matches!(decision.action, Action::None | Action::Error(_)) {
        if let Err(why) = may_write() {
            debug!("{name} {cell}: write withheld: {why}");
            state.record_outcome(name, Err(format!("not written: {why}")));
            return Err(Error::Cancelled);
        }
    }
    let (verb, result) = match decision.action {
        Action::None => {
            debug!("{name} {cell}: nothing to do ({})", decision.reason);
            state.record_outcome(name, Ok(()));
            return Ok(());
        }
        Action::Error(message) => ("error", Err(Error::Config(message))),
        Action::Create(obj) => (
            "create",
            ignore(api.create(&obj).map(drop), Error::is_already_exists),
        ),
        Action::Update(obj) => (
            "update",
            ignore(api.update(&obj).map(drop), |e| {
                e.is_not_found() || e.is_conflict()
            }),
        ),
        Action::Delete { name: n, uid } => {
            let p = DeleteParams {
                uid: Some(uid),
                resource_version: None,
            };
            (
                "delete",
                ignore(api.delete(&n, &p), |e| e.is_not_found() || e.is_conflict()),
            )
        }
    };
    match &result {
        Ok(()) => info!("{name} {cell} {verb}: ok ({})", decision.reason),
        // Shutdown cut the request short: not a failure worth a warning.
        Err(e) if e.is_cancelled() => debug!("{name} {cell} {verb}: cancelled"),
        Err(e) => warn!("{name} {cell} {verb}: failed: {e}"),
    }
    state.record_outcome(
        name,
        result
            .as_ref()
            .map(drop)
            .map_err(|e| format!("{verb}: {e}")),
    );
    result
}

/// A write answered NotFound/Conflict/AlreadyExists is not an error: a later event brings the name back.
fn ignore(result: Result<(), Error>, benign: impl Fn(&Error) -> bool) -> Result<(), Error> {
    match result {
        Err(e) if benign(&e) => {
            debug!("benign answer, a later event will requeue: {e}");
            Ok(())
        }
        other => other,
    }
}
