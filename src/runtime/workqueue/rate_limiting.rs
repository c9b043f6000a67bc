//! The rate-limiting queue: the delaying queue plus retries paced by a [`RateLimiter`].

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use super::delaying::DelayingQueue;
use super::metrics::QueueMetrics;
use super::rate_limiter::{
    default_controller_rate_limiter, default_controller_rate_limiter_with_clock, RateLimiter,
};
use crate::runtime::clock::{Clock, RealClock};
use crate::runtime::timers::Timers;

/// The full workqueue stack: dedup, processing set, delays and per-item retry backoff.
///
/// Shared between producers and workers as an `Arc`; every method takes `&self`.
pub struct RateLimitingQueue<T> {
    queue: DelayingQueue<T>,
    limiter: Box<dyn RateLimiter<T>>,
}

impl<T: Clone + Eq + Hash + Send + 'static> RateLimitingQueue<T> {
    /// A queue named `name` (its timer thread's name) pacing retries with `limiter`.
    pub fn new(
        name: &str,
        limiter: Box<dyn RateLimiter<T>>,
        clock: Arc<dyn Clock>,
        metrics: Arc<QueueMetrics>,
    ) -> Self {
        RateLimitingQueue {
            queue: DelayingQueue::new(name, clock, metrics),
            limiter,
        }
    }

    /// A queue on the real clock with client-go's default controller limiter and fresh metrics.
    pub fn with_defaults(name: &str) -> Self {
        let clock: Arc<dyn Clock> = Arc::new(RealClock);
        let metrics = Arc::new(QueueMetrics::new(name, clock.clone()));
        Self::new(name, default_controller_rate_limiter(), clock, metrics)
    }

    /// As [`with_defaults`](Self::with_defaults), its delays a task of `timers` (on their
    /// clock) instead of a thread of its own.
    pub fn with_timers(name: &str, timers: &Timers) -> Self {
        let clock = timers.clock().clone();
        let metrics = Arc::new(QueueMetrics::new(name, clock.clone()));
        RateLimitingQueue {
            queue: DelayingQueue::with_timers(timers, metrics),
            limiter: default_controller_rate_limiter_with_clock(clock),
        }
    }

    /// Adds `item` after the delay the limiter picks for it (and records the attempt).
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.limiter.when(&item);
        self.queue.add_after(item, delay);
    }

    /// Like [`add_rate_limited`](Self::add_rate_limited), but no sooner than `at_least`
    /// (a server's `Retry-After`). The attempt counts like any other, so `Retry-After` floors
    /// the backoff and never replaces it: `Retry-After: 0` cannot become a hot loop, and a
    /// key answered `Retry-After: 1` forever still backs off exponentially.
    pub fn add_rate_limited_at_least(&self, item: T, at_least: Duration) {
        let delay = self.limiter.when(&item).max(at_least);
        self.queue.add_after(item, delay);
    }

    /// Clears `item`'s retry history and ends its hold, if any (call after it was processed
    /// successfully: whatever held it back is over).
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
        self.queue.release(item);
    }

    /// See [`DelayingQueue::hold`]: no path hands `item` out before `d` has passed.
    pub fn hold(&self, item: T, d: Duration) {
        self.queue.hold(item, d);
    }

    /// See [`DelayingQueue::held_until`].
    pub fn held_until(&self, item: &T) -> Option<std::time::Instant> {
        self.queue.held_until(item)
    }

    /// How many times `item` was re-added rate limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.limiter.num_requeues(item)
    }

    /// See [`DelayingQueue::add_after`].
    pub fn add_after(&self, item: T, delay: Duration) {
        self.queue.add_after(item, delay);
    }

    /// Marks `item` as needing processing; duplicates collapse. Ignored after shutdown.
    pub fn add(&self, item: T) {
        self.queue.add(item);
    }

    /// Blocks until an item is available; `None` once shut down and drained.
    ///
    /// An item is never handed to two callers at once; call [`done`](Self::done) when finished.
    pub fn get(&self) -> Option<T> {
        self.queue.get()
    }

    /// Ends processing of `item`; if it was added meanwhile it is queued again.
    pub fn done(&self, item: &T) {
        self.queue.done(item);
    }

    /// The number of items ready to be handed out.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no item is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Stops accepting adds, wakes every waiter, drops delayed items and joins the timer thread.
    pub fn shutdown(&self) {
        self.queue.shutdown();
    }

    /// Like [`shutdown`](Self::shutdown), then blocks until every handed-out item is done.
    ///
    /// Must not be called from a worker holding an item: it would wait for itself.
    pub fn shutdown_with_drain(&self) {
        self.queue.shutdown_with_drain();
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.queue.is_shutting_down()
    }

    /// The metrics this queue reports to (render them for `/metrics`).
    pub fn metrics(&self) -> &Arc<QueueMetrics> {
        self.queue.metrics()
    }
}
