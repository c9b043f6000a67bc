//! What the controller remembers between syncs: desired set, synced-once names, names present at start.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};

use super::decision::Desired;
use crate::hash::{Map, Set};
use crate::runtime::clock::deadline_after;

/// Delete events remembered between relists for [`State::note_deleted`].
const MAX_DELETED_UIDS: usize = 4096;

/// How one sync of a name ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Done: the name counts as synced once.
    Synced,
    /// Failed; it is retried with backoff.
    Failed(String),
    /// A guard holds it (not ours, empty set): not retried until something changes.
    Blocked(String),
    /// The server refused the spec as invalid (422): not sent again until the manifest or
    /// the object changes (or the maximum backoff has passed).
    Rejected(String),
}

/// A write the server refused as invalid, remembered so the same write is not sent again.
#[derive(Clone, Debug)]
pub(crate) struct Rejection {
    /// What was sent and to which version of the object (see `sync::write_fingerprint`).
    pub(crate) fingerprint: u64,
    /// The server's answer.
    pub(crate) message: String,
    /// When it answered.
    pub(crate) at: std::time::Instant,
}

/// Our last successful apply to a name.
#[derive(Clone, Debug)]
pub(crate) struct LastApply {
    /// What was applied (see `sync::config_fingerprint`).
    pub(crate) fingerprint: u64,
    /// The resourceVersions before our apply: the one it was decided on, and the one our
    /// takeover of managedFields wrote just before it. While the cache shows one of them,
    /// our apply has not reached the cache.
    pub(crate) based_on: Vec<Option<Box<str>>>,
    /// When it was answered.
    pub(crate) at: std::time::Instant,
}

/// The controller's bookkeeping, shared by registration calls and workers.
#[derive(Default)]
pub(crate) struct State {
    /// name → desired object and mode.
    desired: RwLock<Map<Arc<str>, Desired>>,
    /// Names this process has synced successfully at least once; a desired name shares
    /// its key's allocation (thousands of names, each otherwise copied once more).
    synced_once: Mutex<Set<Arc<str>>>,
    /// Names removed from the desired set whose removal has not synced since: a waiter
    /// waits for their deletion (or for the object to stop being ours) too.
    removed: Mutex<Set<Arc<str>>>,
    /// Names this process created whose object the cache has not shown yet, with the
    /// created UID: until it does, a sync sees nothing there (nothing to delete after a
    /// removal, and a create again would only be answered 409).
    unseen_creates: Mutex<Map<Arc<str>, Option<Box<str>>>>,
    /// The UID of the last delete event per name, since the last relist: a watch may show
    /// our create and its deletion by someone else before the create's answer is read.
    deleted_uids: Mutex<Map<Arc<str>, Box<str>>>,
    /// Names in the cache when it first synced; `None` until then.
    at_start: RwLock<Option<Set<String>>>,
    /// Last failure per name, cleared on success (for `--once` reports).
    failures: Mutex<Map<String, String>>,
    /// Names a guard holds, with why; cleared by any other outcome.
    blocked: Mutex<Map<String, String>>,
    /// The last write the server refused as invalid, per name; cleared on success.
    rejected: Mutex<Map<String, Rejection>>,
    /// Our last successful apply per name: to tell our own apply not yet seen from
    /// someone undoing it.
    applies: Mutex<Map<Arc<str>, LastApply>>,
    /// Notified when an outcome changes what a convergence waiter reads (a name synced for
    /// the first time, a failure, a guard), and on every outcome and observed object while
    /// an observer waits (see [`wait_observing`](Self::wait_observing)).
    progress: Condvar,
    progress_lock: Mutex<()>,
    /// Waiters that read the cached objects themselves (`--wait-available`): they are woken
    /// by every outcome and observed status, not only by changes of the sets above.
    observers: AtomicUsize,
    /// How many times waiters were woken, for tests of who wakes whom.
    #[cfg(test)]
    wakes: AtomicUsize,
}

impl State {
    /// Sets the desired entry for a name; returns the previous one.
    pub(crate) fn set_desired(&self, name: String, d: Desired) -> Option<Desired> {
        self.removed.lock().remove(name.as_str());
        self.desired.write().insert(name.into(), d)
    }

    /// Drops the desired entry for a name; until its next successful sync, convergence
    /// waits for it (a managed object left behind is deleted by that sync).
    pub(crate) fn remove_desired(&self, name: &str) -> Option<Desired> {
        let previous = self.desired.write().remove(name);
        if previous.is_some() {
            self.removed.lock().insert(name.into());
            self.applies.lock().remove(name);
        }
        previous
    }

