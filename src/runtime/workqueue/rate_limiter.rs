//! Retry policies: how long an item waits before its next attempt, kept out of the queue.

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::hash::Map;
use crate::runtime::clock::{Clock, RealClock};
use crate::token_bucket::TokenBucket;

/// Decides how long an item waits before it is retried.
pub trait RateLimiter<T>: Send + Sync {
    /// The delay before `item`'s next attempt; records the attempt.
    fn when(&self, item: &T) -> Duration;
    /// Forgets `item`'s failures (it succeeded); bucket-style limiters ignore this.
    fn forget(&self, item: &T);
    /// How many times `item` has been retried since it was last forgotten.
    fn num_requeues(&self, item: &T) -> u32;
}

/// Per-item exponential backoff: `base × 2^failures`, capped at `max`.
#[derive(Debug)]
pub struct ItemExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<Map<T, u32>>,
}

impl<T> ItemExponentialFailureRateLimiter<T> {
    /// Backoff starting at `base` and doubling per failure up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemExponentialFailureRateLimiter {
            base,
            max,
            failures: Mutex::new(Map::default()),
        }
    }
}

impl<T: Clone + Eq + Hash + Send> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let exp = {
            let mut f = self.failures.lock();
            let n = f.entry(item.clone()).or_insert(0);
            let exp = *n;
            *n = n.saturating_add(1);
            exp
        };
        // In nanoseconds as u128: base × 2^exp overflows only past exp ≈ 60, and then it is capped.
        let backoff = 1u128
            .checked_shl(exp)
            .and_then(|factor| self.base.as_nanos().checked_mul(factor));
        match backoff {
            Some(n) if n < self.max.as_nanos() => {
                // n < max, which fits a Duration, so these conversions are exact.
                Duration::new((n / 1_000_000_000) as u64, (n % 1_000_000_000) as u32)
            }
            _ => self.max,
        }
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

/// An overall token bucket: `burst` items at once, then one per `1/qps`, reserving ahead.
///
/// Like golang.org/x/time/rate's `Reserve`: the n-th add beyond the burst waits n/qps.
pub struct BucketRateLimiter {
    bucket: TokenBucket,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for BucketRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketRateLimiter")
            .field("unlimited", &self.bucket.is_unlimited())
            .finish_non_exhaustive()
    }
}

impl BucketRateLimiter {
    /// A full bucket of `burst` tokens refilled at `qps` on the real clock.
    ///
    /// A `qps` that is not positive (or NaN) turns the limit off, as the REST client's `--qps 0`.
    pub fn new(qps: f64, burst: u32) -> Self {
        Self::with_clock(qps, burst, Arc::new(RealClock))
    }

