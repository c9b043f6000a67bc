//! Exponential backoff with a health reset: the pure policy the reflector waits by.

use std::time::{Duration, Instant};

/// Shape of an exponential backoff; the defaults are client-go's reflector numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct BackoffConfig {
    /// First delay (800 ms: client-go's reflector, short enough to recover fast).
    pub initial: Duration,
    /// Multiplier per consecutive failure (×2).
    pub factor: f64,
    /// Largest delay before jitter (30 s: a down server is asked twice a minute at most).
    pub max: Duration,
    /// Health for this long forgets earlier failures (2 min, as client-go).
    pub reset_after: Duration,
    /// Jitter factor: a delay `d` becomes a uniform wait in `[d, d + jitter·d)` (1.0 as
    /// client-go, so many clients restarted together do not retry in lockstep).
    pub jitter: f64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_millis(800),
            factor: 2.0,
            max: Duration::from_secs(30),
            reset_after: Duration::from_secs(120),
            jitter: 1.0,
        }
    }
}

/// Consecutive-failure state; every method takes the current instant, so tests move time.
#[derive(Clone, Debug)]
pub struct Backoff {
    config: BackoffConfig,
    /// Failures since the last reset.
    steps: u32,
    /// When the current healthy stretch began, if we are healthy.
    healthy_since: Option<Instant>,
}

