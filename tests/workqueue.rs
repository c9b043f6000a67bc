//! Workqueue invariants, named after client-go's tests: dedup, processing set,
//! shutdown, delays on a manual clock, rate-limited retries, metrics, and a seeded
//! concurrency stress test.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use autoregister::runtime::clock::{Clock, ManualClock, RealClock};
use autoregister::runtime::workqueue::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, QueueMetrics,
    RateLimiter, RateLimitingQueue,
};
use crossbeam_channel::{bounded, RecvTimeoutError};

/// How long a step that should happen "at once" may take before the test fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(5);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

type Q = Arc<RateLimitingQueue<&'static str>>;

/// A queue on a manual clock with a 1 ms..1 s exponential limiter.
fn manual_queue(name: &str) -> (Q, Arc<ManualClock>, Arc<QueueMetrics>) {
    let clock = Arc::new(ManualClock::new());
    let metrics = Arc::new(QueueMetrics::new(name, clock.clone()));
    let limiter = Box::new(ItemExponentialFailureRateLimiter::new(ms(1), ms(1000)));
    let q = RateLimitingQueue::new(name, limiter, clock.clone(), metrics.clone());
    (Arc::new(q), clock, metrics)
}

/// Runs `f` on a thread and returns its result, failing the test if it takes longer than `PATIENCE`.
fn within<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = bounded(1);
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(PATIENCE) {
        Ok(r) => r,
        Err(_) => panic!("{what}: did not finish within {PATIENCE:?}"),
    }
}

/// A blocking `get` that fails the test instead of hanging.
fn get(q: &Q) -> Option<&'static str> {
    let q = q.clone();
    within("get", move || q.get())
}

#[test]
fn test_basic_producers_and_consumers() {
    let (q, _, _) = manual_queue("basic");
    let (tx, rx) = crossbeam_channel::unbounded();
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let (q, tx) = (q.clone(), tx.clone());
            thread::spawn(move || {
                while let Some(k) = q.get() {
                    tx.send(k).unwrap();
                    q.done(&k);
                }
            })
        })
        .collect();
    const KEYS: [&str; 5] = ["a", "b", "c", "d", "e"];
    for k in KEYS {
        q.add(k);
    }
    let mut seen: Vec<_> = (0..KEYS.len())
        .map(|_| rx.recv_timeout(PATIENCE).unwrap())
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, KEYS);
    within("shutdown", move || {
        q.shutdown();
        for c in consumers {
            c.join().unwrap();
        }
    });
}

#[test]
fn test_deduping_collapses_adds_of_a_waiting_key() {
    let (q, _, m) = manual_queue("dedup");
    q.add("a");
    q.add("b");
    q.add("a");
    q.add("a");
    assert_eq!(q.len(), 2);
    assert_eq!(get(&q), Some("a"));
    assert_eq!(get(&q), Some("b"));
    assert!(q.is_empty());
    assert_eq!(metric(&m.render_prometheus(), "workqueue_adds_total"), 2.0);
}

#[test]
fn test_add_while_processing_requeues_on_done() {
    let (q, _, _) = manual_queue("addproc");
    q.add("a");
    assert_eq!(get(&q), Some("a"));
    q.add("a");
    assert_eq!(q.len(), 0, "not handed out again while being processed");
    q.done(&"a");
    assert_eq!(q.len(), 1, "queued again by done");
    assert_eq!(get(&q), Some("a"));
    q.done(&"a");
    assert_eq!(q.len(), 0, "done without a new add does not requeue");
}

#[test]
fn test_collapse_while_processing_and_no_second_worker() {
    let (q, _, _) = manual_queue("collapse");
    q.add("a");
    assert_eq!(get(&q), Some("a"));
    q.add("a");
    q.add("a");
    q.add("b");
    // A second worker gets "b": "a" is unavailable while the first worker holds it.
    assert_eq!(get(&q), Some("b"));
    assert!(q.is_empty());
    q.done(&"a");
    assert_eq!(q.len(), 1, "the adds while processing collapsed into one");
    assert_eq!(get(&q), Some("a"));
}