    /// Notes that a sync decided after `name`'s removal (column A) succeeded: its removal
    /// is done. A sync decided before the removal says nothing about it, and neither does
    /// one while our create of it has not reached the cache: that sync saw nothing to
    /// delete, and the watch event showing it decides the name again.
    pub(crate) fn note_removal_synced(&self, name: &str) {
        if self.unseen_creates.lock().contains_key(name) {
            return;
        }
        if self.removed.lock().remove(name) {
            self.notify();
        }
    }

    /// Notes that a create of `name` is about to be sent: from now until its answer the name
    /// counts as created and not yet seen, so a removal meanwhile waits for it (the object
    /// exists on the server before this process hears so). The answer brings
    /// [`note_created`](Self::note_created), or a failure [`forget_create`](Self::forget_create).
    pub(crate) fn note_creating(&self, name: &str) {
        self.unseen_creates.lock().insert(name.into(), None);
    }

    /// A create of `name` failed: as far as this process knows, nothing was created.
    pub(crate) fn forget_create(&self, name: &str) {
        if self.unseen_creates.lock().remove(name).is_some() {
            self.notify();
        }
    }

    /// Notes a successful create of `name` (object `uid`), not yet shown by the cache
    /// unless a delete event of that very object came first. The caller then checks the
    /// cache itself ([`note_seen`](Self::note_seen) if it shows the object): noted first,
    /// checked after, so an event between the two is not lost.
    pub(crate) fn note_created(&self, name: &str, uid: Option<&str>) {
        self.unseen_creates
            .lock()
            .insert(name.into(), uid.map(Box::from));
        let deleted = uid.is_some_and(|u| {
            self.deleted_uids
                .lock()
                .get(name)
                .is_some_and(|d| **d == *u)
        });
        if deleted {
            self.note_seen(name, uid);
        }
    }

    /// Whether this process created `name` and the cache has not shown it yet.
    pub(crate) fn created_unseen(&self, name: &str) -> bool {
        self.unseen_creates.lock().contains_key(name)
    }

    /// Notes that the cache showed object `uid` named `name` (an add event, or the create's
    /// own check): an unseen create of that object (or of an unknown UID) is seen.
    /// Answers whether it was this process's create.
    pub(crate) fn note_seen(&self, name: &str, uid: Option<&str>) -> bool {
        let seen = {
            let mut unseen = self.unseen_creates.lock();
            let ours = unseen.get(name).map(|created| match (created, uid) {
                (Some(c), Some(u)) => **c == *u,
                _ => true,
            });
            ours == Some(true) && unseen.remove(name).is_some()
        };
        // A convergence waiter reads unseen creates only for removed names (every create
        // is seen once: waking the `--once` waiter for each cost a thread switch per object).
        if seen && (self.removed.lock().contains(name) || self.observed()) {
            self.notify();
        }
        seen
    }

    /// Notes a delete event of object `uid` named `name`: remembered (its create's answer
    /// may still be on its way) and, for an unseen create of it, seen.
    pub(crate) fn note_deleted(&self, name: &str, uid: Option<&str>) {
        if let Some(u) = uid {
            let mut deleted = self.deleted_uids.lock();
            // Bounded: a relist clears it anyway; past this many, forgetting costs at most
            // a create answered 409 or a removal waited for until the next relist.
            if deleted.len() >= MAX_DELETED_UIDS {
                deleted.clear();
            }
            deleted.insert(name.into(), u.into());
        }
        self.note_seen(name, uid);
    }

    /// Forgets every unseen create: a relist made the cache whole, whatever it shows.
    pub(crate) fn note_relisted(&self) {
        self.deleted_uids.lock().clear();
        self.unseen_creates.lock().clear();
        self.notify();
    }

    /// The desired entry for a name.
    pub(crate) fn desired(&self, name: &str) -> Option<Desired> {
        self.desired.read().get(name).cloned()
    }

    /// Whether nothing at all is desired (the empty-set guard's input).
    pub(crate) fn desired_is_empty(&self) -> bool {
        self.desired.read().is_empty()
    }

    /// Every desired name.
    pub(crate) fn desired_names(&self) -> Vec<String> {
        self.desired.read().keys().map(|k| k.to_string()).collect()
    }