impl Backoff {
    /// A backoff with no failures recorded.
    pub fn new(config: BackoffConfig) -> Self {
        Backoff {
            config,
            steps: 0,
            healthy_since: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &BackoffConfig {
        &self.config
    }

    /// Consecutive failures counted so far.
    pub fn steps(&self) -> u32 {
        self.steps
    }

    /// Records that things work at `now`; starts a healthy stretch if none is running.
    pub fn success(&mut self, now: Instant) {
        if self.healthy_since.is_none() {
            self.healthy_since = Some(now);
        }
    }

    /// Records a failure at `now` and answers the delay before the next attempt, without
    /// jitter. A healthy stretch of `reset_after` or more before it starts over from `initial`.
    pub fn failure(&mut self, now: Instant) -> Duration {
        if let Some(since) = self.healthy_since.take() {
            if now.saturating_duration_since(since) >= self.config.reset_after {
                self.steps = 0;
            }
        }
        let delay = self.delay_for(self.steps);
        // Stop counting once capped: the delay no longer grows and the counter cannot overflow.
        if delay < self.config.max {
            self.steps = self.steps.saturating_add(1);
        }
        delay
    }

    /// Forgets every failure.
    pub fn reset(&mut self) {
        self.steps = 0;
        self.healthy_since = None;
    }

    fn delay_for(&self, steps: u32) -> Duration {
        let c = &self.config;
        // In whole nanoseconds, so 800 ms × 2^n comes out exact.
        let nanos = c.initial.as_nanos() as f64 * c.factor.max(1.0).powi(steps.min(1_000) as i32);
        if !nanos.is_finite() || nanos >= c.max.as_nanos() as f64 {
            c.max
        } else {
            Duration::from_nanos(nanos.round() as u64).min(c.max)
        }
    }
}

/// Spreads `d` over `[d, d + jitter·d)` using `unit`, a uniform number in `[0, 1)`.
pub fn jittered(d: Duration, jitter: f64, unit: f64) -> Duration {
    if jitter <= 0.0 || !jitter.is_finite() {
        return d;
    }
    let extra = d.as_nanos() as f64 * jitter * unit.clamp(0.0, 1.0);
    d + Duration::from_nanos(extra.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn defaults_are_client_go_reflector_numbers() {
        let c = BackoffConfig::default();
        assert_eq!(c.initial, ms(800));
        assert_eq!(c.factor, 2.0);
        assert_eq!(c.max, Duration::from_secs(30));
        assert_eq!(c.reset_after, Duration::from_secs(120));
        assert_eq!(c.jitter, 1.0);
    }

    #[test]
    fn doubles_from_800ms_and_caps_at_30s() {
        let mut b = Backoff::new(BackoffConfig::default());
        let t = Instant::now();
        let got: Vec<Duration> = (0..10).map(|i| b.failure(t + ms(i))).collect();
        let want = [
            800, 1_600, 3_200, 6_400, 12_800, 25_600, 30_000, 30_000, 30_000, 30_000,
        ];
        assert_eq!(got, want.iter().map(|&m| ms(m)).collect::<Vec<_>>());
    }

    #[test]
    fn capped_backoff_never_overflows() {
        let mut b = Backoff::new(BackoffConfig::default());
        let t = Instant::now();
        for _ in 0..100_000 {
            b.failure(t);
        }
        assert_eq!(b.failure(t), Duration::from_secs(30));
        assert!(b.steps() < 10);
    }

    #[test]
    fn two_minutes_of_health_reset_the_delay() {
        let mut b = Backoff::new(BackoffConfig::default());
        let t0 = Instant::now();
        for _ in 0..5 {
            b.failure(t0);
        }
        b.success(t0 + Duration::from_secs(1));
        // A later success does not move the start of the healthy stretch.
        b.success(t0 + Duration::from_secs(60));
        assert_eq!(b.failure(t0 + Duration::from_secs(121)), ms(800));
        assert_eq!(b.failure(t0 + Duration::from_secs(122)), ms(1_600));
    }

    #[test]
    fn short_health_does_not_reset() {
        let mut b = Backoff::new(BackoffConfig::default());
        let t0 = Instant::now();
        assert_eq!(b.failure(t0), ms(800));
        assert_eq!(b.failure(t0), ms(1_600));
        b.success(t0 + Duration::from_secs(10));
        assert_eq!(b.failure(t0 + Duration::from_secs(129)), ms(3_200));
        // The failure ended that healthy stretch: a new one starts at the next success.
        b.success(t0 + Duration::from_secs(130));
        assert_eq!(b.failure(t0 + Duration::from_secs(249)), ms(6_400));
        b.success(t0 + Duration::from_secs(250));
        assert_eq!(b.failure(t0 + Duration::from_secs(370)), ms(800));
    }

    #[test]
    fn time_without_any_success_is_not_health() {
        let mut b = Backoff::new(BackoffConfig::default());
        let t0 = Instant::now();
        b.failure(t0);
        assert_eq!(b.failure(t0 + Duration::from_secs(600)), ms(1_600));
    }

    #[test]
    fn reset_forgets_failures() {
        let mut b = Backoff::new(BackoffConfig::default());
        let t0 = Instant::now();
        b.failure(t0);
        b.failure(t0);
        b.reset();
        assert_eq!(b.steps(), 0);
        assert_eq!(b.failure(t0), ms(800));
    }

    #[test]
    fn jitter_one_spreads_over_d_to_2d() {
        assert_eq!(jittered(ms(800), 1.0, 0.0), ms(800));
        assert_eq!(jittered(ms(800), 1.0, 0.5), ms(1_200));
        let top = jittered(ms(800), 1.0, 0.999_999);
        assert!(top < ms(1_600) && top > ms(1_599), "{top:?}");
        assert_eq!(jittered(ms(30_000), 1.0, 0.25), ms(37_500));
        assert_eq!(jittered(ms(800), 0.0, 0.9), ms(800));
        assert_eq!(jittered(ms(800), 0.5, 0.5), ms(1_000));
    }

    #[test]
    fn custom_config_is_honoured() {
        let mut b = Backoff::new(BackoffConfig {
            initial: ms(10),
            factor: 3.0,
            max: ms(100),
            reset_after: ms(50),
            jitter: 0.0,
        });
        let t0 = Instant::now();
        assert_eq!(b.failure(t0), ms(10));
        assert_eq!(b.failure(t0), ms(30));
        assert_eq!(b.failure(t0), ms(90));
        assert_eq!(b.failure(t0), ms(100));
        b.success(t0);
        assert_eq!(b.failure(t0 + ms(50)), ms(10));
    }
}
