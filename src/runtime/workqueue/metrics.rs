//! Workqueue metrics with client-go's names, rendered in the Prometheus text format.

use crate::prometheus::escape_label;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::runtime::clock::Clock;

/// Upper bounds of the histogram buckets in nanoseconds: client-go's 1e-6 s × 10, 10 buckets.
const BUCKET_BOUNDS_NANOS: [u64; 10] = [
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
    100_000_000_000,
    1_000_000_000_000,
];

/// The same bounds as Prometheus `le` labels, spelled as Go's client prints them.
const BUCKET_LABELS: [&str; 10] = [
    "1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1", "1", "10", "100", "1000",
];

/// A duration histogram with fixed buckets, updated with atomics only.
#[derive(Debug, Default)]
struct Histogram {
    /// Per-bucket counts, not cumulative; the render accumulates.
    buckets: [AtomicU64; 10],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    fn observe(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if let Some(i) = BUCKET_BOUNDS_NANOS.iter().position(|&b| nanos <= b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, metric: &str, help: &str, name: &str) {
        header(out, metric, help, "histogram");
        let mut cumulative = 0;
        for (bucket, le) in self.buckets.iter().zip(BUCKET_LABELS) {
            cumulative += bucket.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "{metric}_bucket{{name=\"{name}\",le=\"{le}\"}} {cumulative}"
            );
        }
        let count = self.count.load(Ordering::Relaxed);
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(
            out,
            "{metric}_bucket{{name=\"{name}\",le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(out, "{metric}_sum{{name=\"{name}\"}} {sum}");
        let _ = writeln!(out, "{metric}_count{{name=\"{name}\"}} {count}");
    }
}

/// The metrics of one workqueue, labelled `name="<queue name>"`; shared by the queue and `/metrics`.
pub struct QueueMetrics {
    /// The queue name, already escaped for a label value.
    name: String,
    clock: Arc<dyn Clock>,
    depth: AtomicI64,
    adds: AtomicU64,
    retries: AtomicU64,
    queue_duration: Histogram,
    work_duration: Histogram,
    /// When each in-flight item started, as a multiset: unfinished and longest-running
    /// work are computed from it at render time.
    processing: Mutex<BTreeMap<Instant, u32>>,
}

impl std::fmt::Debug for QueueMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueMetrics")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl QueueMetrics {
    /// Fresh metrics for the queue `name`, timing with `clock` (the queue's clock).
    pub fn new(name: &str, clock: Arc<dyn Clock>) -> Self {
        QueueMetrics {
            name: escape_label(name),
            clock,
            depth: AtomicI64::new(0),
            adds: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            queue_duration: Histogram::default(),
            work_duration: Histogram::default(),
            processing: Mutex::new(BTreeMap::new()),
        }
    }

    /// An item entered the dirty set.
    pub(crate) fn added(&self) {
        self.adds.fetch_add(1, Ordering::Relaxed);
        self.depth.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` items left the dirty set unprocessed (dropped at shutdown).
    pub(crate) fn dropped(&self, n: usize) {
        self.depth
            .fetch_sub(i64::try_from(n).unwrap_or(i64::MAX), Ordering::Relaxed);
    }

    /// An item was handed to a worker after waiting `queued`, starting at `started`.
    pub(crate) fn got(&self, queued: Duration, started: Instant) {
        self.depth.fetch_sub(1, Ordering::Relaxed);
        self.queue_duration.observe(queued);
        *self.processing.lock().entry(started).or_insert(0) += 1;
    }

    /// A worker finished the item it started at `started`; `now` is the queue clock's time.
    pub(crate) fn done(&self, started: Instant, now: Instant) {
        self.work_duration
            .observe(now.saturating_duration_since(started));
        let mut p = self.processing.lock();
        if let Some(n) = p.get_mut(&started) {
            *n -= 1;
            if *n == 0 {
                p.remove(&started);
            }
        }
    }

    /// An item was re-added through the delaying queue.
    pub(crate) fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// All seven metric families in the Prometheus text exposition format.
    pub fn render_prometheus(&self) -> String {
        let now = self.clock.now();
        let (unfinished, longest) = {
            let p = self.processing.lock();
            // A fold from +0: `sum()` of no items is -0.0, which renders as `-0`.
            let unfinished: f64 = p.iter().fold(0.0, |acc, (s, n)| {
                acc + now.saturating_duration_since(*s).as_secs_f64() * f64::from(*n)
            });
            let longest = p
                .keys()
                .next()
                .map_or(0.0, |s| now.saturating_duration_since(*s).as_secs_f64());
            (unfinished, longest)
        };
        let name = &self.name;
        let mut out = String::with_capacity(4096);
        gauge(
            &mut out,
            "workqueue_depth",
            "Current depth of workqueue",
            "gauge",
            name,
            self.depth.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            "counter",
            name,
            self.adds.load(Ordering::Relaxed),
        );
        self.queue_duration.render(
            &mut out,
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            name,
        );
        self.work_duration.render(
            &mut out,
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            name,
        );
        gauge(
            &mut out,
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
            "gauge",
            name,
            unfinished,
        );
        gauge(
            &mut out,
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            "gauge",
            name,
            longest,
        );
        gauge(
            &mut out,
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            "counter",
            name,
            self.retries.load(Ordering::Relaxed),
        );
        out
    }
}

fn header(out: &mut String, metric: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {metric} {help}");
    let _ = writeln!(out, "# TYPE {metric} {kind}");
}

fn gauge(
    out: &mut String,
    metric: &str,
    help: &str,
    kind: &str,
    name: &str,
    value: impl std::fmt::Display,
) {
    header(out, metric, help, kind);
    let _ = writeln!(out, "{metric}{{name=\"{name}\"}} {value}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::clock::ManualClock;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn histogram_buckets_are_inclusive_and_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_nanos(1_000)); // exactly 1e-06
        h.observe(ms(1)); // exactly 0.001
        h.observe(ms(2));
        h.observe(Duration::from_secs(5000)); // beyond the last bucket: only +Inf
        let mut out = String::new();
        h.render(&mut out, "m", "help", "q");
        assert!(
            out.contains("m_bucket{name=\"q\",le=\"1e-06\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("m_bucket{name=\"q\",le=\"0.0001\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("m_bucket{name=\"q\",le=\"0.001\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("m_bucket{name=\"q\",le=\"0.01\"} 3\n"),
            "{out}"
        );
        assert!(
            out.contains("m_bucket{name=\"q\",le=\"1000\"} 3\n"),
            "{out}"
        );
        assert!(
            out.contains("m_bucket{name=\"q\",le=\"+Inf\"} 4\n"),
            "{out}"
        );
        assert!(out.contains("m_sum{name=\"q\"} 5000.003001\n"), "{out}");
        assert!(out.contains("m_count{name=\"q\"} 4\n"), "{out}");
    }

    #[test]
    fn unfinished_and_longest_running_are_computed_at_render_time() {
        let clock = Arc::new(ManualClock::new());
        let m = QueueMetrics::new("q", clock.clone());
        let t0 = clock.now();
        m.got(Duration::ZERO, t0);
        clock.advance(ms(1000));
        m.got(Duration::ZERO, clock.now());
        m.got(Duration::ZERO, clock.now()); // two items started at the same instant
        clock.advance(ms(500));
        let out = m.render_prometheus();
        // 1.5 + 0.5 + 0.5 seconds of unfinished work; the oldest has run 1.5 s.
        assert!(
            out.contains("workqueue_unfinished_work_seconds{name=\"q\"} 2.5\n"),
            "{out}"
        );
        assert!(out.contains("workqueue_longest_running_processor_seconds{name=\"q\"} 1.5\n"));
        m.done(t0, clock.now());
        let out = m.render_prometheus();
        assert!(
            out.contains("workqueue_unfinished_work_seconds{name=\"q\"} 1\n"),
            "{out}"
        );
        assert!(out.contains("workqueue_longest_running_processor_seconds{name=\"q\"} 0.5\n"));
    }

    #[test]
    fn label_values_are_escaped() {
        let m = QueueMetrics::new("a\"b\\c\nd", Arc::new(ManualClock::new()));
        assert!(m
            .render_prometheus()
            .contains("workqueue_depth{name=\"a\\\"b\\\\c\\nd\"} 0\n"));
    }
}
