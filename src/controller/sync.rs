//! One sync of one name: gather the facts, decide, execute, record the outcome.

use std::fmt;
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use super::decision::{decide, Action, Current, Decision, Facts, Ownership};
use super::fights::{FightDetector, FIGHT_WINDOW};
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
}

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
    name: &str,
) -> Decision {
    let desired = state.desired(name);
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
        },
    )
}

/// Syncs `name` once; `Ok` means the name needs no retry.
///
/// A write answered NotFound, Conflict or AlreadyExists is retried with backoff and
/// does not count as synced: nothing was written, and `--once` must not report success.
/// `cx.may_write` is asked right before a write is sent; when it refuses, nothing is sent
/// and the sync ends as a cancelled write.
pub(crate) fn sync(cx: &SyncContext<'_>, name: &str) -> Result<(), SyncError> {
    let decision = plan(cx.state, cx.store, cx.ownership, name);
    let cell = decision.cell;
    if !matches!(
        decision.action,
        Action::None | Action::Blocked(_) | Action::Error(_)
    ) {
        if let Err(why) = (cx.may_write)() {
            debug!("{name} {cell}: write withheld: {why}");
            cx.state
                .record_outcome(name, Outcome::Failed(format!("not written: {why}")));
            return Err(SyncError::Write(Error::Cancelled));
        }
    }
    let (verb, result) = match decision.action {
        Action::None => {
            debug!("{name} {cell}: nothing to do ({})", decision.reason);
            cx.state.record_outcome(name, Outcome::Synced);
            return Ok(());
        }
        Action::Blocked(why) => {
            if cx.state.record_outcome(name, Outcome::Blocked(why.clone())) {
                warn!("{name} {cell}: not written: {why}");
            } else {
                debug!("{name} {cell}: still not written: {why}");
            }
            return Ok(());
        }
        Action::Error(message) => ("error", Err(SyncError::Decision(message))),
        Action::Create(obj) => ("create", write(cx.api.create(&obj).map(drop))),
        Action::Update(obj) => ("update", write(cx.api.update(&obj).map(drop))),
        Action::Adopt(obj) => ("adopt", write(cx.api.update(&obj).map(drop))),
        Action::Delete { name: n, uid } => {
            let p = DeleteParams {
                uid: Some(uid),
                resource_version: None,
            };
            ("delete", write(cx.api.delete(&n, &p)))
        }
    };
    match &result {
        Ok(()) => {
            info!("{name} {cell} {verb}: ok ({})", decision.reason);
            if cx.state.synced_once(name) {
                notice_contested(cx, name, verb);
            }
        }
        // Shutdown cut the request short: not a failure worth a warning.
        Err(e) if e.is_cancelled() => debug!("{name} {cell} {verb}: cancelled"),
        Err(e) if e.is_benign() => {
            info!("{name} {cell} {verb}: {e}; retrying once the cache catches up")
        }
        Err(e) => warn!("{name} {cell} {verb}: failed: {e}"),
    }
    let outcome = match &result {
        Ok(()) => Outcome::Synced,
        Err(e) => Outcome::Failed(format!("{verb}: {e}")),
    };
    cx.state.record_outcome(name, outcome);
    result
}

fn write(r: Result<(), Error>) -> Result<(), SyncError> {
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
        };
        let e = sync(&cx, "v1.x.example.com").unwrap_err();
        assert!(matches!(e, SyncError::Decision(_)), "{e:?}");
        assert!(e.to_string().contains("no name or uid"), "{e}");
        assert_eq!(e.retry_after(), None);
    }
}
