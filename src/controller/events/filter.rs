//! Drops repeats: the same (name, reason, note) within a window is recorded once.

use std::time::{Duration, Instant};

use super::EventReason;
use crate::hash::Map;

/// How long a repeat is suppressed: client-go's `EventAggregator` interval (10 minutes).
pub const DEDUP_WINDOW: Duration = Duration::from_secs(600);

/// Most keys remembered; past it, entries older than the window go, then the oldest half.
pub const DEDUP_MAX_KEYS: usize = 4096;

/// Remembers when each (name, reason, note) was last admitted.
#[derive(Debug)]
pub struct Deduper {
    window: Duration,
    seen: Map<(String, EventReason, String), Instant>,
}

impl Deduper {
    /// A filter suppressing repeats within `window`.
    pub fn new(window: Duration) -> Deduper {
        Deduper {
            window,
            seen: Map::default(),
        }
    }

    /// Whether an Event for this key should be written now (and remembers it if so).
    pub fn admit(&mut self, name: &str, reason: EventReason, note: &str, now: Instant) -> bool {
        let key = (name.to_string(), reason, note.to_string());
        if let Some(at) = self.seen.get(&key) {
            if now.saturating_duration_since(*at) < self.window {
                return false;
            }
        }
        if self.seen.len() >= DEDUP_MAX_KEYS {
            self.prune(now);
        }
        self.seen.insert(key, now);
        true
    }

    /// Forgets a key, so its next Event is admitted (one that was never written is no repeat).
    pub fn forget(&mut self, name: &str, reason: EventReason, note: &str) {
        self.seen
            .remove(&(name.to_string(), reason, note.to_string()));
    }

    /// Bounds memory: forget expired keys; if that is not enough, the older half.
    fn prune(&mut self, now: Instant) {
        let window = self.window;
        self.seen
            .retain(|_, at| now.saturating_duration_since(*at) < window);
        if self.seen.len() >= DEDUP_MAX_KEYS {
            let mut times: Vec<Instant> = self.seen.values().copied().collect();
            crate::sort::sort(&mut times);
            let cut = times[times.len() / 2];
            self.seen.retain(|_, at| *at > cut);
        }
    }

    /// Keys remembered (for tests).
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_within_the_window_is_dropped_and_admitted_after_it() {
        let mut d = Deduper::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert!(d.admit("v1.a", EventReason::Updated, "spec", t0));
        assert!(!d.admit(
            "v1.a",
            EventReason::Updated,
            "spec",
            t0 + Duration::from_secs(9)
        ));
        assert!(d.admit("v1.a", EventReason::Updated, "other note", t0));
        assert!(d.admit("v1.a", EventReason::Registered, "spec", t0));
        assert!(d.admit("v1.b", EventReason::Updated, "spec", t0));
        assert!(d.admit(
            "v1.a",
            EventReason::Updated,
            "spec",
            t0 + Duration::from_secs(10)
        ));
    }

    #[test]
    fn memory_stays_bounded() {
        let mut d = Deduper::new(Duration::from_secs(3600));
        let t0 = Instant::now();
        for i in 0..(3 * DEDUP_MAX_KEYS) {
            let at = t0 + Duration::from_millis(i as u64);
            assert!(d.admit(&format!("v1.n{i}"), EventReason::Registered, "", at));
        }
        assert!(d.len() <= DEDUP_MAX_KEYS, "{}", d.len());
    }
}