    /// Whether `name` has synced successfully in this process.
    pub(crate) fn synced_once(&self, name: &str) -> bool {
        self.synced_once.lock().contains(name)
    }

    /// Whether `name` was in the cache when it first synced.
    pub(crate) fn present_at_start(&self, name: &str) -> bool {
        self.at_start
            .read()
            .as_ref()
            .is_some_and(|s| s.contains(name))
    }

    /// Records the names present when the cache first synced (once).
    pub(crate) fn record_at_start(&self, names: Set<String>) {
        let mut at_start = self.at_start.write();
        if at_start.is_none() {
            *at_start = Some(names);
        }
    }

    /// Whether the names present at start have been recorded (the cache has synced).
    pub(crate) fn has_start(&self) -> bool {
        self.at_start.read().is_some()
    }

    /// Calls `visit` on each name a `--once` run still waits for (desired names and names
    /// present at start that `managed` says we own, not yet synced once), in no order,
    /// until it returns true; returns whether it did. No copies of the sets.
    fn scan_unsynced(
        &self,
        managed: impl Fn(&str) -> bool,
        visit: impl FnMut(&str) -> bool,
    ) -> bool {
        let desired = self.desired.read();
        let at_start = self.at_start.read();
        let synced = self.synced_once.lock();
        let removed = self.removed.lock();
        let unseen = self.unseen_creates.lock();
        let unseen = |n: &str| unseen.contains_key(n);
        let left_over = at_start
            .iter()
            .flatten()
            .filter(|n| !desired.contains_key(n.as_str()) && managed(n))
            .map(String::as_str);
        let unsynced = desired
            .keys()
            .map(|k| &**k)
            .chain(left_over)
            .filter(|n| !synced.contains(*n));
        // A removed name is pending while still ours, whether or not it synced before, or
        // while our create of it has not reached the cache (nothing to delete there yet).
        let removing = removed
            .iter()
            .map(|k| &**k)
            .filter(|n| !desired.contains_key(*n) && (managed(n) || unseen(n)));
        unsynced.chain(removing).any(visit)
    }

    /// Up to `limit` names a `--once` run still waits for, sorted (see `scan_unsynced`).
    pub(crate) fn unsynced(&self, managed: impl Fn(&str) -> bool, limit: usize) -> Vec<String> {
        let mut names = Vec::new();
        self.scan_unsynced(managed, |n| {
            names.push(n.to_string());
            names.len() >= limit
        });
        crate::sort::sort(&mut names);
        // A removed name present at start is visited twice.
        names.dedup();
        names
    }

    /// Whether some name a `--once` run waits for satisfies `pred`. Stops at the first, so
    /// checking after every outcome costs about n·ln n over a whole run, not n².
    pub(crate) fn any_unsynced(
        &self,
        managed: impl Fn(&str) -> bool,
        pred: impl Fn(&str) -> bool,
    ) -> bool {
        self.scan_unsynced(managed, |n| pred(n))
    }

    /// `(converged, total)` over the same names as [`unsynced`](Self::unsynced), counted
    /// without copying names (for `--once`'s progress lines).
    pub(crate) fn progress(&self, managed: impl Fn(&str) -> bool) -> (usize, usize) {
        let desired = self.desired.read();
        let at_start = self.at_start.read();
        let synced = self.synced_once.lock();
        let left_over = at_start
            .iter()
            .flatten()
            .filter(|n| !desired.contains_key(n.as_str()) && managed(n))
            .map(String::as_str);
        let (mut done, mut total) = (0, 0);
        for n in desired.keys().map(|k| &**k).chain(left_over) {
            total += 1;
            if synced.contains(n) {
                done += 1;
            }
        }
        (done, total)
    }

