//! When the discovery checks run: each target is checked when an APIService first needs it,
//! again whenever its inputs change, and every [`RECHECK`] while an APIService names it, each
//! check on a thread of its own (a backend that never answers holds only its own check, up
//! to the 5 s timeout). A result that differs from the last one wakes the availability pass.
//!
//! Upstream re-checks on every APIService, Service and EndpointSlice event, every 30 s
//! (the APIService informer's resync) and, while failing, with a backoff from 5 ms to 30 s;
//! the test server re-checks every second instead, so tests see a backend die quickly.

use std::collections::{HashMap, HashSet};
use std::sync::Weak;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::discovery_check::{self, Target};
use crate::testserver::server::Shared;

/// How often a target in use is checked again.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// A finished check: when it started, and its outcome.
#[derive(Clone)]
struct Outcome {
    started: Instant,
    result: Result<(), String>,
}

#[derive(Default)]
struct Entry {
    last: Option<Outcome>,
    /// Start of the check in flight, if any.
    running: Option<Instant>,
    /// A pass is waiting for a fresh result: the next one wakes it even if unchanged.
    awaited: bool,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Target, Entry>,
    stopped: bool,
}

/// The discovery checks of kube-apiserver mode, and their latest results.
#[derive(Default)]
pub(crate) struct Prober {
    inner: Mutex<Inner>,
    /// Wakes the recheck thread (a new target, or stop).
    wake: Condvar,
}

impl Prober {
    /// The result of a check of `target` that started at `fresh_since` or later, if there is
    /// one; else `None`, and such a check is started (its end wakes the pass through `shared`).
    pub(crate) fn result(
        &self,
        target: &Target,
        fresh_since: Instant,
        shared: &Weak<Shared>,
    ) -> Option<Result<(), String>> {
        let mut inner = self.inner.lock();
        let entry = inner.entries.entry(target.clone()).or_default();
        if let Some(o) = entry.last.as_ref().filter(|o| o.started >= fresh_since) {
            return Some(o.result.clone());
        }
        entry.awaited = true;
        if entry.running.is_none() && spawn_check(target.clone(), shared.clone()) {
            // `finish` waits for this lock: the check cannot end before it is marked running.
            entry.running = Some(Instant::now());
        }
        None
    }

    /// Forgets every target not in `live` (no APIService names it any more).
    pub(crate) fn retain(&self, live: &HashSet<Target>) {
        self.inner.lock().entries.retain(|t, _| live.contains(t));
    }

    /// Rechecks every target in use each [`RECHECK`] until [`stop`](Self::stop).
    pub(crate) fn run(&self, shared: &Weak<Shared>) {
        let mut inner = self.inner.lock();
        while !inner.stopped {
            let now = Instant::now();
            let mut next = now + RECHECK;
            for (target, entry) in inner.entries.iter_mut() {
                if entry.running.is_some() {
                    continue;
                }
                let due = entry.last.as_ref().map_or(now, |o| o.started + RECHECK);
                if due <= now {
                    if spawn_check(target.clone(), shared.clone()) {
                        entry.running = Some(now);
                    }
                } else {
                    next = next.min(due);
                }
            }
            self.wake.wait_until(&mut inner, next);
        }
    }

    /// Ends [`run`](Self::run); checks in flight end on their own within the timeout.
    pub(crate) fn stop(&self) {
        self.inner.lock().stopped = true;
        self.wake.notify_all();
    }

    /// Records a finished check; whether a pass should see it (a new result, or one a pass
    /// is waiting for).
    fn finish(&self, target: &Target, outcome: Outcome) -> bool {
        let mut inner = self.inner.lock();
        let Some(entry) = inner.entries.get_mut(target) else {
            return false;
        };
        entry.running = None;
        let changed = entry.last.as_ref().map(|o| &o.result) != Some(&outcome.result);
        entry.last = Some(outcome);
        changed || std::mem::take(&mut entry.awaited)
    }
}

/// Runs one check of `target` on its own thread, then records it and, when the result is
/// new, wakes kube-apiserver's pass. False when no thread could be started.
fn spawn_check(target: Target, shared: Weak<Shared>) -> bool {
    let spawned = std::thread::Builder::new()
        .name("testserver-discovery-check".into())
        .spawn(move || {
            let started = Instant::now();
            let result = match target.tls_config() {
                Ok(config) => discovery_check::check(&target, config, discovery_check::TIMEOUT),
                Err(e) => Err(e),
            };
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let Some(kas) = shared.kas.as_ref() else {
                return;
            };
            if kas
                .availability
                .prober
                .finish(&target, Outcome { started, result })
            {
                kas.poke(&shared);
            }
        });
    if let Err(e) = &spawned {
        log::warn!("test server: cannot start a discovery check: {e}");
    }
    spawned.is_ok()
}
