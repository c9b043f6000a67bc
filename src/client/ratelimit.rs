//! The client-side request limit: a token bucket, or none once the server shows it
//! throttles by itself (API Priority and Fairness).
//!
//! Every kube-apiserver since 1.20 protects itself with APF and says so on every answer
//! (`X-Kubernetes-PF-FlowSchema-UID`, `X-Kubernetes-PF-PriorityLevel-UID`); a client-side
//! limit on top only makes the controller slow (1,000 creates at 50/s take 18 s).
//! controller-runtime dropped its default limiter on SIG API Machinery's advice, and Flux
//! turns it off when the server does flow control; so do we, unless told otherwise.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use ureq::http::HeaderMap;

use super::config::Config;
use crate::token_bucket::TokenBucket;

/// Response headers kube-apiserver's APF filter adds to every request it classified.
pub(crate) const FLOW_CONTROL_HEADERS: [&str; 2] = [
    "X-Kubernetes-PF-FlowSchema-UID",
    "X-Kubernetes-PF-PriorityLevel-UID",
];

/// How often a caller waiting for a token checks whether it should give up.
const CANCEL_CHECK: Duration = Duration::from_millis(20);

/// No answer seen yet: the bucket applies (its burst covers a start's first requests).
const UNDECIDED: u8 = 0;
/// The bucket applies for good.
const LIMITED: u8 = 1;
/// No client-side limit.
const OFF: u8 = 2;

/// The request limiter shared by every clone of a client.
pub(crate) struct RequestLimiter {
    bucket: TokenBucket,
    mode: AtomicU8,
    qps: f32,
    burst: u32,
    /// Whether the choice is logged (once per process: a second client stays quiet).
    announce: bool,
}

impl RequestLimiter {
    /// The limiter `config` asks for; logs the choice when it is already made (explicit
    /// limits) and `announce` says so.
    pub(crate) fn new(config: &Config, announce: bool) -> Self {
        let bucket = TokenBucket::new(f64::from(config.qps), config.burst, Instant::now());
        let mode = if bucket.is_unlimited() {
            if announce {
                log::info!("client-side rate limit: off (qps 0)");
            }
            OFF
        } else if !config.detect_flow_control {
            if announce {
                log::info!(
                    "client-side rate limit: {} QPS, burst {} (set explicitly)",
                    config.qps,
                    config.burst.max(1)
                );
            }
            LIMITED
        } else {
            UNDECIDED
        };
        RequestLimiter {
            bucket,
            mode: AtomicU8::new(mode),
            qps: config.qps,
            burst: config.burst.max(1),
            announce,
        }
    }

    /// Blocks until the next request may go out, or until `cancelled` says to give up
    /// (checked every few milliseconds, so a stop is never stuck behind a tiny `qps`);
    /// `false` then.
    pub(crate) fn acquire(&self, cancelled: impl Fn() -> bool) -> bool {
        if self.mode.load(Ordering::Relaxed) == OFF {
            return true;
        }
        let wait = self.bucket.reserve(Instant::now());
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

    /// Looks at an answer's headers; the first answer decides between no limit (the server
    /// does flow control) and the bucket for good, and the choice is logged once.
    pub(crate) fn observe(&self, headers: &HeaderMap) {
        if self.mode.load(Ordering::Relaxed) != UNDECIDED {
            return;
        }
        let flow_control = FLOW_CONTROL_HEADERS
            .iter()
            .any(|h| headers.get(*h).is_some_and(|v| !v.is_empty()));
        let next = if flow_control { OFF } else { LIMITED };
        // Several first answers may race; only the one that decides logs.
        if self
            .mode
            .compare_exchange(UNDECIDED, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
            && self.announce
        {
            if flow_control {
                log::info!(
                    "client-side rate limit: off (the server does API Priority and Fairness)"
                );
            } else {
                log::info!(
                    "client-side rate limit: {} QPS, burst {} (the server shows no API Priority and Fairness; --qps 0 turns it off)",
                    self.qps,
                    self.burst
                );
            }
        }
    }

    /// Whether requests are currently limited on the client side.
    #[cfg(test)]
    pub(crate) fn is_limited(&self) -> bool {
        self.mode.load(Ordering::Relaxed) != OFF
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ureq::http::HeaderValue;

    fn config(qps: f32, detect: bool) -> Config {
        let mut c = Config::new("http://127.0.0.1:1");
        c.qps = qps;
        c.burst = 1;
        c.detect_flow_control = detect;
        c
    }

    fn apf_headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(FLOW_CONTROL_HEADERS[0], HeaderValue::from_static("uid-1"));
        h.insert(FLOW_CONTROL_HEADERS[1], HeaderValue::from_static("uid-2"));
        h
    }

    #[test]
    fn flow_control_headers_turn_the_limit_off() {
        let l = RequestLimiter::new(&config(50.0, true), true);
        assert!(l.is_limited(), "before any answer the bucket applies");
        l.observe(&apf_headers());
        assert!(!l.is_limited());
    }

    #[test]
    fn an_answer_without_the_headers_keeps_the_bucket_for_good() {
        let l = RequestLimiter::new(&config(50.0, true), true);
        l.observe(&HeaderMap::new());
        assert!(l.is_limited());
        // The first answer decided; a later one with the headers does not change it.
        l.observe(&apf_headers());
        assert!(l.is_limited());
    }

    #[test]
    fn explicit_limits_ignore_the_headers() {
        let l = RequestLimiter::new(&config(5.0, false), true);
        l.observe(&apf_headers());
        assert!(l.is_limited());
    }

    #[test]
    fn qps_zero_is_off_whatever_the_server_says() {
        for detect in [true, false] {
            let l = RequestLimiter::new(&config(0.0, detect), true);
            assert!(!l.is_limited());
            l.observe(&HeaderMap::new());
            assert!(!l.is_limited());
        }
    }

    #[test]
    fn a_cancelled_wait_for_a_token_gives_up() {
        let mut c = config(0.001, false);
        c.burst = 1;
        let l = RequestLimiter::new(&c, true);
        assert!(l.acquire(|| false), "the burst is free");
        let started = Instant::now();
        let calls = std::cell::Cell::new(0);
        let cancelled = || {
            calls.set(calls.get() + 1);
            calls.get() > 2
        };
        assert!(!l.acquire(cancelled), "a 1000 s wait ends when cancelled");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn empty_header_values_do_not_count() {
        let l = RequestLimiter::new(&config(50.0, true), true);
        let mut h = HeaderMap::new();
        h.insert(FLOW_CONTROL_HEADERS[0], HeaderValue::from_static(""));
        l.observe(&h);
        assert!(l.is_limited());
    }
}