    /// Records a sync outcome and wakes the waiters it concerns; returns whether a name
    /// just became blocked for this reason (so the caller warns once, not per event).
    ///
    /// A repeat of `Synced` (the sync a watch event of our own write brings, nearly always
    /// "nothing to do") changes nothing a convergence waiter reads: it wakes only observers.
    pub(crate) fn record_outcome(&self, name: &str, outcome: Outcome) -> bool {
        let mut newly_blocked = false;
        let changed = match outcome {
            Outcome::Synced => {
                // Most outcomes are repeats (a watch event for our own write): no new String.
                let first = !self.synced_once.lock().contains(name);
                if first {
                    // The desired key when there is one (looked up before taking the set's
                    // lock: the scans take the desired map first).
                    let key = self
                        .desired
                        .read()
                        .get_key_value(name)
                        .map_or_else(|| Arc::from(name), |(k, _)| k.clone());
                    self.synced_once.lock().insert(key);
                }
                let failed = self.failures.lock().remove(name).is_some();
                let blocked = self.blocked.lock().remove(name).is_some();
                let rejected = self.rejected.lock().remove(name).is_some();
                (first && self.may_be_converged()) || failed || blocked || rejected
            }
            Outcome::Rejected(why) => {
                // Waiting does not help either: `--once` stops waiting for it, as for a guard.
                self.blocked.lock().insert(name.to_string(), why.clone());
                self.failures.lock().insert(name.to_string(), why);
                true
            }
            Outcome::Failed(e) => {
                self.failures.lock().insert(name.to_string(), e);
                self.blocked.lock().remove(name);
                true
            }
            Outcome::Blocked(why) => {
                let previous = self.blocked.lock().insert(name.to_string(), why.clone());
                newly_blocked = previous.as_deref() != Some(why.as_str());
                self.failures.lock().insert(name.to_string(), why);
                true
            }
        };
        if changed || self.observed() {
            self.notify();
        }
        newly_blocked
    }

    /// Whether a convergence waiter could find its wait over: only once every desired name
    /// has synced or is held by a guard, so there are at least as many synced and held names
    /// as desired ones. Until then a first sync, though it changes what the waiter reads,
    /// cannot end its wait and does not wake it (1,000 creates would wake it 1,000 times).
    /// Each worker counts after its own insert, so the last name's sync sees the full count.
    fn may_be_converged(&self) -> bool {
        let desired = self.desired.read().len();
        let synced = self.synced_once.lock().len();
        let blocked = self.blocked.lock().len();
        synced + blocked >= desired
    }

    /// Whether `name` has synced and nothing has failed, been held or refused since: a sync
    /// deciding "nothing to do" would record nothing new.
    pub(crate) fn settled(&self, name: &str) -> bool {
        self.synced_once(name)
            && !self.failures.lock().contains_key(name)
            && !self.blocked.lock().contains_key(name)
            && !self.rejected.lock().contains_key(name)
    }

    /// Whether a guard holds `name` (its last outcome was [`Outcome::Blocked`]).
    pub(crate) fn is_blocked(&self, name: &str) -> bool {
        self.blocked.lock().contains_key(name)
    }

    /// The last write the server refused for `name`, if it has not succeeded since.
    pub(crate) fn rejection(&self, name: &str) -> Option<Rejection> {
        self.rejected.lock().get(name).cloned()
    }

    /// Our last successful apply to `name`.
    pub(crate) fn last_apply(&self, name: &str) -> Option<LastApply> {
        self.applies.lock().get(name).cloned()
    }

    /// Remembers a successful apply to `name`.
    pub(crate) fn note_applied(&self, name: &str, a: LastApply) {
        self.applies.lock().insert(name.into(), a);
    }

    /// Remembers that the server refused a write for `name`; returns the previous refusal.
    pub(crate) fn record_rejection(&self, name: &str, r: Rejection) -> Option<Rejection> {
        self.rejected.lock().insert(name.to_string(), r)
    }

    /// The last failure recorded for a name.
    pub(crate) fn failure(&self, name: &str) -> Option<String> {
        self.failures.lock().get(name).cloned()
    }

    /// Blocks until `done()` holds or `deadline` passes; re-checked after every outcome
    /// that changes what it reads (names synced, failed, blocked, removed; the cache's sync;
    /// shutdown) and every 100 ms.
    pub(crate) fn wait_until(
        &self,
        deadline: std::time::Instant,
        mut done: impl FnMut() -> bool,
    ) -> bool {
        let mut guard = self.progress_lock.lock();
        loop {
            if done() {
                return true;
            }
            // Also wakes on a timer: cache sync is not a sync outcome.
            let step = deadline_after(
                std::time::Instant::now(),
                std::time::Duration::from_millis(100),
            );
            if self
                .progress
                .wait_until(&mut guard, step.min(deadline))
                .timed_out()
                && std::time::Instant::now() >= deadline
            {
                return done();
            }
        }
    }

