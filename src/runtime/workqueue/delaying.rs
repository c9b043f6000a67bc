//! The delaying queue: the plain queue plus `add_after`, served by a timer task.
//!
//! Waiting items live in a min-heap of deadlines; a task of a [`Timers`] thread (the
//! controller's shared one, or the queue's own) runs at the earliest deadline (or earlier
//! when an earlier one is added) and moves ready items into the queue. A key already waiting keeps the earlier of its
//! deadlines, as in client-go: a later `add_after` never postpones it.
//!
//! A key can also be *held* until an instant (`hold`): a "not before" that every way in
//! honours — `add`, `add_after`, the timer, and `get` for a key that was queued before the
//! hold — so no path hands it out early. A longer hold moves it later; `release` ends it.
//! The queue does not know why a key is held (a server's `Retry-After`, for the controller).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::metrics::QueueMetrics;
use super::queue::Queue;
use crate::hash::Map;
use crate::runtime::clock::{deadline_after, Clock};
use crate::runtime::timers::{Task, TimerHandle, Timers};

/// Passed holds are dropped when this many are kept (a few bytes each; pruning is O(n)).
const PRUNE_HOLDS_AT: usize = 256;

/// Delays beyond this are clamped, so the deadline never overflows `Instant` (about 100 years).
const MAX_DELAY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A [`Queue`] that can also add an item after a delay.
pub struct DelayingQueue<T> {
    queue: Arc<Queue<T>>,
    timer: Arc<Timer<T>>,
    /// The timer task; taken (cancelled) when the timer stops.
    task: Mutex<Option<TimerHandle>>,
    /// The queue's own timers, when it was not given shared ones: shut down with it.
    own_timers: Option<Arc<Timers>>,
    clock: Arc<dyn Clock>,
    metrics: Arc<QueueMetrics>,
}

/// State shared with the timer task.
struct Timer<T> {
    state: Mutex<TimerState<T>>,
    queue: Arc<Queue<T>>,
}

struct TimerState<T> {
    heap: BinaryHeap<Entry<T>>,
    /// The live deadline of each waiting item; heap entries with another `seq` are stale.
    waiting: Map<T, (Instant, u64)>,
    /// Keys held back until an instant (see [`DelayingQueue::hold`]); pruned when passed.
    holds: Map<T, Instant>,
    next_seq: u64,
    stopped: bool,
}

