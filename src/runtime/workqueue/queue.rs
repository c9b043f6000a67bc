//! The plain work queue: a FIFO with a dirty set (dedup) and a processing set.
//!
//! The invariants, as client-go's `workqueue.Type`:
//! - an item is in the FIFO at most once (the dirty set collapses duplicate adds);
//! - an item is never handed to two workers at once: one added while it is being
//!   processed waits in the dirty set and goes back into the FIFO on `done`;
//! - after `shutdown` adds are ignored, queued items are dropped and `get` returns
//!   `None` at once: stop means stop, a controller told to stop (SIGTERM, lost
//!   leadership) must not work through a long queue first. `shutdown_with_drain`
//!   is client-go's `ShutDownWithDrain`: queued items are still handed out and the
//!   caller waits until every one is done.

use std::collections::VecDeque;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::metrics::QueueMetrics;
use crate::hash::Map;
use crate::runtime::clock::Clock;

/// Capacity (items) above which an emptied queue gives its tables back: a start with
/// thousands of names leaves a FIFO and a dirty set sized for all of them (~100 bytes a
/// name) that a steady state of a few adds at a time never needs again.
const KEEP_CAPACITY: usize = 1024;

/// A FIFO work queue with client-go's dedup and processing semantics.
pub struct Queue<T> {
    state: Mutex<State<T>>,
    /// Workers blocked in `get`.
    ready: Condvar,
    /// A caller of `shutdown_with_drain` waiting for the processing set to empty.
    drained: Condvar,
    clock: Arc<dyn Clock>,
    metrics: Arc<QueueMetrics>,
}

struct State<T> {
    queue: VecDeque<T>,
    /// Items that need processing, with the instant they were added (for the queue-duration metric).
    dirty: Map<T, Instant>,
    /// Items handed to a worker and not yet done, with the instant they were handed out.
    processing: Map<T, Instant>,
    shutting_down: bool,
    drain: bool,
}

impl<T: Eq + Hash> State<T> {
    /// Frees tables much larger than needed (only when empty: no rehash of live items).
    fn release_capacity(&mut self) {
        if self.queue.capacity() > KEEP_CAPACITY {
            self.queue = VecDeque::new();
        }
        if self.dirty.capacity() > KEEP_CAPACITY {
            self.dirty = Map::default();
        }
        if self.processing.is_empty() && self.processing.capacity() > KEEP_CAPACITY {
            self.processing = Map::default();
        }
    }
}