    /// [`wait_until`](Self::wait_until) for a `done` that reads the cached objects: it is
    /// re-checked after every sync outcome and every status change the watch shows too.
    pub(crate) fn wait_observing(
        &self,
        deadline: std::time::Instant,
        done: impl FnMut() -> bool,
    ) -> bool {
        struct Observing<'a>(&'a AtomicUsize);
        impl Drop for Observing<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.observers.fetch_add(1, Ordering::SeqCst);
        let _observing = Observing(&self.observers);
        self.wait_until(deadline, done)
    }

    /// Whether an observer waits (see [`wait_observing`](Self::wait_observing)).
    fn observed(&self) -> bool {
        self.observers.load(Ordering::SeqCst) > 0
    }

    /// Wakes every waiter (at shutdown, when the cache syncs).
    pub(crate) fn wake_all(&self) {
        self.notify();
    }

    /// Wakes observers, if any wait: a status change that needs no sync was seen.
    pub(crate) fn status_observed(&self) {
        if self.observed() {
            self.notify();
        }
    }

    fn notify(&self) {
        #[cfg(test)]
        self.wakes.fetch_add(1, Ordering::SeqCst);
        let _guard = self.progress_lock.lock();
        self.progress.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{APIService, APIServiceSpec};
    use crate::controller::decision::SyncMode;

    fn desired(name: &str) -> Desired {
        Desired::new(
            &APIService::new(name, APIServiceSpec::default()),
            SyncMode::Always,
        )
    }

    #[test]
    fn unsynced_counts_desired_and_managed_names_present_at_start_once_each() {
        let s = State::default();
        s.set_desired("b".into(), desired("b"));
        s.set_desired("a".into(), desired("a"));
        // Before the cache synced only desired names are known.
        assert_eq!(s.unsynced(|_| true, usize::MAX), ["a", "b"]);
        s.record_at_start(["a", "m", "u"].iter().map(|n| n.to_string()).collect());
        let managed = |n: &str| n != "u";
        assert_eq!(
            s.unsynced(managed, usize::MAX),
            ["a", "b", "m"],
            "a once; unmanaged u left out"
        );
        assert_eq!(s.unsynced(managed, 1).len(), 1);
        assert_eq!(s.progress(managed), (0, 3));
        s.record_outcome("a", Outcome::Synced);
        s.record_outcome("m", Outcome::Failed("boom".into()));
        assert_eq!(s.unsynced(managed, usize::MAX), ["b", "m"]);
        assert_eq!(s.progress(managed), (1, 3));
        assert_eq!(s.failure("m").as_deref(), Some("boom"));
        assert!(s.record_outcome("b", Outcome::Blocked("not ours".into())));
        assert!(
            !s.record_outcome("b", Outcome::Blocked("not ours".into())),
            "once per reason"
        );
        assert!(s.is_blocked("b"));
        assert_eq!(
            s.unsynced(managed, usize::MAX),
            ["b", "m"],
            "blocked is not synced"
        );
        assert!(s.any_unsynced(managed, |n| n == "m"));
        assert!(!s.any_unsynced(managed, |n| n == "a"), "a is synced");
        assert!(!s.any_unsynced(managed, |n| n == "u"), "u is not managed");
        s.record_outcome("b", Outcome::Synced);
        assert!(!s.is_blocked("b"));
        s.record_outcome("m", Outcome::Synced);
        assert!(s.unsynced(managed, 1).is_empty());
        assert!(!s.any_unsynced(managed, |_| true));
        assert_eq!(s.failure("m"), None, "success clears the last failure");
    }

    #[test]
    fn a_removed_name_waits_for_its_deletion_and_for_the_cache_to_show_our_create() {
        let s = State::default();
        s.record_at_start(Set::default());
        s.set_desired("a".into(), desired("a"));
        s.record_outcome("a", Outcome::Synced);
        s.note_created("a", Some("u1"));
        s.remove_desired("a");
        assert_eq!(
            s.unsynced(|_| false, 10),
            ["a"],
            "our create is not in the cache yet: nothing there to delete"
        );
        s.note_seen("a", Some("u0"));
        assert_eq!(
            s.unsynced(|_| false, 10),
            ["a"],
            "another object of that name is not our create"
        );
        s.note_seen("a", Some("u1"));
        assert_eq!(s.unsynced(|_| true, 10), ["a"], "still ours in the cache");
        s.record_outcome("a", Outcome::Synced);
        assert_eq!(
            s.unsynced(|_| true, 10),
            ["a"],
            "a sync decided before the removal does not end it"
        );
        s.note_removal_synced("a");
        assert!(
            s.unsynced(|_| true, 10).is_empty(),
            "a sync decided after it does (row 4: an onstart object stays, as upstream)"
        );
        s.remove_desired("a");
        s.set_desired("a".into(), desired("a"));
        s.remove_desired("a");
        assert!(s.unsynced(|_| false, 10).is_empty(), "gone from the cache");
        s.note_created("a", None);
        s.note_relisted();
        assert!(
            s.unsynced(|_| false, 10).is_empty(),
            "a relist shows the whole truth"
        );
        s.set_desired("a".into(), desired("a"));
        assert!(
            s.unsynced(|_| true, 10).is_empty(),
            "desired again and synced before: nothing pending"
        );
    }

    #[test]
    fn a_create_whose_add_and_delete_events_came_before_its_answer_is_not_unseen() {
        let s = State::default();
        // The watch showed our object and someone else's delete of it first.
        s.note_deleted("a", Some("u1"));
        s.note_created("a", Some("u1"));
        assert!(!s.created_unseen("a"), "its delete event was already seen");
        // An older object's delete says nothing about a new create.
        s.note_deleted("b", Some("old"));
        s.note_created("b", Some("new"));
        assert!(s.created_unseen("b"));
        s.note_deleted("b", Some("new"));
        assert!(!s.created_unseen("b"));
    }

    #[test]
    fn a_repeated_outcome_or_a_seen_create_wakes_only_observers() {
        let s = State::default();
        let wakes = || s.wakes.load(Ordering::SeqCst);
        s.record_at_start(Set::default());
        s.set_desired("a".into(), desired("a"));
        let w = wakes();
        s.record_outcome("a", Outcome::Synced);
        assert_eq!(wakes(), w + 1, "a name synced for the first time wakes");
        s.record_outcome("a", Outcome::Synced);
        s.note_created("a", Some("u1"));
        s.note_seen("a", Some("u1"));
        s.status_observed();
        assert_eq!(
            wakes(),
            w + 1,
            "a repeat, a create seen and a status change concern no convergence waiter"
        );
        s.record_outcome("a", Outcome::Failed("boom".into()));
        s.record_outcome("a", Outcome::Synced);
        assert_eq!(
            wakes(),
            w + 3,
            "a failure and the success that clears it wake"
        );
        s.record_outcome("a", Outcome::Blocked("not ours".into()));
        assert_eq!(wakes(), w + 4, "a guard wakes (the waiter stops for it)");
        s.record_outcome("a", Outcome::Synced);
        // A create seen after its name was removed: the waiter waits for it.
        s.note_created("a", Some("u2"));
        s.remove_desired("a");
        let w = wakes();
        s.note_seen("a", Some("u2"));
        assert_eq!(wakes(), w + 1, "a removed name's create seen wakes");
        // An observer (`--wait-available`) reads the objects: woken by everything.
        s.observers.fetch_add(1, Ordering::SeqCst);
        let w = wakes();
        s.record_outcome("a", Outcome::Synced);
        s.status_observed();
        s.note_created("b", Some("u3"));
        s.note_seen("b", Some("u3"));
        assert_eq!(wakes(), w + 3, "observers see every outcome and status");
        s.observers.fetch_sub(1, Ordering::SeqCst);
    }

    #[test]
    fn first_syncs_wake_the_waiter_only_when_they_can_end_its_wait() {
        let s = State::default();
        let wakes = || s.wakes.load(Ordering::SeqCst);
        s.record_at_start(Set::default());
        for n in ["a", "b", "c", "d"] {
            s.set_desired(n.into(), desired(n));
        }
        let w = wakes();
        s.record_outcome("a", Outcome::Synced);
        s.record_outcome("b", Outcome::Synced);
        assert_eq!(wakes(), w, "two of four synced: the wait cannot be over");
        s.record_outcome("c", Outcome::Blocked("not ours".into()));
        assert_eq!(wakes(), w + 1, "a guard wakes");
        s.record_outcome("d", Outcome::Synced);
        assert_eq!(
            wakes(),
            w + 2,
            "the last unsynced name but a held one: the waiter stops"
        );
        s.record_outcome("c", Outcome::Synced);
        assert_eq!(wakes(), w + 3, "the held name synced: converged");
    }

    #[test]
    fn an_observer_counts_only_while_it_waits() {
        let s = State::default();
        let mut checks = 0;
        let past = std::time::Instant::now();
        assert!(s.wait_observing(past, || {
            checks += 1;
            s.observed()
        }));
        assert_eq!(checks, 1);
        assert!(!s.observed(), "the wait is over: no observer left");
    }
}