#[test]
fn test_get_blocks_until_add() {
    let (q, _, _) = manual_queue("blocking");
    let (tx, rx) = bounded(1);
    let waiter = {
        let q = q.clone();
        thread::spawn(move || tx.send(q.get()).unwrap())
    };
    q.add("a");
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), Some("a"));
    waiter.join().unwrap();
}

#[test]
fn test_shutdown_wakes_every_waiter() {
    let (q, _, _) = manual_queue("wakeall");
    let (started_tx, started_rx) = crossbeam_channel::unbounded();
    let (done_tx, done_rx) = crossbeam_channel::unbounded();
    for _ in 0..8 {
        let (q, started_tx, done_tx) = (q.clone(), started_tx.clone(), done_tx.clone());
        thread::spawn(move || {
            started_tx.send(()).unwrap();
            done_tx.send(q.get()).unwrap();
        });
    }
    for _ in 0..8 {
        started_rx.recv_timeout(PATIENCE).unwrap();
    }
    q.shutdown();
    for _ in 0..8 {
        assert_eq!(done_rx.recv_timeout(PATIENCE).unwrap(), None);
    }
    assert!(q.is_shutting_down());
}

#[test]
fn test_adds_after_shutdown_are_ignored() {
    let (q, clock, _) = manual_queue("late");
    q.add("a");
    q.shutdown();
    q.add("b");
    q.add_after("c", ms(1));
    q.add_rate_limited("d");
    clock.advance(ms(1000));
    assert_eq!(q.len(), 0, "queued items are dropped at shutdown");
    assert_eq!(get(&q), None, "get reports shutdown at once");
}

#[test]
fn test_shutdown_drops_a_long_queue_and_in_flight_items_finish() {
    let (q, _, _) = manual_queue("stop");
    for i in 0..5_000 {
        let name: &'static str = Box::leak(format!("n{i}").into_boxed_str());
        q.add(name);
    }
    let first = get(&q).expect("an item");
    q.shutdown();
    assert_eq!(
        get(&q),
        None,
        "no new item after shutdown, however long the queue"
    );
    assert_eq!(q.len(), 0);
    q.add(first);
    q.done(&first);
    assert_eq!(
        get(&q),
        None,
        "an add during processing is not requeued after shutdown"
    );
}

#[test]
fn test_queue_drainage_using_shutdown_with_drain() {
    let (q, _, _) = manual_queue("drain");
    q.add("a");
    q.add("b");
    q.add("q");
    assert_eq!(get(&q), Some("a"));
    assert_eq!(get(&q), Some("b"));
    let (tx, rx) = bounded(1);
    {
        let q = q.clone();
        thread::spawn(move || {
            q.shutdown_with_drain();
            tx.send(()).unwrap();
        });
    }
    // Wait until the drain has begun, then check it is still waiting for the two items.
    wait_for("drain to begin", || q.is_shutting_down());
    q.add("c");
    assert_eq!(q.len(), 1, "adds are ignored while draining");
    assert_eq!(
        get(&q),
        Some("q"),
        "queued items are still handed out while draining"
    );
    q.done(&"q");
    q.done(&"a");
    assert_eq!(
        rx.recv_timeout(ms(50)),
        Err(RecvTimeoutError::Timeout),
        "returned with b still in flight"
    );
    q.done(&"b");
    rx.recv_timeout(PATIENCE)
        .expect("shutdown_with_drain returns once everything is done");
    assert_eq!(get(&q), None);
}

#[test]
fn test_force_queue_shutdown_using_shutdown() {
    let (q, _, _) = manual_queue("force");
    q.add("a");
    assert_eq!(get(&q), Some("a"));
    let (tx, rx) = bounded(1);
    {
        let q = q.clone();
        thread::spawn(move || {
            q.shutdown_with_drain();
            tx.send(()).unwrap();
        });
    }
    wait_for("drain to begin", || q.is_shutting_down());
    q.shutdown();
    rx.recv_timeout(PATIENCE)
        .expect("a plain shutdown releases a draining caller");
}

#[test]
fn test_shutdown_with_drain_on_idle_queue_returns_at_once() {
    let (q, _, _) = manual_queue("idle");
    within("drain", move || q.shutdown_with_drain());
}

