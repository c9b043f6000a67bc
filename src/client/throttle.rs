//! Backing off as a whole when the server throttles writes.
//!
//! A 429 with `Retry-After` says the server's priority level is saturated (API Priority and
//! Fairness), not that one request was unlucky: every write of this client would meet the
//! same answer. So the client holds all its writes for that long (plus a little jitter),
//! and no longer sends more writes at once than the server took: the writes still in
//! flight when a 429 comes are what it could serve, and a 429 while already within a
//! window means one less (a server's seat is freed a moment after its answer leaves, so
//! a client exactly at the limit still collides now and then, and every collision costs
//! a hold). Without the window a hold only turns a seat limit into one burst of 429s a
//! second. The window grows back by one write for each quiet period without a 429, and is
//! dropped once it is no limit at all.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::runtime::clock::deadline_after;
use crate::runtime::prng::XorShift64;

/// How often a waiting writer checks whether it should give up (a stop).
const CANCEL_CHECK: Duration = Duration::from_millis(20);

/// Extra hold on top of `Retry-After`, as a fraction of it (at most): writers of several
/// clients told the same `Retry-After` do not all come back in the same instant.
const HOLD_JITTER: f64 = 0.1;

/// A quiet period without any 429 lets one more write in flight (probing whether the
/// server has room again costs at most one 429 per period).
const GROW_AFTER: Duration = Duration::from_secs(10);

/// A window this wide limits nothing any controller uses: it is dropped.
const NO_LIMIT_AT: usize = 64;

/// Holds and paces the writes of one client (shared by all its clones).
pub(crate) struct WriteThrottle {
    enabled: bool,
    state: Mutex<State>,
    freed: Condvar,
}

struct State {
    in_flight: usize,
    /// Most writes in flight at once; `None`: no limit (nothing was throttled lately).
    window: Option<usize>,
    /// No write before this.
    hold_until: Option<Instant>,
    /// When the window last shrank or grew.
    changed: Instant,
    rng: XorShift64,
}

/// A write under way; dropping it ends it.
pub(crate) struct Permit<'a> {
    throttle: &'a WriteThrottle,
}

impl WriteThrottle {
    /// A throttle; `enabled: false` lets every write through at once (for comparisons).
    pub(crate) fn new(enabled: bool) -> Self {
        WriteThrottle {
            enabled,
            state: Mutex::new(State {
                in_flight: 0,
                window: None,
                hold_until: None,
                changed: Instant::now(),
                rng: XorShift64::from_entropy(),
            }),
            freed: Condvar::new(),
        }
    }

    /// Waits until a write may go (no hold, room in the window) and counts it in flight;
    /// `None` when `cancelled()` says to give up first.
    pub(crate) fn acquire(&self, cancelled: impl Fn() -> bool) -> Option<Permit<'_>> {
        let mut s = self.state.lock();
        loop {
            if cancelled() {
                return None;
            }
            let now = Instant::now();
            if let Some(w) = s.window {
                if now.saturating_duration_since(s.changed) >= GROW_AFTER {
                    s.window = (w + 1 < NO_LIMIT_AT).then_some(w + 1);
                    s.changed = now;
                }
            }
            let held = s.hold_until.filter(|until| *until > now);
            let room = s.window.is_none_or(|w| s.in_flight < w);
            if held.is_none() && room {
                s.hold_until = None;
                s.in_flight += 1;
                return Some(Permit { throttle: self });
            }
            let wait = held.map_or(CANCEL_CHECK, |until| until - now);
            self.freed.wait_for(&mut s, wait.min(CANCEL_CHECK));
        }
    }

    /// The current window (for tests).
    #[cfg(test)]
    fn window(&self) -> Option<usize> {
        self.state.lock().window
    }
}

impl Permit<'_> {
    /// The server answered this write 429 with `retry_after`: hold every write for that
    /// long (plus jitter) and let no more writes in flight than the others still out.
    pub(crate) fn throttled(&self, retry_after: Duration) {
        let t = self.throttle;
        if !t.enabled {
            return;
        }
        let mut s = t.state.lock();
        let now = Instant::now();
        let jitter = retry_after.mul_f64(HOLD_JITTER * s.rng.next_f64());
        let until = deadline_after(now, retry_after.saturating_add(jitter));
        s.hold_until = Some(s.hold_until.map_or(until, |h| h.max(until)));
        // This write is still counted: the others are `in_flight - 1`.
        let others = s.in_flight.saturating_sub(1);
        let window = match s.window {
            None => others,
            Some(w) => w.min(others).saturating_sub(1),
        };
        s.window = Some(window.max(1));
        s.changed = now;
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let t = self.throttle;
        t.state.lock().in_flight -= 1;
        t.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_429_holds_every_write_for_its_retry_after() {
        let t = WriteThrottle::new(true);
        let p = t.acquire(|| false).unwrap();
        p.throttled(Duration::from_millis(200));
        drop(p);
        let started = Instant::now();
        let p = t.acquire(|| false).unwrap();
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(195), "{waited:?}");
        assert!(waited < Duration::from_millis(200 + 20 + 100), "{waited:?}");
        drop(p);
    }

    #[test]
    fn the_window_shrinks_below_the_writes_the_server_took() {
        let t = WriteThrottle::new(true);
        let permits: Vec<Permit<'_>> = (0..6).map(|_| t.acquire(|| false).unwrap()).collect();
        let mut permits = permits.into_iter();
        // The first 429: the five others still out are what the server may take.
        let p = permits.next().unwrap();
        p.throttled(Duration::from_millis(1));
        drop(p);
        assert_eq!(t.window(), Some(5));
        // More 429s within the window: one less than the others each time.
        for _ in 0..2 {
            let p = permits.next().unwrap();
            p.throttled(Duration::from_millis(1));
            drop(p);
        }
        assert_eq!(t.window(), Some(2), "min(5, 3) - 1 = 2");
        let held: Vec<Permit<'_>> = permits.collect();
        assert_eq!(held.len(), 3);
        // No more writes until fewer than two are in flight.
        let cancel_after = Instant::now() + Duration::from_millis(100);
        assert!(
            t.acquire(|| Instant::now() > cancel_after).is_none(),
            "no room while three are in flight"
        );
        let mut held = held.into_iter();
        drop(held.next());
        drop(held.next());
        assert!(t.acquire(|| false).is_some(), "room once one is left");
    }

    #[test]
    fn a_later_longer_retry_after_moves_the_hold_later() {
        let t = Arc::new(WriteThrottle::new(true));
        let a = t.acquire(|| false).unwrap();
        let b = t.acquire(|| false).unwrap();
        a.throttled(Duration::from_millis(50));
        b.throttled(Duration::from_millis(300));
        drop((a, b));
        let started = Instant::now();
        let _p = t.acquire(|| false).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(295));
    }

    #[test]
    fn disabled_it_never_holds() {
        let t = WriteThrottle::new(false);
        let p = t.acquire(|| false).unwrap();
        p.throttled(Duration::from_secs(60));
        drop(p);
        let started = Instant::now();
        let _p = t.acquire(|| false).unwrap();
        assert!(started.elapsed() < Duration::from_millis(50));
    }

    #[test]
    fn a_stop_ends_the_wait() {
        let t = WriteThrottle::new(true);
        let p = t.acquire(|| false).unwrap();
        p.throttled(Duration::from_secs(60));
        drop(p);
        let started = Instant::now();
        assert!(t
            .acquire(|| started.elapsed() > Duration::from_millis(50))
            .is_none());
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
