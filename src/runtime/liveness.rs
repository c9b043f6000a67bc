//! Heartbeats of the threads a process needs, so `/healthz` can say when one has died or
//! is stuck, instead of answering 200 while nothing works.
//!
//! A thread registers a [`Heartbeat`] under a group name and says, as it goes, whether it
//! is busy with something that must finish within a bound ([`Heartbeat::busy_for`]) or
//! idle, waiting for work that may take any time to come ([`Heartbeat::idle`]). A group
//! is healthy while at least one of its members is alive and not past its bound (a pool
//! of workers is healthy while one of them works). A heartbeat dropped without
//! [`Heartbeat::retire`] (its thread ended unexpectedly, or panicked) counts as dead.
//!
//! The registry is a value passed to whoever needs it (the controller, the operations
//! endpoint), not global state, and runs on an injectable [`Clock`].

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::clock::{deadline_after, Clock, RealClock};

/// The heartbeats of one process (or one controller), by group.
pub struct Liveness {
    clock: Arc<dyn Clock>,
    beats: Mutex<Vec<Arc<Beat>>>,
}

/// One thread's heartbeat; its owner keeps it and drops (or retires) it when it ends.
pub struct Heartbeat {
    beat: Arc<Beat>,
    registry: Weak<Liveness>,
    clock: Arc<dyn Clock>,
}

struct Beat {
    group: String,
    state: Mutex<State>,
}

#[derive(Clone, Debug)]
enum State {
    /// Waiting for work; not stuck however long it waits.
    Idle,
    /// Working; stuck once `until` has passed (`what` says on what).
    Busy { until: Instant, what: &'static str },
    /// The thread ended without retiring.
    Dead,
    /// The thread ended normally; no longer judged.
    Retired,
}

impl Liveness {
    /// An empty registry on the real clock.
    pub fn new() -> Arc<Liveness> {
        Self::with_clock(Arc::new(RealClock))
    }

    /// An empty registry judging bounds on `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Arc<Liveness> {
        Arc::new(Liveness {
            clock,
            beats: Mutex::new(Vec::new()),
        })
    }

    /// A new heartbeat in `group` (e.g. `workers`), idle to begin with.
    pub fn register(self: &Arc<Self>, group: &str) -> Heartbeat {
        let beat = Arc::new(Beat {
            group: group.to_string(),
            state: Mutex::new(State::Idle),
        });
        self.beats.lock().push(beat.clone());
        Heartbeat {
            beat,
            registry: Arc::downgrade(self),
            clock: self.clock.clone(),
        }
    }

    /// `Ok` when every group has a live member within its bound; else one line per failing
    /// group saying why.
    pub fn check(&self) -> Result<(), String> {
        let now = self.clock.now();
        let beats = self.beats.lock();
        let mut groups: Vec<&str> = beats.iter().map(|b| b.group.as_str()).collect();
        crate::sort::sort(&mut groups);
        groups.dedup();
        let mut failing = Vec::new();
        for group in groups {
            let members: Vec<State> = beats
                .iter()
                .filter(|b| b.group == group)
                .map(|b| b.state.lock().clone())
                .collect();
            let healthy = members.iter().any(|s| match s {
                State::Idle => true,
                State::Busy { until, .. } => now < *until,
                State::Dead | State::Retired => false,
            });
            if healthy {
                continue;
            }
            let dead = members.iter().filter(|s| matches!(s, State::Dead)).count();
            let stuck: Vec<&str> = members
                .iter()
                .filter_map(|s| match s {
                    State::Busy { what, .. } => Some(*what),
                    _ => None,
                })
                .collect();
            let mut why = format!("{group}:");
            if dead > 0 {
                why.push_str(&format!(" {dead} ended unexpectedly"));
            }
            if !stuck.is_empty() {
                why.push_str(&format!(
                    " {} stuck past its bound ({})",
                    stuck.len(),
                    stuck.join(", ")
                ));
            }
            failing.push(why);
        }
        if failing.is_empty() {
            Ok(())
        } else {
            Err(failing.join("; "))
        }
    }
}

impl Heartbeat {
    /// Starts something that must be over within `bound` (`what`, e.g. "sync").
    pub fn busy_for(&self, bound: Duration, what: &'static str) {
        let until = deadline_after(self.clock.now(), bound);
        *self.beat.state.lock() = State::Busy { until, what };
    }

    /// Waits for work, which may take any time to come.
    pub fn idle(&self) {
        *self.beat.state.lock() = State::Idle;
    }

    /// The thread ends normally (shutdown): leaves the registry instead of counting as dead.
    pub fn retire(self) {
        if let Some(registry) = self.registry.upgrade() {
            registry
                .beats
                .lock()
                .retain(|b| !Arc::ptr_eq(b, &self.beat));
        }
        // So the drop that follows does not mark it dead.
        *self.beat.state.lock() = State::Retired;
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        let mut state = self.beat.state.lock();
        if !matches!(*state, State::Retired) {
            *state = State::Dead;
        }
    }
}

impl std::fmt::Debug for Liveness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Liveness")
            .field("beats", &self.beats.lock().len())
            .finish()
    }
}

impl std::fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeat")
            .field("group", &self.beat.group)
            .field("state", &*self.beat.state.lock())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::clock::ManualClock;

    fn registry() -> (Arc<Liveness>, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new());
        (Liveness::with_clock(clock.clone()), clock)
    }

    #[test]
    fn a_group_is_healthy_while_one_member_is_idle_or_within_its_bound() {
        let (l, clock) = registry();
        assert_eq!(l.check(), Ok(()), "nothing registered");
        let a = l.register("workers");
        let b = l.register("workers");
        a.busy_for(Duration::from_secs(10), "sync");
        b.busy_for(Duration::from_secs(20), "sync");
        clock.advance(Duration::from_secs(15));
        assert_eq!(l.check(), Ok(()), "b is still within its bound");
        clock.advance(Duration::from_secs(10));
        let e = l.check().unwrap_err();
        assert!(
            e.contains("workers: 2 stuck past its bound (sync, sync)"),
            "{e}"
        );
        b.idle();
        assert_eq!(l.check(), Ok(()), "an idle worker is alive");
        drop(a);
        drop(b);
        let e = l.check().unwrap_err();
        assert!(e.contains("workers: 2 ended unexpectedly"), "{e}");
    }

    #[test]
    fn retired_beats_leave_and_groups_are_judged_apart() {
        let (l, clock) = registry();
        let r = l.register("reflector");
        let w = l.register("workers");
        r.busy_for(Duration::from_secs(1), "list");
        clock.advance(Duration::from_secs(2));
        let e = l.check().unwrap_err();
        assert!(e.starts_with("reflector:") && !e.contains("workers"), "{e}");
        r.retire();
        w.retire();
        assert_eq!(l.check(), Ok(()));
    }

    #[test]
    fn a_huge_bound_does_not_overflow() {
        let (l, _) = registry();
        let h = l.register("x");
        h.busy_for(Duration::MAX, "forever");
        assert_eq!(l.check(), Ok(()));
    }
}