#[test]
fn test_delaying_queue_simple_add_after() {
    let (q, clock, _) = manual_queue("simple");
    q.add_after("a", ms(50));
    q.add_after("marker", ms(49));
    assert!(q.is_empty());
    clock.advance(ms(49));
    assert_eq!(get(&q), Some("marker"));
    assert!(q.is_empty(), "a is not due before 50 ms");
    clock.advance(ms(1));
    assert_eq!(get(&q), Some("a"));
    assert!(q.is_empty());
}

#[test]
fn test_add_after_zero_adds_at_once() {
    let (q, _, _) = manual_queue("zero");
    q.add_after("a", Duration::ZERO);
    assert_eq!(q.len(), 1);
}

#[test]
fn test_add_after_earlier_deadline_wins() {
    let (q, clock, _) = manual_queue("earlier");
    q.add_after("a", ms(20));
    q.add_after("a", ms(10));
    q.add_after("marker", ms(20));
    clock.advance(ms(10));
    assert_eq!(get(&q), Some("a"), "moved earlier to 10 ms");
    q.done(&"a");
    clock.advance(ms(10));
    assert_eq!(get(&q), Some("marker"));
    // "a" would have been added before "marker" in the same pass had its 20 ms entry survived.
    assert!(
        q.is_empty(),
        "the superseded 20 ms deadline does not add a again"
    );
}

#[test]
fn test_add_after_later_deadline_is_ignored() {
    let (q, clock, _) = manual_queue("later");
    q.add_after("a", ms(10));
    q.add_after("a", ms(20));
    q.add_after("marker", ms(20));
    clock.advance(ms(10));
    assert_eq!(get(&q), Some("a"), "kept its earlier deadline");
    q.done(&"a");
    clock.advance(ms(10));
    assert_eq!(get(&q), Some("marker"));
    assert!(
        q.is_empty(),
        "the later add_after was dropped, not kept as a second entry"
    );
}

#[test]
fn test_copy_shifting_ready_items_come_out_in_deadline_order() {
    let (q, clock, _) = manual_queue("shift");
    q.add_after("first", ms(3000));
    q.add_after("second", ms(2000));
    q.add_after("third", ms(1000));
    clock.advance(ms(3000));
    assert_eq!(get(&q), Some("third"));
    assert_eq!(get(&q), Some("second"));
    assert_eq!(get(&q), Some("first"));
}

#[test]
fn test_add_after_on_real_clock_earlier_item_wakes_the_timer() {
    let clock: Arc<dyn Clock> = Arc::new(RealClock);
    let metrics = Arc::new(QueueMetrics::new("real", clock.clone()));
    let limiter = Box::new(ItemExponentialFailureRateLimiter::new(ms(1), ms(10)));
    let q: Q = Arc::new(RateLimitingQueue::new("real", limiter, clock, metrics));
    // Once "first" is out, the timer thread has computed its next deadline (none) and sleeps on it.
    q.add_after("first", ms(1));
    assert_eq!(get(&q), Some("first"));
    let start = Instant::now();
    q.add_after("late", Duration::from_secs(60));
    q.add_after("soon", ms(5));
    // A sleeping timer must be woken by each earlier deadline, or "soon" never comes.
    assert_eq!(get(&q), Some("soon"));
    assert!(start.elapsed() >= ms(5));
    assert!(q.is_empty());
    q.shutdown();
}

#[test]
fn test_a_held_key_waits_for_its_hold_on_a_plain_add() {
    let (q, clock, _) = manual_queue("hold-add");
    q.hold("a", ms(50));
    q.add("a");
    q.add_after("marker", ms(49));
    assert!(q.is_empty(), "a plain add of a held key does not queue it");
    clock.advance(ms(49));
    assert_eq!(get(&q), Some("marker"));
    assert!(q.is_empty(), "a is held until 50 ms");
    clock.advance(ms(1));
    assert_eq!(get(&q), Some("a"));
}

#[test]
fn test_a_longer_hold_moves_it_later_and_a_shorter_one_does_not_shorten_it() {
    let (q, clock, _) = manual_queue("hold-longer");
    q.hold("a", ms(50));
    q.hold("a", ms(100));
    q.hold("a", ms(10));
    q.add("a");
    q.add_after("marker", ms(99));
    clock.advance(ms(99));
    assert_eq!(get(&q), Some("marker"));
    assert!(q.is_empty(), "held until 100 ms");
    clock.advance(ms(1));
    assert_eq!(get(&q), Some("a"));
}

