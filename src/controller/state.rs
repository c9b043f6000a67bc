//! What the controller remembers between syncs: desired set, synced-once names, names present at start.

use std::collections::{HashMap, HashSet};

use parking_lot::{Condvar, Mutex, RwLock};

use super::decision::Desired;

/// The controller's bookkeeping, shared by registration calls and workers.
#[derive(Default)]
pub(crate) struct State {
    /// name → desired object and mode.
    desired: RwLock<HashMap<String, Desired>>,
    /// Names this process has synced successfully at least once.
    synced_once: Mutex<HashSet<String>>,
    /// Names in the cache when it first synced; `None` until then.
    at_start: RwLock<Option<HashSet<String>>>,
    /// Last failure per name, cleared on success (for `--once` reports).
    failures: Mutex<HashMap<String, String>>,
    /// Notified after every sync outcome so waiters re-check convergence.
    progress: Condvar,
    progress_lock: Mutex<()>,
}

impl State {
    /// Sets the desired entry for a name; returns the previous one.
    pub(crate) fn set_desired(&self, name: String, d: Desired) -> Option<Desired> {
        self.desired.write().insert(name, d)
    }

    /// Drops the desired entry for a name.
    pub(crate) fn remove_desired(&self, name: &str) -> Option<Desired> {
        self.desired.write().remove(name)
    }

    /// The desired entry for a name.
    pub(crate) fn desired(&self, name: &str) -> Option<Desired> {
        self.desired.read().get(name).cloned()
    }

    /// Every desired name.
    pub(crate) fn desired_names(&self) -> Vec<String> {
        self.desired.read().keys().cloned().collect()
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
    pub(crate) fn record_at_start(&self, names: HashSet<String>) {
        let mut at_start = self.at_start.write();
        if at_start.is_none() {
            *at_start = Some(names);
        }
    }

    /// Names present at start, if the cache has synced.
    pub(crate) fn at_start(&self) -> Option<HashSet<String>> {
        self.at_start.read().clone()
    }

    /// Records a sync outcome and wakes convergence waiters.
    pub(crate) fn record_outcome(&self, name: &str, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => {
                self.synced_once.lock().insert(name.to_string());
                self.failures.lock().remove(name);
            }
            Err(e) => {
                self.failures.lock().insert(name.to_string(), e);
            }
        }
        let _guard = self.progress_lock.lock();
        self.progress.notify_all();
    }

    /// The last failure recorded for a name.
    pub(crate) fn failure(&self, name: &str) -> Option<String> {
        self.failures.lock().get(name).cloned()
    }

    /// Blocks until `done()` holds or `deadline` passes; re-checked after every outcome.
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
            let step = std::time::Instant::now() + std::time::Duration::from_millis(100);
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

    /// Wakes every waiter (used at shutdown).
    pub(crate) fn wake_all(&self) {
        let _guard = self.progress_lock.lock();
        self.progress.notify_all();
    }
}
