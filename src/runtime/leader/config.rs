//! Timing of leader election; the defaults are client-go's (and DESIGN's) numbers.

use std::time::Duration;

/// Jitter factor of the acquire loop: a candidate waits `[retry, 2.2 × retry)` between
/// tries (client-go's `JitterFactor`), so candidates started together do not collide forever.
pub const ACQUIRE_JITTER: f64 = 1.2;

/// Longest time the release write may take: a stopping process (SIGTERM, 30 s grace at
/// most) must exit promptly even when the server does not answer; the lease then simply
/// runs out.
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(1);

/// Shortest request timeout outside the renew deadline's squeeze (client-go's floor).
const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// Lease duration, renew deadline and retry period.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderConfig {
    /// How long others wait, after observing a renewal, before taking over (15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives leadership up (10 s).
    pub renew_deadline: Duration,
    /// Interval between attempts to acquire or renew (2 s).
    pub retry_period: Duration,
}

impl Default for LeaderConfig {
    fn default() -> Self {
        LeaderConfig {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaderConfig {
    /// Checks client-go's invariants: all positive, `lease_duration > renew_deadline >
    /// 1.2 × retry_period`. A leader must give up (renew deadline) before others may take
    /// over (lease duration), or two leaders overlap.
    pub fn validate(&self) -> Result<(), String> {
        if self.retry_period.is_zero() {
            return Err("leader election: retry period must be positive".into());
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(format!(
                "leader election: lease duration ({:?}) must be greater than the renew deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.renew_deadline.as_secs_f64() <= ACQUIRE_JITTER * self.retry_period.as_secs_f64() {
            return Err(format!(
                "leader election: renew deadline ({:?}) must be greater than {ACQUIRE_JITTER} × the retry period ({:?})",
                self.renew_deadline, self.retry_period
            ));
        }
        Ok(())
    }

    /// `leaseDurationSeconds` to write: the lease duration rounded up to whole seconds.
    pub fn lease_duration_seconds(&self) -> i32 {
        let d = self.lease_duration;
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
    }

    /// Total time one lease request may take: half the renew deadline, at least 1 s
    /// (client-go's `resourcelock.NewFromKubeconfig`). A leader squeezes it further so that
    /// a hung request never carries it past its renew deadline.
    pub fn request_timeout(&self) -> Duration {
        (self.renew_deadline / 2).max(MIN_REQUEST_TIMEOUT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn defaults_are_designs_numbers() {
        let c = LeaderConfig::default();
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert_eq!(c.retry_period, Duration::from_secs(2));
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.lease_duration_seconds(), 15);
        assert_eq!(c.request_timeout(), Duration::from_secs(5));
    }

    #[test]
    fn invalid_orders_are_refused() {
        let bad = |l, r, p| LeaderConfig {
            lease_duration: ms(l),
            renew_deadline: ms(r),
            retry_period: ms(p),
        };
        assert!(bad(10_000, 10_000, 2_000).validate().is_err());
        assert!(bad(15_000, 2_400, 2_000).validate().is_err());
        assert!(bad(15_000, 10_000, 0).validate().is_err());
        assert_eq!(bad(1_000, 600, 100).validate(), Ok(()));
    }

    #[test]
    fn short_durations_round_up_to_a_second() {
        let c = LeaderConfig {
            lease_duration: ms(1_500),
            renew_deadline: ms(600),
            retry_period: ms(100),
        };
        assert_eq!(c.lease_duration_seconds(), 2);
        assert_eq!(c.request_timeout(), Duration::from_secs(1));
        let tiny = LeaderConfig {
            lease_duration: ms(300),
            ..c
        };
        assert_eq!(tiny.lease_duration_seconds(), 1);
    }
}