#[test]
fn test_a_hold_reaches_a_key_already_waiting_or_already_queued() {
    let (q, clock, _) = manual_queue("hold-existing");
    // Waiting on the timer for 10 ms, then held until 50 ms.
    q.add_after("a", ms(10));
    // Queued before its hold.
    q.add("b");
    q.hold("a", ms(50));
    q.hold("b", ms(30));
    q.add("marker");
    assert_eq!(
        get(&q),
        Some("marker"),
        "b, queued before its hold, is not handed out"
    );
    q.done(&"marker");
    clock.advance(ms(10));
    q.add_after("marker2", ms(1));
    clock.advance(ms(1));
    assert_eq!(get(&q), Some("marker2"), "a's 10 ms deadline is held back");
    clock.advance(ms(19));
    assert_eq!(get(&q), Some("b"), "b at 30 ms");
    clock.advance(ms(20));
    assert_eq!(get(&q), Some("a"), "a at 50 ms");
}

#[test]
fn test_a_key_added_while_processing_and_held_is_not_requeued_on_done() {
    let (q, clock, _) = manual_queue("hold-processing");
    q.add("a");
    assert_eq!(get(&q), Some("a"));
    q.hold("a", ms(40));
    // A watch event for the name while its write is being answered.
    q.add("a");
    q.done(&"a");
    q.add("marker");
    assert_eq!(get(&q), Some("marker"));
    assert!(q.is_empty(), "a waits for its hold");
    clock.advance(ms(40));
    assert_eq!(get(&q), Some("a"));
}

#[test]
fn test_forget_ends_the_hold() {
    let (q, _, _) = manual_queue("hold-forget");
    q.hold("a", ms(1000));
    assert!(q.held_until(&"a").is_some());
    q.forget(&"a");
    assert_eq!(q.held_until(&"a"), None);
    q.add("a");
    assert_eq!(q.len(), 1, "a success clears the server's not-before");
}

#[test]
fn test_rate_limiting_queue() {
    let (q, clock, _) = manual_queue("ratelimit");
    q.add_rate_limited("one"); // 1 ms
    assert_eq!(q.num_requeues(&"one"), 1);
    q.add_rate_limited("one"); // 2 ms: later than the waiting 1 ms, ignored
    assert_eq!(q.num_requeues(&"one"), 2);
    q.add_rate_limited("two"); // 1 ms
    q.add_rate_limited("two"); // 2 ms
    q.add_rate_limited("two"); // 4 ms
    assert_eq!(q.num_requeues(&"two"), 3);
    assert!(q.is_empty());
    clock.advance(ms(1));
    assert_eq!(get(&q), Some("one"));
    assert_eq!(get(&q), Some("two"));
    q.forget(&"one");
    assert_eq!(q.num_requeues(&"one"), 0);
    assert_eq!(q.num_requeues(&"two"), 3);
    q.done(&"one");
    q.add_rate_limited("one"); // back to 1 ms after forget
    clock.advance(ms(1));
    assert_eq!(get(&q), Some("one"));
}

#[test]
fn retry_after_floors_the_backoff_and_still_counts_the_failure() {
    let (q, clock, _) = manual_queue("floor");
    // Retry-After: 0 waits the limiter's delay (1 ms here), not zero.
    q.add_rate_limited_at_least("zero", Duration::ZERO);
    assert_eq!(q.num_requeues(&"zero"), 1);
    assert!(q.is_empty(), "no immediate retry");
    clock.advance(ms(1));
    assert_eq!(get(&q), Some("zero"));
    q.done(&"zero");
    // A floor above the limiter's delay wins, and the failure still counts.
    q.add_rate_limited_at_least("floored", ms(50));
    assert_eq!(q.num_requeues(&"floored"), 1);
    clock.advance(ms(49));
    assert!(q.is_empty());
    clock.advance(ms(1));
    assert_eq!(get(&q), Some("floored"));
    q.done(&"floored");
}

