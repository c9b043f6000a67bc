//! A client-go style workqueue: dedup, processing set, delays, per-key rate limiting.
//!
//! Three stacked layers, each adding one verb, as client-go's `workqueue` package:
//! [`Queue`] (add/get/done with dedup), [`DelayingQueue`] (`add_after`) and
//! [`RateLimitingQueue`] (`add_rate_limited`/`forget`). Retry policy lives apart in
//! [`RateLimiter`] implementations; [`QueueMetrics`] carries client-go's metric names.

mod delaying;
mod metrics;
mod queue;
mod rate_limiter;
mod rate_limiting;

pub use delaying::DelayingQueue;
pub use metrics::QueueMetrics;
pub use queue::Queue;
pub use rate_limiter::{
    default_controller_rate_limiter, default_controller_rate_limiter_with_clock, BucketRateLimiter,
    ItemExponentialFailureRateLimiter, MaxOfRateLimiter, RateLimiter, DEFAULT_BASE_DELAY,
    DEFAULT_BURST, DEFAULT_MAX_DELAY, DEFAULT_QPS,
};
pub use rate_limiting::RateLimitingQueue;
