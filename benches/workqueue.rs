//! Workqueue throughput: add/get/done cycles per second with 1, 2 and 8 workers over
//! 100k keys, beside a plain `Mutex<VecDeque>` + `Condvar` queue measured in the same
//! run, so the cost of the semantics (dedup, processing set, metrics) is visible.
//!
//! Run with `cargo bench --bench workqueue` (or `make bench`).

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use autoregister::runtime::clock::{Clock, RealClock};
use autoregister::runtime::workqueue::{
    default_controller_rate_limiter, QueueMetrics, RateLimitingQueue,
};
use parking_lot::{Condvar, Mutex};

const KEYS: u64 = 100_000;
const ROUNDS: usize = 7;

/// The baseline: a FIFO with shutdown and nothing else.
struct PlainQueue {
    state: Mutex<(VecDeque<u64>, bool)>,
    cv: Condvar,
}

impl PlainQueue {
    fn new() -> Self {
        PlainQueue {
            state: Mutex::new((VecDeque::new(), false)),
            cv: Condvar::new(),
        }
    }
    fn add(&self, k: u64) {
        self.state.lock().0.push_back(k);
        self.cv.notify_one();
    }
    fn get(&self) -> Option<u64> {
        let mut s = self.state.lock();
        while s.0.is_empty() && !s.1 {
            self.cv.wait(&mut s);
        }
        s.0.pop_front()
    }
    fn done(&self, _k: &u64) {}
    fn shutdown(&self) {
        self.state.lock().1 = true;
        self.cv.notify_all();
    }
}

/// What the benchmark needs of a queue.
trait BenchQueue: Send + Sync + 'static {
    fn add(&self, k: u64);
    fn get(&self) -> Option<u64>;
    fn done(&self, k: &u64);
    fn shutdown(&self);
}

impl BenchQueue for PlainQueue {
    fn add(&self, k: u64) {
        PlainQueue::add(self, k)
    }
    fn get(&self) -> Option<u64> {
        PlainQueue::get(self)
    }
    fn done(&self, k: &u64) {
        PlainQueue::done(self, k)
    }
    fn shutdown(&self) {
        PlainQueue::shutdown(self)
    }
}

impl BenchQueue for RateLimitingQueue<u64> {
    fn add(&self, k: u64) {
        RateLimitingQueue::add(self, k)
    }
    fn get(&self) -> Option<u64> {
        RateLimitingQueue::get(self)
    }
    fn done(&self, k: &u64) {
        RateLimitingQueue::done(self, k)
    }
    fn shutdown(&self) {
        RateLimitingQueue::shutdown(self)
    }
}

/// One producer adds `KEYS` distinct keys while `workers` threads get and done them;
/// timed from the first add until every worker has seen shutdown.
fn run<Q: BenchQueue>(q: Arc<Q>, workers: usize) -> Duration {
    let barrier = Arc::new(Barrier::new(workers + 1));
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let (q, barrier) = (q.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                let mut n = 0u64;
                while let Some(k) = q.get() {
                    n += black_box(k) & 1;
                    q.done(&k);
                }
                n
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for k in 0..KEYS {
        q.add(k);
    }
    // Shutdown lets workers drain what is queued, then their `get` returns None.
    q.shutdown();
    let processed: u64 = handles.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    let elapsed = start.elapsed();
    assert_eq!(processed, KEYS / 2, "every key processed exactly once");
    elapsed
}

fn workqueue() -> Arc<RateLimitingQueue<u64>> {
    let clock: Arc<dyn Clock> = Arc::new(RealClock);
    let metrics = Arc::new(QueueMetrics::new("bench", clock.clone()));
    Arc::new(RateLimitingQueue::new(
        "bench",
        default_controller_rate_limiter(),
        clock,
        metrics,
    ))
}

/// The median of `times`, as cycles per second.
fn rate(mut times: Vec<Duration>) -> f64 {
    times.sort_unstable();
    KEYS as f64 / times[times.len() / 2].as_secs_f64()
}

fn main() {
    println!(
        "workqueue add/get/done cycles per second, {KEYS} keys, median of {ROUNDS} runs, {} CPUs",
        thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:>8} {:>16} {:>16} {:>8}",
        "workers", "workqueue/s", "baseline/s", "ratio"
    );
    for workers in [1, 2, 8] {
        // Interleaved rounds, so background load on a shared machine hits both alike.
        let (mut base, mut wq) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            base.push(run(Arc::new(PlainQueue::new()), workers));
            wq.push(run(workqueue(), workers));
        }
        let (base, wq) = (rate(base), rate(wq));
        println!("{workers:>8} {wq:>16.0} {base:>16.0} {:>8.2}", wq / base);
    }
}