#[test]
fn test_default_limiter_queue_with_defaults() {
    let q = Arc::new(RateLimitingQueue::with_defaults("defaults"));
    q.add_rate_limited("a"); // 5 ms on the real clock
    let q2 = q.clone();
    assert_eq!(within("get", move || q2.get()), Some("a"));
    assert_eq!(q.num_requeues(&"a"), 1);
    assert!(q
        .metrics()
        .render_prometheus()
        .contains("name=\"defaults\""));
    q.shutdown();
}

/// The live threads whose name is `name` (Linux truncates thread names to 15 bytes).
#[cfg(target_os = "linux")]
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

#[cfg(target_os = "linux")]
#[test]
fn test_shutdown_and_drop_stop_the_timer_thread() {
    // A thread names itself once running, and its /proc entry may outlive the join by a moment:
    // poll both ways. Without the stop on drop the timer thread would wait forever.
    let running = |name: &'static str| wait_for(name, move || threads_named(name) == 1);
    let gone = |name: &'static str| wait_for(name, move || threads_named(name) == 0);

    let (q, _, _) = manual_queue("leak1");
    q.add_after("a", ms(1000));
    running("workqueue-leak1");
    q.shutdown();
    gone("workqueue-leak1");

    let (q, _, _) = manual_queue("leak2");
    q.add_after("a", ms(1000));
    running("workqueue-leak2");
    drop(q);
    gone("workqueue-leak2");

    let (q, _, _) = manual_queue("leak3");
    running("workqueue-leak3");
    q.shutdown_with_drain();
    gone("workqueue-leak3");
}

/// The value of the sample `sample`: a full name with labels, or a bare metric name.
fn metric(text: &str, sample: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            let bare = name.split('{').next()?;
            (name == sample || bare == sample).then(|| value.parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no sample {sample} in\n{text}"))
}

#[test]
fn test_metrics_after_scripted_sequence() {
    let (q, clock, m) = manual_queue("scripted");
    let at = |text: &str, name: &str, want: f64| {
        let got = metric(text, name);
        assert!((got - want).abs() < 1e-9, "{name}: {got} != {want}\n{text}");
    };
    q.add("a");
    q.add("b");
    q.add("a"); // collapses: not an add
    let t = m.render_prometheus();
    at(&t, "workqueue_adds_total", 2.0);
    at(&t, "workqueue_depth", 2.0);

    clock.advance(ms(1)); // t = 1 ms
    assert_eq!(get(&q), Some("a")); // waited 1 ms
    clock.advance(ms(2)); // t = 3 ms
    assert_eq!(get(&q), Some("b")); // waited 3 ms
    q.add("a"); // while processing: counted, waits in dirty
    clock.advance(ms(4)); // t = 7 ms
    let t = m.render_prometheus();
    at(&t, "workqueue_adds_total", 3.0);
    at(&t, "workqueue_depth", 1.0);
    at(&t, "workqueue_unfinished_work_seconds", 0.010); // a 6 ms + b 4 ms
    at(&t, "workqueue_longest_running_processor_seconds", 0.006);

    q.done(&"a"); // worked 6 ms, requeued
    assert_eq!(get(&q), Some("a")); // waited 4 ms since its add at 3 ms
    q.done(&"a"); // worked 0
    q.done(&"b"); // worked 4 ms
    q.add_rate_limited("c"); // a retry, still waiting
    q.add_after("d", Duration::ZERO); // a retry and an add
    let t = m.render_prometheus();
    at(&t, "workqueue_adds_total", 4.0);
    at(&t, "workqueue_depth", 1.0);
    at(&t, "workqueue_retries_total", 2.0);
    at(&t, "workqueue_unfinished_work_seconds", 0.0);
    at(&t, "workqueue_longest_running_processor_seconds", 0.0);
    let qd = "workqueue_queue_duration_seconds";
    at(
        &t,
        &format!("{qd}_bucket{{name=\"scripted\",le=\"0.0001\"}}"),
        0.0,
    );
    at(
        &t,
        &format!("{qd}_bucket{{name=\"scripted\",le=\"0.001\"}}"),
        1.0,
    );
    at(
        &t,
        &format!("{qd}_bucket{{name=\"scripted\",le=\"0.01\"}}"),
        3.0,
    );
    at(
        &t,
        &format!("{qd}_bucket{{name=\"scripted\",le=\"+Inf\"}}"),
        3.0,
    );
    at(&t, &format!("{qd}_sum"), 0.008);
    at(&t, &format!("{qd}_count"), 3.0);
    let wd = "workqueue_work_duration_seconds";
    at(
        &t,
        &format!("{wd}_bucket{{name=\"scripted\",le=\"1e-06\"}}"),
        1.0,
    );
    at(
        &t,
        &format!("{wd}_bucket{{name=\"scripted\",le=\"0.001\"}}"),
        1.0,
    );
    at(
        &t,
        &format!("{wd}_bucket{{name=\"scripted\",le=\"0.01\"}}"),
        3.0,
    );
    at(&t, &format!("{wd}_sum"), 0.010);
    at(&t, &format!("{wd}_count"), 3.0);
    // Every family is typed once, and every sample carries the queue's name.
    for family in [
        "workqueue_depth gauge",
        "workqueue_adds_total counter",
        "workqueue_queue_duration_seconds histogram",
        "workqueue_work_duration_seconds histogram",
        "workqueue_unfinished_work_seconds gauge",
        "workqueue_longest_running_processor_seconds gauge",
        "workqueue_retries_total counter",
    ] {
        assert_eq!(
            t.matches(&format!("# TYPE {family}\n")).count(),
            1,
            "{family}"
        );
    }
    assert!(t
        .lines()
        .filter(|l| !l.starts_with('#'))
        .all(|l| l.contains("{name=\"scripted\"")));
}

/// Polls `cond` until it holds, failing the test after `PATIENCE`.
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_micros(200));
    }
}

