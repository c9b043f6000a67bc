//! Client-side token bucket: at most `qps` requests per second after a burst of `burst`.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

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
    /// A bucket that starts full; `qps <= 0` means unlimited.
    pub(crate) fn new(qps: f32, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps: f64::from(qps),
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
            // Debt is paid back at qps; later callers queue behind this one.
            Duration::from_secs_f64(-s.tokens / self.qps)
        }
    }

    /// Blocks until a token is available.
    pub(crate) fn acquire(&self) {
        let wait = self.reserve(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
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
    fn zero_qps_is_unlimited() {
        let b = TokenBucket::new(0.0, 1);
        let t0 = Instant::now();
        for _ in 0..1000 {
            assert_eq!(b.reserve(t0), Duration::ZERO);
        }
    }
}