    /// Like [`new`](Self::new), timing with `clock`.
    pub fn with_clock(qps: f64, burst: u32, clock: Arc<dyn Clock>) -> Self {
        BucketRateLimiter {
            bucket: TokenBucket::new(qps, burst, clock.now()),
            clock,
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        if self.bucket.is_unlimited() {
            return Duration::ZERO;
        }
        self.bucket.reserve(self.clock.now())
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// The strictest of several limiters: the longest delay, the most requeues.
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// Combines `limiters`; every one of them records every attempt.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        MaxOfRateLimiter { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        // Every limiter is asked (not short-circuited): each records the attempt.
        self.limiters
            .iter()
            .map(|l| l.when(item))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    fn forget(&self, item: &T) {
        for l in &self.limiters {
            l.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// Per-key backoff start, client-go's default: fast first retries for transient conflicts.
pub const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(5);
/// Per-key backoff cap, client-go's default: a broken key is still retried every ~17 min.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(1000);
/// Overall retry rate, client-go's default: bounds the load a storm of failures puts on the server.
pub const DEFAULT_QPS: f64 = 10.0;
/// Overall burst, client-go's default.
pub const DEFAULT_BURST: u32 = 100;

/// client-go's default controller limiter on the real clock: max of exponential(5 ms, 1000 s) and bucket(10/s, 100).
pub fn default_controller_rate_limiter<T: Clone + Eq + Hash + Send + 'static>(
) -> Box<dyn RateLimiter<T>> {
    default_controller_rate_limiter_with_clock(Arc::new(RealClock))
}

/// [`default_controller_rate_limiter`] with its bucket timed by `clock`.
pub fn default_controller_rate_limiter_with_clock<T: Clone + Eq + Hash + Send + 'static>(
    clock: Arc<dyn Clock>,
) -> Box<dyn RateLimiter<T>> {
    Box::new(MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            DEFAULT_BASE_DELAY,
            DEFAULT_MAX_DELAY,
        )),
        Box::new(BucketRateLimiter::with_clock(
            DEFAULT_QPS,
            DEFAULT_BURST,
            clock,
        )),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::clock::ManualClock;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn exponential_doubles_from_5ms_and_caps_at_1000s() {
        let l = ItemExponentialFailureRateLimiter::new(ms(5), Duration::from_secs(1000));
        let expected = [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560];
        for (n, e) in expected.iter().enumerate() {
            assert_eq!(l.when(&"a"), ms(*e), "failure {n}");
            assert_eq!(l.num_requeues(&"a"), n as u32 + 1);
        }
        // 5 ms × 2^17 = 655.36 s is the last step below the cap; 2^18 would be 1310.72 s.
        for _ in 10..17 {
            l.when(&"a");
        }
        assert_eq!(l.when(&"a"), Duration::from_micros(655_360_000));
        assert_eq!(l.when(&"a"), Duration::from_secs(1000));
        // Far past any shift or multiplication overflow it stays at the cap.
        for _ in 0..200 {
            assert_eq!(l.when(&"a"), Duration::from_secs(1000));
        }
        assert_eq!(l.num_requeues(&"a"), 219);
    }

    #[test]
    fn exponential_is_per_item_and_forget_resets() {
        let l = ItemExponentialFailureRateLimiter::new(ms(5), Duration::from_secs(1000));
        assert_eq!(l.when(&"a"), ms(5));
        assert_eq!(l.when(&"a"), ms(10));
        assert_eq!(l.when(&"b"), ms(5));
        l.forget(&"a");
        assert_eq!(l.num_requeues(&"a"), 0);
        assert_eq!(l.when(&"a"), ms(5));
        assert_eq!(l.num_requeues(&"b"), 1);
    }

    #[test]
    fn exponential_survives_huge_counts_and_bases() {
        let l = ItemExponentialFailureRateLimiter::new(Duration::MAX, Duration::from_secs(1));
        assert_eq!(l.when(&1), Duration::from_secs(1));
        l.failures.lock().insert(2, u32::MAX);
        assert_eq!(l.when(&2), Duration::from_secs(1));
        assert_eq!(
            l.num_requeues(&2),
            u32::MAX,
            "saturates instead of wrapping"
        );
    }

    #[test]
    fn bucket_allows_burst_then_spaces_100ms_apart() {
        let clock = Arc::new(ManualClock::new());
        let b = BucketRateLimiter::with_clock(10.0, 100, clock.clone());
        for i in 0..100 {
            assert_eq!(RateLimiter::<u32>::when(&b, &i), Duration::ZERO, "add {i}");
        }
        for n in 1..=5u64 {
            assert_eq!(RateLimiter::<u32>::when(&b, &0), ms(100 * n));
        }
        // 250 ms later 2.5 tokens of the 5-token debt are repaid: the next waits (5-2.5+1)/10 s.
        clock.advance(ms(250));
        assert_eq!(RateLimiter::<u32>::when(&b, &0), ms(350));
        // After a long idle the bucket is full again, never more than `burst`.
        clock.advance(Duration::from_secs(3600));
        for i in 0..100 {
            assert_eq!(RateLimiter::<u32>::when(&b, &i), Duration::ZERO);
        }
        assert_eq!(RateLimiter::<u32>::when(&b, &0), ms(100));
        assert_eq!(RateLimiter::<u32>::num_requeues(&b, &0), 0);
    }

    #[test]
    fn bucket_with_non_positive_qps_never_delays() {
        let b = BucketRateLimiter::with_clock(0.0, 1, Arc::new(ManualClock::new()));
        for i in 0..10 {
            assert_eq!(RateLimiter::<u32>::when(&b, &i), Duration::ZERO);
        }
    }

    #[test]
    fn max_of_takes_the_longest_delay_and_forgets_in_all() {
        let clock = Arc::new(ManualClock::new());
        let l: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(vec![
            Box::new(ItemExponentialFailureRateLimiter::new(ms(5), ms(1000))),
            Box::new(ItemExponentialFailureRateLimiter::new(ms(1), ms(10_000))),
            Box::new(BucketRateLimiter::with_clock(10.0, 2, clock)),
        ]);
        assert_eq!(l.when(&"a"), ms(5)); // 5 / 1 / 0
        assert_eq!(l.when(&"a"), ms(10)); // 10 / 2 / 0
        assert_eq!(l.when(&"a"), ms(100)); // 20 / 4 / 100
        assert_eq!(l.num_requeues(&"a"), 3);
        l.forget(&"a");
        assert_eq!(l.num_requeues(&"a"), 0);
        // The bucket is not reset by forget: its debt is overall, not per item.
        assert_eq!(l.when(&"a"), ms(200));
    }

    #[test]
    fn default_controller_limiter_is_max_of_exponential_and_bucket() {
        let clock = Arc::new(ManualClock::new());
        let l = default_controller_rate_limiter_with_clock::<u32>(clock);
        assert_eq!(l.when(&500), ms(5));
        assert_eq!(l.when(&500), ms(10));
        // 98 more distinct keys use up the burst of 100 at 5 ms each.
        for k in 0..98 {
            assert_eq!(l.when(&k), ms(5));
        }
        // Beyond the burst the bucket dominates a fresh key's 5 ms.
        assert_eq!(l.when(&1000), ms(100));
        assert_eq!(l.when(&1001), ms(200));
        assert_eq!(l.num_requeues(&500), 2);
    }
}