// ---------------------------------------------------------------------------
// Concurrency stress: a seeded random schedule, repeated.

/// A tiny xorshift64 PRNG: reproducible schedules without a crate.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const KEYS: usize = 16;
const WORKERS: usize = 8;
const PRODUCERS: usize = 4;
const OPS_PER_PRODUCER: usize = 100;
const ITERATIONS: u64 = 200;

/// What the test observed, for checking the invariants.
struct Tracker {
    /// A global logical clock ordering adds and gets.
    tick: AtomicU64,
    /// Adds of each key, counted before the add call (so a get never sees fewer than caused it).
    adds: Vec<AtomicU64>,
    gets: Vec<AtomicU64>,
    /// Tick just before each key's latest add, and at its latest get.
    last_add: Vec<AtomicU64>,
    last_get: Vec<AtomicU64>,
    in_progress: Vec<AtomicBool>,
    in_flight: AtomicUsize,
    /// Set once producers are done: workers stop re-adding so the run settles.
    draining: AtomicBool,
    violations: parking_lot::Mutex<Vec<String>>,
}

impl Tracker {
    fn new() -> Self {
        let zeros = || (0..KEYS).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        Tracker {
            tick: AtomicU64::new(0),
            adds: zeros(),
            gets: zeros(),
            last_add: zeros(),
            last_get: zeros(),
            in_progress: (0..KEYS).map(|_| AtomicBool::new(false)).collect(),
            in_flight: AtomicUsize::new(0),
            draining: AtomicBool::new(false),
            violations: parking_lot::Mutex::new(Vec::new()),
        }
    }

    fn note_add(&self, k: usize) {
        self.adds[k].fetch_add(1, SeqCst);
        let t = self.tick.fetch_add(1, SeqCst) + 1;
        self.last_add[k].fetch_max(t, SeqCst);
    }

    fn violation(&self, v: String) {
        self.violations.lock().push(v);
    }

    /// Every key added was handed out at least once after its latest add.
    fn all_served(&self) -> bool {
        (0..KEYS).all(|k| {
            let a = self.last_add[k].load(SeqCst);
            a == 0 || self.last_get[k].load(SeqCst) > a
        })
    }
}