impl<T: Clone + Eq + Hash> Queue<T> {
    /// An empty queue timing with `clock` and reporting to `metrics`.
    pub fn new(clock: Arc<dyn Clock>, metrics: Arc<QueueMetrics>) -> Self {
        Queue {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: Map::default(),
                processing: Map::default(),
                shutting_down: false,
                drain: false,
            }),
            ready: Condvar::new(),
            drained: Condvar::new(),
            clock,
            metrics,
        }
    }

    /// Marks `item` as needing processing; a no-op if it already does or the queue is shutting down.
    pub fn add(&self, item: T) {
        let mut guard = self.state.lock();
        let s = &mut *guard;
        if s.shutting_down {
            return;
        }
        let std::collections::hash_map::Entry::Vacant(slot) = s.dirty.entry(item) else {
            return;
        };
        self.metrics.added();
        // Requeued by `done` if being processed, so no second worker gets it meanwhile.
        let queue = !s.processing.contains_key(slot.key());
        if queue {
            s.queue.push_back(slot.key().clone());
        }
        slot.insert(self.clock.now());
        drop(guard);
        if queue {
            self.ready.notify_one();
        }
    }

    /// Blocks until an item is available and hands it out; `None` once shut down (after a
    /// drain, once the FIFO is empty).
    ///
    /// The caller must call [`done`](Self::done) with the item when finished with it.
    pub fn get(&self) -> Option<T> {
        let mut s = self.state.lock();
        while s.queue.is_empty() && !s.shutting_down {
            self.ready.wait(&mut s);
        }
        if s.shutting_down && !s.drain {
            return None;
        }
        let item = s.queue.pop_front()?;
        let now = self.clock.now();
        let added = s.dirty.remove(&item).unwrap_or(now);
        self.metrics.got(now.saturating_duration_since(added), now);
        s.processing.insert(item.clone(), now);
        Some(item)
    }

    /// Marks `item` as no longer being processed; if it was added meanwhile it is queued again.
    ///
    /// A `done` for an item that is not being processed is ignored.
    pub fn done(&self, item: &T) {
        let mut s = self.state.lock();
        let Some(started) = s.processing.remove(item) else {
            return;
        };
        self.metrics.done(started, self.clock.now());
        let requeued = s.dirty.contains_key(item);
        if requeued {
            s.queue.push_back(item.clone());
        } else if s.queue.is_empty() && s.dirty.is_empty() {
            s.release_capacity();
        }
        let drained = s.drain && s.processing.is_empty() && s.queue.is_empty();
        drop(s);
        if requeued {
            self.ready.notify_one();
        }
        if drained {
            self.drained.notify_all();
        }
    }

    /// The number of items waiting to be handed out (not counting those being processed).
    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Whether no item is waiting to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops accepting adds, drops every queued item and wakes every waiter: `get` returns
    /// `None` from now on. Items being processed stay so until their `done`.
    pub fn shutdown(&self) {
        let mut s = self.state.lock();
        s.shutting_down = true;
        // A plain shutdown also releases a caller blocked in `shutdown_with_drain`.
        s.drain = false;
        s.queue.clear();
        self.metrics.dropped(s.dirty.len());
        s.dirty.clear();
        drop(s);
        self.ready.notify_all();
        self.drained.notify_all();
    }

    /// Stops accepting adds, keeps handing out what is queued (client-go's
    /// `ShutDownWithDrain`) and blocks until the FIFO is empty and every item handed out is
    /// done; a plain [`shutdown`](Self::shutdown) meanwhile drops the rest and releases it.
    ///
    /// Must not be called from a worker holding an item: it would wait for itself.
    pub fn shutdown_with_drain(&self) {
        let mut s = self.state.lock();
        s.shutting_down = true;
        s.drain = true;
        self.ready.notify_all();
        while s.drain && !(s.processing.is_empty() && s.queue.is_empty()) {
            self.drained.wait(&mut s);
        }
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.state.lock().shutting_down
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::clock::ManualClock;

    fn queue() -> Queue<&'static str> {
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
        let metrics = Arc::new(QueueMetrics::new("t", clock.clone()));
        Queue::new(clock, metrics)
    }

    #[test]
    fn fifo_order_and_dedup() {
        let q = queue();
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        assert_eq!(q.get(), Some("a"));
        assert_eq!(q.get(), Some("b"));
        assert!(q.is_empty());
    }

    #[test]
    fn an_emptied_queue_gives_back_the_tables_of_a_burst() {
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
        let metrics = Arc::new(QueueMetrics::new("t", clock.clone()));
        let q: Queue<u32> = Queue::new(clock, metrics);
        for i in 0..5000 {
            q.add(i);
        }
        let capacity = |q: &Queue<u32>| {
            let s = q.state.lock();
            (s.queue.capacity(), s.dirty.capacity())
        };
        assert!(capacity(&q).0 >= 5000 && capacity(&q).1 >= 5000);
        for _ in 0..4999 {
            let i = q.get().unwrap();
            q.done(&i);
        }
        assert!(capacity(&q).1 >= 5000, "kept while items wait");
        let last = q.get().unwrap();
        q.add(last);
        q.done(&last);
        assert!(capacity(&q).1 >= 5000, "kept while an item is requeued");
        let last = q.get().unwrap();
        q.done(&last);
        let (fifo, dirty) = capacity(&q);
        assert!(
            fifo <= KEEP_CAPACITY && dirty <= KEEP_CAPACITY,
            "{fifo} {dirty}"
        );
        // Still a queue.
        q.add(7);
        assert_eq!(q.get(), Some(7));
    }

    #[test]
    fn done_for_an_item_not_processing_is_ignored() {
        let q = queue();
        q.add("a");
        q.done(&"a");
        assert_eq!(q.len(), 1, "still queued once, not duplicated");
    }

    #[test]
    fn get_after_shutdown_drops_queued_items() {
        let q = queue();
        q.add("a");
        q.add("b");
        q.shutdown();
        q.add("c");
        assert_eq!(q.get(), None, "queued items are dropped, not drained");
        assert!(q.is_empty());
    }
}
