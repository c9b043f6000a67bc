//! The one token bucket: `burst` tokens at once, then one per `1/qps`, reserving ahead.
//!
//! Shared by the REST client's request limit and the workqueue's overall retry bucket
//! (two copies drift). Time is passed in, so each user picks its clock and tests move it.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A token bucket in integer nanoseconds of refill, so 10/s is exactly 100 ms per token.
///
/// Like golang.org/x/time/rate's `Reserve`: the n-th caller beyond the burst waits n/qps.
pub(crate) struct TokenBucket {
    /// Nanoseconds per token; zero means no limit.
    interval: i128,
    /// A full bucket holds `burst × interval` nanoseconds of credit.
    capacity: i128,
    state: Mutex<State>,
}

struct State {
    credit: i128,
    last: Instant,
}

/// Longest interval between tokens (~292 years): a tiny qps saturates here instead of overflowing.
const MAX_INTERVAL: i128 = i64::MAX as i128;

impl TokenBucket {
    /// A full bucket of `burst` (at least 1) tokens refilled at `qps`, starting at `now`.
    ///
    /// A `qps` that is not positive or not finite (NaN, `--qps inf`) means no limit.
    pub(crate) fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let interval = if qps > 0.0 && qps.is_finite() {
            ((1e9 / qps).round() as i128).clamp(1, MAX_INTERVAL)
        } else {
            0
        };
        let capacity = i128::from(burst.max(1)) * interval;
        TokenBucket {
            interval,
            capacity,
            state: Mutex::new(State {
                credit: capacity,
                last: now,
            }),
        }
    }

    /// Whether this bucket never delays anyone.
    pub(crate) fn is_unlimited(&self) -> bool {
        self.interval == 0
    }

    /// Takes one token at `now` and returns how long the caller must wait before using it.
    pub(crate) fn reserve(&self, now: Instant) -> Duration {
        if self.interval == 0 {
            return Duration::ZERO;
        }
        let mut s = self.state.lock();
        // A clock read earlier by another thread (now < last) adds nothing.
        let elapsed = now.saturating_duration_since(s.last).as_nanos() as i128;
        s.last = s.last.max(now);
        s.credit = (s.credit + elapsed).min(self.capacity) - self.interval;
        // The debt is what later callers queue behind: each reserves the next slot.
        nanos(-s.credit)
    }

    /// How long from `now` until `n` more tokens could be taken without waiting; takes none.
    pub(crate) fn time_for(&self, n: u32, now: Instant) -> Duration {
        if self.interval == 0 {
            return Duration::ZERO;
        }
        let s = self.state.lock();
        let elapsed = now.saturating_duration_since(s.last).as_nanos() as i128;
        let credit = (s.credit + elapsed).min(self.capacity);
        nanos(i128::from(n) * self.interval - credit)
    }
}

/// `n` nanoseconds as a Duration; zero when not positive.
fn nanos(n: i128) -> Duration {
    if n <= 0 {
        return Duration::ZERO;
    }
    let secs = u64::try_from(n / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (n % 1_000_000_000) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn burst_is_free_then_paced_at_qps() {
        let t0 = Instant::now();
        let b = TokenBucket::new(10.0, 3, t0);
        for _ in 0..3 {
            assert_eq!(b.reserve(t0), Duration::ZERO);
        }
        // Fourth and fifth wait 100 ms and 200 ms at 10/s.
        assert_eq!(b.reserve(t0), ms(100));
        assert_eq!(b.reserve(t0), ms(200));
        // After two seconds the debt (2) is repaid and the bucket refilled, capped at burst 3.
        let later = t0 + Duration::from_secs(2);
        for _ in 0..3 {
            assert_eq!(b.reserve(later), Duration::ZERO);
        }
        assert_eq!(b.reserve(later), ms(100));
    }

    #[test]
    fn partial_refill_makes_the_caller_wait_for_the_rest() {
        let t0 = Instant::now();
        let b = TokenBucket::new(10.0, 1, t0);
        assert_eq!(b.reserve(t0), Duration::ZERO);
        // 50 ms refills half a token: the caller waits the other 50 ms.
        assert_eq!(b.reserve(t0 + ms(50)), ms(50));
    }

    #[test]
    fn debt_queues_concurrent_callers_in_order() {
        let t0 = Instant::now();
        let b = TokenBucket::new(2.0, 1, t0);
        assert_eq!(b.reserve(t0), Duration::ZERO);
        for i in 1..=4u64 {
            assert_eq!(b.reserve(t0), ms(500 * i), "caller {i}");
        }
    }

    #[test]
    fn clock_going_backwards_neither_refills_nor_panics() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let b = TokenBucket::new(1.0, 1, t0);
        assert_eq!(b.reserve(t0), Duration::ZERO);
        // An earlier instant (another thread read the clock first) adds no tokens.
        assert_eq!(b.reserve(t0 - Duration::from_secs(5)), ms(1000));
    }

    #[test]
    fn long_idle_refills_only_up_to_burst() {
        let t0 = Instant::now();
        let b = TokenBucket::new(5.0, 2, t0);
        let later = t0 + Duration::from_secs(3600);
        assert_eq!(b.reserve(later), Duration::ZERO);
        assert_eq!(b.reserve(later), Duration::ZERO);
        assert_eq!(b.reserve(later), ms(200));
    }

    #[test]
    fn time_for_counts_the_debt_and_the_refill_and_takes_nothing() {
        let t0 = Instant::now();
        let b = TokenBucket::new(10.0, 2, t0);
        assert_eq!(b.time_for(2, t0), Duration::ZERO);
        assert_eq!(b.time_for(5, t0), ms(300));
        assert_eq!(b.reserve(t0), Duration::ZERO, "time_for took a token");
        assert_eq!(b.reserve(t0), Duration::ZERO);
        assert_eq!(b.reserve(t0), ms(100));
        // One token in debt: 3 more need the debt repaid and 3 intervals, 50 ms of it done.
        assert_eq!(b.time_for(3, t0 + ms(50)), ms(350));
        assert_eq!(
            TokenBucket::new(0.0, 1, t0).time_for(1000, t0),
            Duration::ZERO
        );
    }

    #[test]
    fn zero_burst_acts_as_one() {
        let t0 = Instant::now();
        let b = TokenBucket::new(1.0, 0, t0);
        assert_eq!(b.reserve(t0), Duration::ZERO);
        assert!(!b.reserve(t0).is_zero());
    }

    #[test]
    fn zero_negative_or_non_finite_qps_is_unlimited_not_a_panic() {
        for qps in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let t0 = Instant::now();
            let b = TokenBucket::new(qps, 1, t0);
            assert!(b.is_unlimited(), "qps {qps}");
            for _ in 0..1000 {
                assert_eq!(b.reserve(t0), Duration::ZERO, "qps {qps}");
            }
        }
    }

    #[test]
    fn tiny_qps_saturates_instead_of_overflowing() {
        let t0 = Instant::now();
        // The largest burst times the longest interval still fits the credit arithmetic.
        let b = TokenBucket::new(f64::from(f32::MIN_POSITIVE), u32::MAX, t0);
        for _ in 0..3 {
            assert_eq!(b.reserve(t0), Duration::ZERO);
        }
        let b = TokenBucket::new(f64::MIN_POSITIVE, 1, t0);
        assert_eq!(b.reserve(t0), Duration::ZERO);
        assert!(b.reserve(t0) > Duration::from_secs(100 * 365 * 86_400));
    }
}
