//! An injectable clock so backoff and delays are tested by moving time, not sleeping.
//!
//! Waiting goes through the clock too: a thread that must sleep "until a deadline
//! or until something changes" calls [`Clock::wait`] with a [`Wakeup`]. The real
//! clock waits on a condition variable with a timeout; the manual clock wakes every
//! such waiter whenever it is advanced, so they re-check their deadline.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// Stands in for "never" where an `Instant` is needed: about a century.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `start + d`, saturating: a duration too large for an `Instant` (`Duration::MAX` from a
/// caller meaning "forever") gives a deadline about a century away instead of a panic.
pub fn deadline_after(start: Instant, d: Duration) -> Instant {
    start
        .checked_add(d)
        .or_else(|| start.checked_add(FAR_FUTURE))
        .unwrap_or(start)
}

/// A source of time that can also block a thread until a deadline on that time.
pub trait Clock: Send + Sync + 'static {
    /// The current instant on this clock.
    fn now(&self) -> Instant;

    /// Blocks until `deadline` has passed on this clock (forever if `None`) or `wakeup` is woken.
    ///
    /// Returns `true` when woken (the wake is consumed), `false` when the deadline passed.
    /// A wake that arrived before the call returns at once, so no wake is lost.
    fn wait(&self, wakeup: &Arc<Wakeup>, deadline: Option<Instant>) -> bool;
}

/// A latch one thread waits on through a [`Clock`] and others set to wake it early.
#[derive(Debug, Default)]
pub struct Wakeup {
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Wakeup {
    /// A wakeup that has not been woken.
    pub fn new() -> Self {
        Self::default()
    }

    /// Wakes the waiter (or the next one to wait, if none waits now).
    pub fn wake(&self) {
        *self.woken.lock() = true;
        self.cv.notify_all();
    }

    /// Makes waiters re-check their deadline without counting as a wake.
    fn poke(&self) {
        // Taking the lock orders this notify after a waiter's deadline check.
        let _guard = self.woken.lock();
        self.cv.notify_all();
    }

    /// Consumes a pending wake or waits until `deadline_passed` or a wake/poke.
    fn wait_with(
        &self,
        deadline: Option<Instant>,
        deadline_passed: impl Fn(Instant) -> bool,
        real_timeout: bool,
    ) -> bool {
        let mut woken = self.woken.lock();
        loop {
            if *woken {
                *woken = false;
                return true;
            }
            match deadline {
                Some(d) if deadline_passed(d) => return false,
                Some(d) if real_timeout => {
                    self.cv.wait_until(&mut woken, d);
                }
                _ => self.cv.wait(&mut woken),
            }
        }
    }
}

/// The system's monotonic clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wait(&self, wakeup: &Arc<Wakeup>, deadline: Option<Instant>) -> bool {
        wakeup.wait_with(deadline, |d| Instant::now() >= d, true)
    }
}

/// A clock that stands still until a test advances it.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<Instant>,
    /// Everything that ever waited on this clock; poked on every advance.
    waiters: Mutex<Vec<Weak<Wakeup>>>,
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl ManualClock {
    /// A manual clock starting at the real current instant.
    pub fn new() -> Self {
        ManualClock {
            now: Mutex::new(Instant::now()),
            waiters: Mutex::new(Vec::new()),
        }
    }

    /// Moves time forward by `d` and wakes every waiter so it re-checks its deadline.
    pub fn advance(&self, d: Duration) {
        {
            let mut now = self.now.lock();
            *now += d;
        }
        let waiters: Vec<Arc<Wakeup>> = {
            let mut w = self.waiters.lock();
            w.retain(|x| x.strong_count() > 0);
            w.iter().filter_map(Weak::upgrade).collect()
        };
        for w in waiters {
            w.poke();
        }
    }

    fn register(&self, wakeup: &Arc<Wakeup>) {
        let mut w = self.waiters.lock();
        w.retain(|x| x.strong_count() > 0);
        if !w
            .iter()
            .any(|x| std::ptr::eq(x.as_ptr(), Arc::as_ptr(wakeup)))
        {
            w.push(Arc::downgrade(wakeup));
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.now.lock()
    }

    fn wait(&self, wakeup: &Arc<Wakeup>, deadline: Option<Instant>) -> bool {
        // Registered before the first deadline check: an advance after the check pokes us.
        self.register(wakeup);
        wakeup.wait_with(deadline, |d| self.now() >= d, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_after_saturates() {
        let now = Instant::now();
        assert_eq!(
            deadline_after(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
        assert!(deadline_after(now, Duration::MAX) > now + Duration::from_secs(3600 * 24 * 365));
    }
    use std::thread;

    #[test]
    fn real_clock_wait_returns_at_deadline() {
        let c = RealClock;
        let w = Arc::new(Wakeup::new());
        let start = Instant::now();
        assert!(!c.wait(&w, Some(start + Duration::from_millis(5))));
        assert!(Instant::now() >= start + Duration::from_millis(5));
    }

    #[test]
    fn wake_before_wait_is_not_lost() {
        let w = Arc::new(Wakeup::new());
        w.wake();
        assert!(RealClock.wait(&w, None));
        // The wake was consumed.
        assert!(!RealClock.wait(&w, Some(Instant::now())));
    }

    #[test]
    fn manual_clock_advance_wakes_waiter_at_deadline() {
        let c = Arc::new(ManualClock::new());
        let w = Arc::new(Wakeup::new());
        let deadline = c.now() + Duration::from_secs(10);
        let (c2, w2) = (c.clone(), w.clone());
        let t = thread::spawn(move || c2.wait(&w2, Some(deadline)));
        c.advance(Duration::from_secs(5));
        c.advance(Duration::from_secs(5));
        assert!(!t.join().unwrap(), "returned because the deadline passed");
    }

    #[test]
    fn manual_clock_wait_is_woken_by_wake() {
        let c = Arc::new(ManualClock::new());
        let w = Arc::new(Wakeup::new());
        let (c2, w2) = (c.clone(), w.clone());
        let t = thread::spawn(move || c2.wait(&w2, Some(c2.now() + Duration::from_secs(1))));
        w.wake();
        assert!(t.join().unwrap());
    }
}