struct Entry<T> {
    at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    /// Reversed, so `BinaryHeap` pops the earliest deadline (FIFO among equal ones).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

impl<T: Eq + Hash> TimerState<T> {
    /// When `item`'s hold ends, if it has not passed at `now`.
    fn held_until(&self, item: &T, now: Instant) -> Option<Instant> {
        self.holds.get(item).copied().filter(|at| *at > now)
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> DelayingQueue<T> {
    /// A delaying queue with a timer thread of its own, named `workqueue-<name>` (started
    /// by the first delayed add).
    pub fn new(name: &str, clock: Arc<dyn Clock>, metrics: Arc<QueueMetrics>) -> Self {
        let timers = Timers::with_clock(&format!("workqueue-{name}"), clock);
        let mut q = Self::with_timers(&timers, metrics);
        q.own_timers = Some(timers);
        q
    }

    /// A delaying queue whose delays are a task of `timers` (on their clock).
    pub fn with_timers(timers: &Timers, metrics: Arc<QueueMetrics>) -> Self {
        let clock = timers.clock().clone();
        let queue = Arc::new(Queue::new(clock.clone(), metrics.clone()));
        let timer = Arc::new(Timer {
            state: Mutex::new(TimerState {
                heap: BinaryHeap::new(),
                waiting: Map::default(),
                holds: Map::default(),
                next_seq: 0,
                stopped: false,
            }),
            queue: queue.clone(),
        });
        let task = timers.add(timer.clone(), None);
        DelayingQueue {
            queue,
            timer,
            task: Mutex::new(Some(task)),
            own_timers: None,
            clock,
            metrics,
        }
    }

    /// Adds `item` once `delay` has passed on the queue's clock (at once if zero).
    ///
    /// If the item is already waiting, the earlier deadline wins. Ignored after shutdown.
    pub fn add_after(&self, item: T, delay: Duration) {
        if self.queue.is_shutting_down() {
            return;
        }
        // client-go counts every delayed add as a retry.
        self.metrics.retried();
        let now = self.clock.now();
        let at = deadline_after(now, delay.min(MAX_DELAY));
        let s = self.timer.state.lock();
        let at = match s.held_until(&item, now) {
            Some(hold) => at.max(hold),
            None => at,
        };
        if at <= now {
            drop(s);
            self.queue.add(item);
            return;
        }
        self.schedule(s, item, at);
    }

    /// Puts `item` on the timer for `at` (the earlier deadline wins), under `s`.
    fn schedule(&self, mut s: parking_lot::MutexGuard<'_, TimerState<T>>, item: T, at: Instant) {
        if s.stopped {
            return;
        }
        if let Some(&(existing, _)) = s.waiting.get(&item) {
            if existing <= at {
                return;
            }
        }
        let seq = s.next_seq;
        s.next_seq += 1;
        s.waiting.insert(item.clone(), (at, seq));
        s.heap.push(Entry { at, seq, item });
        let earliest = s.heap.peek().is_some_and(|e| e.seq == seq);
        drop(s);
        if earliest {
            if let Some(task) = &*self.task.lock() {
                task.schedule(at);
            }
        }
    }

    /// See [`Queue::add`]; a held item waits for its hold to pass instead.
    pub fn add(&self, item: T) {
        let now = self.clock.now();
        let s = self.timer.state.lock();
        match s.held_until(&item, now) {
            Some(at) => self.schedule(s, item, at),
            None => {
                drop(s);
                self.queue.add(item);
            }
        }
    }

    /// Holds `item` back for `d` from now: until then no add of any kind hands it out (it
    /// waits on the timer instead). A hold that already reaches further stays; a shorter
    /// one never shortens it. Ignored after shutdown.
    pub fn hold(&self, item: T, d: Duration) {
        let now = self.clock.now();
        let at = deadline_after(now, d.min(MAX_DELAY));
        let mut s = self.timer.state.lock();
        if s.stopped {
            return;
        }
        // Holds are few (keys the server throttled); drop the passed ones as new ones come.
        if s.holds.len() >= PRUNE_HOLDS_AT {
            s.holds.retain(|_, until| *until > now);
        }
        let until = s.holds.entry(item).or_insert(at);
        *until = (*until).max(at);
    }

    /// Ends `item`'s hold, if any (the server's reason for it is over).
    pub fn release(&self, item: &T) {
        self.timer.state.lock().holds.remove(item);
    }

    /// When `item`'s hold ends, if it is held now.
    pub fn held_until(&self, item: &T) -> Option<Instant> {
        self.timer.state.lock().held_until(item, self.clock.now())
    }

    /// See [`Queue::get`]. An item queued before it was held is not handed out: it goes
    /// back to wait for its hold, and the next one is taken.
    pub fn get(&self) -> Option<T> {
        loop {
            let item = self.queue.get()?;
            let now = self.clock.now();
            let s = self.timer.state.lock();
            match s.held_until(&item, now) {
                None => return Some(item),
                Some(at) => {
                    self.schedule(s, item.clone(), at);
                    // Not processed: end it without a requeue (the timer brings it back).
                    self.queue.done(&item);
                }
            }
        }
    }

    /// See [`Queue::done`].
    pub fn done(&self, item: &T) {
        self.queue.done(item);
    }

    /// See [`Queue::len`]; items still waiting for their delay are not counted.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// See [`Queue::is_empty`].
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Shuts the queue down (see [`Queue::shutdown`]), drops waiting items and stops the
    /// timer (joining its thread when it is the queue's own).
    pub fn shutdown(&self) {
        self.queue.shutdown();
        self.stop_timer();
    }

    /// Like [`shutdown`](Self::shutdown), then waits for in-flight items (see [`Queue::shutdown_with_drain`]).
    pub fn shutdown_with_drain(&self) {
        // Queue first, so from the first moment of shutdown `add_after` is rejected, not lost.
        self.queue.shutdown_with_drain();
        self.stop_timer();
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.queue.is_shutting_down()
    }

    /// The metrics this queue reports to.
    pub fn metrics(&self) -> &Arc<QueueMetrics> {
        &self.metrics
    }
}

impl<T> DelayingQueue<T> {
    fn stop_timer(&self) {
        {
            let mut s = self.timer.state.lock();
            s.stopped = true;
            s.heap.clear();
            s.waiting.clear();
            s.holds.clear();
        }
        // Held while cancelling, so a concurrent shutdown also returns only once no run of
        // the task is left.
        let mut task = self.task.lock();
        if let Some(t) = task.take() {
            t.cancel();
        }
        if let Some(timers) = &self.own_timers {
            timers.shutdown();
        }
    }
}

impl<T> Drop for DelayingQueue<T> {
    fn drop(&mut self) {
        // The task holds no reference to `self`, so it would otherwise outlive it.
        self.stop_timer();
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> Task for Timer<T> {
    /// Moves ready items into the queue; runs again at the next deadline.
    fn fire(&self, now: Instant) -> Option<Instant> {
        let mut ready = Vec::new();
        let next = {
            let mut s = self.state.lock();
            if s.stopped {
                return None;
            }
            let mut later = Vec::new();
            while s.heap.peek().is_some_and(|e| e.at <= now) {
                let Some(e) = s.heap.pop() else { break };
                if s.waiting.get(&e.item).is_some_and(|w| w.1 == e.seq) {
                    // Held since it was scheduled: it waits for the hold instead.
                    match s.held_until(&e.item, now) {
                        Some(at) => later.push(Entry { at, ..e }),
                        None => {
                            s.waiting.remove(&e.item);
                            ready.push(e.item);
                        }
                    }
                }
            }
            for e in later {
                if let Some(w) = s.waiting.get_mut(&e.item) {
                    w.0 = e.at;
                }
                s.heap.push(e);
            }
            s.heap.peek().map(|e| e.at)
        };
        // Outside the timer lock: `add` takes the queue lock.
        for item in ready {
            self.queue.add(item);
        }
        next
    }
}
