//! Client-side token bucket: at most `qps` requests per second after a burst of `burst`.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How often a caller waiting for a token checks whether it should give up.
const CANCEL_CHECK: Duration = Duration::from_millis(20);

/// A blocking token bucket shared by every request of a client.
pub(crate) struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<BucketState>,
}

struct BucketState {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A bucket that starts full; `qps <= 0` (or not a finite number) means unlimited.
    pub(crate) fn new(qps: f32, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        // NaN or infinity (`--qps inf`) would poison the arithmetic below; both mean "no limit".
        let qps = if qps.is_finite() && qps > 0.0 {
            f64::from(qps)
        } else {
            0.0
        };
        TokenBucket {
            qps,
            burst,
            state: Mutex::new(BucketState {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    /// Takes one token and returns how long the caller must wait before using it.
    pub(crate) fn reserve(&self, now: Instant) -> Duration {
        if self.qps <= 0.0 {
            return Duration::ZERO;
        }
        let mut s = self.state.lock();
        let elapsed = now.saturating_duration_since(s.last).as_secs_f64();
        s.last = s.last.max(now);
        s.tokens = (s.tokens + elapsed * self.qps).min(self.burst);
        s.tokens -= 1.0;
        if s.tokens >= 0.0 {
            Duration::ZERO
        } else {
            // Debt is paid back at qps; later callers queue behind this one. A tiny qps can
            // ask for more than a Duration holds: saturate rather than panic.
            Duration::try_from_secs_f64(-s.tokens / self.qps).unwrap_or(Duration::MAX)
        }
    }

    /// Blocks until a token is available, or until `cancelled` says to give up (checked
    /// every few milliseconds, so a stop is never stuck behind a tiny `qps`); `false` then.
    pub(crate) fn acquire(&self, cancelled: impl Fn() -> bool) -> bool {
        let wait = self.reserve(Instant::now());
        let until = crate::runtime::clock::deadline_after(Instant::now(), wait);
        loop {
            if cancelled() {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(CANCEL_CHECK));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_is_free_then_paced_at_qps() {
        let b = TokenBucket::new(10.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(b.reserve(t0), Duration::ZERO);
        }
        // Fourth and fifth wait 100 ms and 200 ms at 10/s.
        let w4 = b.reserve(t0);
        let w5 = b.reserve(t0);
        assert!((w4.as_secs_f64() - 0.1).abs() < 1e-6, "{w4:?}");
        assert!((w5.as_secs_f64() - 0.2).abs() < 1e-6, "{w5:?}");
        // After a second the debt (2) is repaid and 8 tokens refilled, capped at burst 3.
        let later = t0 + Duration::from_secs(2);
        for _ in 0..3 {
            assert_eq!(b.reserve(later), Duration::ZERO);
        }
        assert!(!b.reserve(later).is_zero());
    }

    #[test]
    fn partial_refill_gives_whole_tokens_only() {
        let b = TokenBucket::new(10.0, 1);
        let t0 = Instant::now();
        assert_eq!(b.reserve(t0), Duration::ZERO);
        // 50 ms refills half a token: the caller waits the other 50 ms.
        let w = b.reserve(t0 + Duration::from_millis(50));
        assert!((w.as_secs_f64() - 0.05).abs() < 1e-6, "{w:?}");
    }

    #[test]
    fn debt_queues_concurrent_callers_in_order() {
        let b = TokenBucket::new(2.0, 1);
        let t0 = Instant::now();
        assert_eq!(b.reserve(t0), Duration::ZERO);
        let waits: Vec<f64> = (0..4).map(|_| b.reserve(t0).as_secs_f64()).collect();
        for (i, w) in waits.iter().enumerate() {
            let want = 0.5 * (i + 1) as f64;
            assert!((w - want).abs() < 1e-6, "caller {i} waits {w}, want {want}");
        }
    }

    #[test]
    fn clock_going_backwards_neither_refills_nor_panics() {
        let b = TokenBucket::new(1.0, 1);
        let t0 = Instant::now() + Duration::from_secs(10);
        assert_eq!(b.reserve(t0), Duration::ZERO);
        // An earlier instant (another thread read the clock first) adds no tokens.
        let w = b.reserve(t0 - Duration::from_secs(5));
        assert!((w.as_secs_f64() - 1.0).abs() < 1e-6, "{w:?}");
    }

    #[test]
    fn long_idle_refills_only_up_to_burst() {
        let b = TokenBucket::new(5.0, 2);
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(3600);
        assert_eq!(b.reserve(later), Duration::ZERO);
        assert_eq!(b.reserve(later), Duration::ZERO);
        assert!(!b.reserve(later).is_zero());
    }

    #[test]
    fn zero_burst_acts_as_one() {
        let b = TokenBucket::new(1.0, 0);
        let t0 = Instant::now();
        assert_eq!(b.reserve(t0), Duration::ZERO);
        assert!(!b.reserve(t0).is_zero());
    }

    #[test]
    fn non_finite_or_negative_qps_is_unlimited_not_a_panic() {
        for qps in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -1.0] {
            let b = TokenBucket::new(qps, 1);
            let t0 = Instant::now();
            for _ in 0..10 {
                assert_eq!(b.reserve(t0), Duration::ZERO, "qps {qps}");
            }
        }
    }

    #[test]
    fn tiny_qps_saturates_instead_of_panicking() {
        let b = TokenBucket::new(f32::MIN_POSITIVE, 1);
        let t0 = Instant::now();
        assert_eq!(b.reserve(t0), Duration::ZERO);
        assert!(b.reserve(t0) > Duration::from_secs(1 << 40));
    }

    #[test]
    fn zero_qps_is_unlimited() {
        let b = TokenBucket::new(0.0, 1);
        let t0 = Instant::now();
        for _ in 0..1000 {
            assert_eq!(b.reserve(t0), Duration::ZERO);
        }
    }
}