fn stress_worker(q: Arc<RateLimitingQueue<usize>>, tr: Arc<Tracker>, seed: u64) {
    let mut rng = XorShift::new(seed);
    while let Some(k) = q.get() {
        tr.in_flight.fetch_add(1, SeqCst);
        let t = tr.tick.fetch_add(1, SeqCst) + 1;
        tr.last_get[k].fetch_max(t, SeqCst);
        if tr.in_progress[k].swap(true, SeqCst) {
            tr.violation(format!("key {k} handed to two workers at once"));
        }
        let gets = tr.gets[k].fetch_add(1, SeqCst) + 1;
        let adds = tr.adds[k].load(SeqCst);
        if gets > adds {
            tr.violation(format!("key {k} handed out {gets} times for {adds} adds"));
        }
        if q.len() > KEYS {
            tr.violation(format!("{} queued items for {KEYS} keys", q.len()));
        }
        let readd = !tr.draining.load(SeqCst);
        match rng.below(8) {
            0..=2 if readd && q.num_requeues(&k) < 3 => {
                tr.note_add(k);
                q.add_rate_limited(k);
            }
            3 if readd => {
                // Add while processing: must wait for our done.
                tr.note_add(k);
                q.add(k);
            }
            4 => thread::yield_now(),
            _ => q.forget(&k),
        }
        // Cleared before done: after done another worker may legitimately take it.
        tr.in_progress[k].store(false, SeqCst);
        q.done(&k);
        tr.in_flight.fetch_sub(1, SeqCst);
    }
}

fn stress_iteration(seed: u64) -> (u64, Vec<String>) {
    let clock: Arc<dyn Clock> = Arc::new(RealClock);
    let metrics = Arc::new(QueueMetrics::new("stress", clock.clone()));
    // Tiny delays so rate-limited re-adds go through the timer thread many times per run.
    let limiter: Box<dyn RateLimiter<usize>> = Box::new(MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_micros(20),
            ms(1),
        )),
        Box::new(BucketRateLimiter::with_clock(50_000.0, 20, clock.clone())),
    ]));
    let q = Arc::new(RateLimitingQueue::new("stress", limiter, clock, metrics));
    let tr = Arc::new(Tracker::new());

    let workers: Vec<_> = (0..WORKERS as u64)
        .map(|w| {
            let (q, tr) = (q.clone(), tr.clone());
            thread::spawn(move || stress_worker(q, tr, seed * 1000 + w))
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS as u64)
        .map(|p| {
            let (q, tr) = (q.clone(), tr.clone());
            thread::spawn(move || {
                let mut rng = XorShift::new(seed * 1000 + 100 + p);
                for _ in 0..OPS_PER_PRODUCER {
                    let k = rng.below(KEYS as u64) as usize;
                    tr.note_add(k);
                    match rng.below(4) {
                        0 => q.add_rate_limited(k),
                        _ => q.add(k),
                    }
                    if rng.below(16) == 0 {
                        thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }

    // Settle: no re-adds from now on; wait until every add has been served and no worker is busy.
    tr.draining.store(true, SeqCst);
    let deadline = Instant::now() + PATIENCE;
    while !(tr.in_flight.load(SeqCst) == 0 && tr.all_served()) {
        if !tr.violations.lock().is_empty() {
            break;
        }
        if Instant::now() > deadline {
            tr.violation(format!("seed {seed}: added keys were never processed"));
            break;
        }
        thread::sleep(Duration::from_micros(100));
    }
    q.shutdown_with_drain();
    for w in workers {
        w.join().unwrap();
    }
    if !tr.all_served() {
        tr.violation(format!(
            "seed {seed}: a key was not processed after its last add"
        ));
    }
    let total_gets = tr.gets.iter().map(|g| g.load(SeqCst)).sum();
    let violations = std::mem::take(&mut *tr.violations.lock());
    (total_gets, violations)
}

#[test]
fn test_concurrent_stress_seeded_schedules() {
    let (tx, rx) = bounded(1);
    thread::spawn(move || {
        let mut total = 0;
        for seed in 1..=ITERATIONS {
            let (gets, violations) = stress_iteration(seed);
            if !violations.is_empty() {
                let _ = tx.send(Err(format!("seed {seed}: {violations:?}")));
                return;
            }
            total += gets;
        }
        let _ = tx.send(Ok(total));
    });
    // A watchdog: a deadlock fails the test instead of hanging it.
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(total)) => {
            // Producers alone add PRODUCERS × OPS per run; dedup collapses many, but work was done.
            assert!(total >= ITERATIONS * KEYS as u64 / 2, "only {total} gets");
        }
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("stress run deadlocked (no result within 60 s)"),
    }
}
