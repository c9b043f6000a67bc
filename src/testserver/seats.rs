//! A seat limit as API Priority and Fairness applies one: once `K` requests are being
//! served, more are answered `429` with a `Retry-After` at once (no queueing: a priority
//! level whose queues are full). Watches are not counted (APF frees a watch's seat once
//! it is set up). The `Retry-After` follows kube-apiserver's dropped-requests tracker: 1 s,
//! doubled (up to 32 s) when the drops of the last `Retry-After` seconds reach three times
//! it, and one less for every second with fewer drops than it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

/// kube-apiserver's largest `Retry-After` for a rejected request.
const MAX_RETRY_AFTER: u64 = 32;

/// Requests in flight against an optional limit, and the `Retry-After` of rejections.
#[derive(Default)]
pub(crate) struct Seats {
    /// Most requests served at once; 0: no limit.
    limit: AtomicUsize,
    in_flight: AtomicUsize,
    rejected: AtomicUsize,
    tracker: Mutex<DropTracker>,
}

/// A seat taken; dropping it frees it.
pub(crate) struct Seat<'a>(&'a Seats);

impl Drop for Seat<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Seats {
    /// Sets the limit (0: none).
    pub(crate) fn set_limit(&self, k: usize) {
        self.limit.store(k, Ordering::SeqCst);
    }

    /// Takes a seat, or answers the `Retry-After` (seconds) of a rejection when all are taken.
    pub(crate) fn take(&self) -> Result<Seat<'_>, u64> {
        let n = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        let limit = self.limit.load(Ordering::SeqCst);
        if limit > 0 && n > limit {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            self.rejected.fetch_add(1, Ordering::SeqCst);
            return Err(self.tracker.lock().dropped(unix_now()));
        }
        Ok(Seat(self))
    }

    /// Requests rejected for want of a seat so far.
    pub(crate) fn rejected(&self) -> usize {
        self.rejected.load(Ordering::SeqCst)
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// kube-apiserver's `droppedRequestsStats`, per second.
struct DropTracker {
    retry_after: u64,
    /// When `retry_after` last doubled.
    doubled_at: u64,
    /// The last second the rules were applied for.
    updated: u64,
    /// Drops per second, oldest first.
    history: VecDeque<(u64, u64)>,
}

impl Default for DropTracker {
    fn default() -> Self {
        DropTracker {
            retry_after: 1,
            doubled_at: 0,
            updated: 0,
            history: VecDeque::new(),
        }
    }
}

impl DropTracker {
    /// Records a drop at second `now` and answers the `Retry-After` to send with it.
    fn dropped(&mut self, now: u64) -> u64 {
        self.update(now);
        match self.history.back_mut() {
            Some((t, n)) if *t == now => *n += 1,
            _ => self.history.push_back((now, 1)),
        }
        self.retry_after
    }

    /// Applies the rules once for every second since the last update (a quiet stretch
    /// lowers the value one second at a time, as the server's per-second updates do).
    fn update(&mut self, now: u64) {
        if self.updated == 0 || now.saturating_sub(self.updated) > 2 * MAX_RETRY_AFTER {
            self.updated = now.saturating_sub(1);
        }
        while self.updated < now {
            self.updated += 1;
            self.step(self.updated);
        }
        while self
            .history
            .front()
            .is_some_and(|(t, _)| now.saturating_sub(*t) > MAX_RETRY_AFTER)
        {
            self.history.pop_front();
        }
    }

    fn step(&mut self, unix: u64) {
        let ra = self.retry_after;
        let dropped: u64 = self
            .history
            .iter()
            .filter(|(t, _)| *t < unix && unix - *t <= ra)
            .map(|(_, n)| n)
            .sum();
        if unix.saturating_sub(self.doubled_at) >= ra && dropped >= 3 * ra {
            self.retry_after = (ra * 2).min(MAX_RETRY_AFTER);
            self.doubled_at = unix;
        } else if dropped < ra && ra > 1 {
            self.retry_after = ra - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_doubles_under_many_drops_and_decays_a_second_at_a_time() {
        let mut t = DropTracker::default();
        assert_eq!(t.dropped(100), 1);
        for _ in 0..5 {
            t.dropped(100);
        }
        // Six drops in the second before: at least three times 1 s.
        assert_eq!(t.dropped(101), 2);
        for _ in 0..10 {
            t.dropped(101);
        }
        // 2 s since doubling and 11+ drops within the last 2 s.
        assert_eq!(t.dropped(103), 4);
        // Quiet for a while: one second less per quiet second, down to 1.
        assert_eq!(t.dropped(110), 1);
    }

    #[test]
    fn a_seat_is_freed_when_dropped() {
        let s = Seats::default();
        s.set_limit(1);
        let a = s.take().ok();
        assert!(a.is_some());
        assert!(s.take().is_err());
        drop(a);
        assert!(s.take().is_ok());
        assert_eq!(s.rejected(), 1);
    }
}
