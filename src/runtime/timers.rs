//! One thread for everything that only waits.
//!
//! A delaying queue's deadlines, a reflector's resync, polling CA files and pacing Events
//! each used to own a thread that slept until its next deadline. They are tasks of one
//! [`Timers`] thread instead: it sleeps on its clock until the earliest deadline of any task
//! (or until one is moved earlier), runs every due task, and asks each when it wants to run
//! next. A task runs on that one thread, so it must be short; the longest (writing one Event)
//! is bounded by its request timeout.

use std::sync::Arc;
use std::thread::{JoinHandle, ThreadId};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::clock::{Clock, RealClock, Wakeup};
use crate::hash::Map;

/// Work a [`Timers`] thread runs at a deadline.
pub trait Task: Send + Sync + 'static {
    /// Runs the task at `now`; answers when it wants to run next (`None`: not until
    /// [`TimerHandle::schedule`] asks).
    fn fire(&self, now: Instant) -> Option<Instant>;
}

/// The thread shared by timed tasks. Started by the first [`add`](Self::add); stopped (and
/// joined) by [`shutdown`](Self::shutdown) or when the last handle to it is dropped.
pub struct Timers {
    shared: Arc<Shared>,
    name: String,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    clock: Arc<dyn Clock>,
    /// Wakes the thread: a deadline moved earlier, or stop.
    wakeup: Arc<Wakeup>,
    state: Mutex<State>,
    /// Notified whenever a task's run ends, for [`TimerHandle::cancel`].
    ran: Condvar,
}

#[derive(Default)]
struct State {
    tasks: Map<u64, Entry>,
    next_id: u64,
    /// The task running now, and the thread running it.
    running: Option<(u64, ThreadId)>,
    stopped: bool,
}

struct Entry {
    task: Arc<dyn Task>,
    /// When it runs next; `None`: when scheduled.
    at: Option<Instant>,
}

/// One task of a [`Timers`]; dropping it removes the task.
pub struct TimerHandle {
    id: u64,
    shared: Arc<Shared>,
}

impl Timers {
    /// Timers on the real clock whose thread is named `name`.
    pub fn new(name: &str) -> Arc<Timers> {
        Self::with_clock(name, Arc::new(RealClock))
    }

    /// Timers whose deadlines are on `clock` (tests move a manual one).
    pub fn with_clock(name: &str, clock: Arc<dyn Clock>) -> Arc<Timers> {
        Arc::new(Timers {
            shared: Arc::new(Shared {
                clock,
                wakeup: Arc::new(Wakeup::new()),
                state: Mutex::new(State::default()),
                ran: Condvar::new(),
            }),
            name: name.to_string(),
            thread: Mutex::new(None),
        })
    }

    /// The clock the deadlines are on.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.clock
    }

    /// Adds `task`, first run at `at` (`None`: when scheduled). After
    /// [`shutdown`](Self::shutdown) the task never runs.
    pub fn add(&self, task: Arc<dyn Task>, at: Option<Instant>) -> TimerHandle {
        let id = {
            let mut s = self.shared.state.lock();
            let id = s.next_id;
            s.next_id += 1;
            if !s.stopped {
                s.tasks.insert(id, Entry { task, at });
            }
            id
        };
        self.ensure_thread();
        self.shared.wakeup.wake();
        TimerHandle {
            id,
            shared: self.shared.clone(),
        }
    }

    fn ensure_thread(&self) {
        let mut thread = self.thread.lock();
        if thread.is_some() || self.shared.state.lock().stopped {
            return;
        }
        let shared = self.shared.clone();
        match std::thread::Builder::new()
            .name(self.name.clone())
            .spawn(move || shared.run())
        {
            Ok(h) => *thread = Some(h),
            // Out of threads: no timer fires; say so rather than pretend.
            Err(e) => log::error!("cannot start the {} thread: {e}", self.name),
        }
    }

    /// Stops the thread (a task running finishes first) and waits for it. Idempotent.
    pub fn shutdown(&self) {
        {
            let mut s = self.shared.state.lock();
            s.stopped = true;
            s.tasks.clear();
        }
        self.shared.wakeup.wake();
        if let Some(t) = self.thread.lock().take() {
            if t.thread().id() != std::thread::current().id() {
                // A panic in a task was already reported on stderr; nothing to add.
                let _ = t.join();
            }
        }
    }
}

impl Drop for Timers {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for Timers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timers").field("name", &self.name).finish()
    }
}

impl Shared {
    fn run(&self) {
        loop {
            let (due, next) = {
                let mut s = self.state.lock();
                if s.stopped {
                    return;
                }
                let now = self.clock.now();
                let mut due: Option<(u64, Instant)> = None;
                let mut next: Option<Instant> = None;
                for (id, e) in &s.tasks {
                    match e.at {
                        Some(at) if at <= now && due.is_none_or(|(_, d)| at < d) => {
                            due = Some((*id, at));
                        }
                        Some(at) if at > now && next.is_none_or(|n| at < n) => next = Some(at),
                        _ => {}
                    }
                }
                let due = due.and_then(|(id, _)| {
                    let e = s.tasks.get_mut(&id)?;
                    e.at = None;
                    let task = e.task.clone();
                    s.running = Some((id, std::thread::current().id()));
                    Some((id, task))
                });
                (due, next)
            };
            let Some((id, task)) = due else {
                self.clock.wait(&self.wakeup, next);
                continue;
            };
            let again = task.fire(self.clock.now());
            let mut s = self.state.lock();
            s.running = None;
            if let (Some(e), Some(again)) = (s.tasks.get_mut(&id), again) {
                // A schedule during the run keeps its deadline if that is earlier.
                e.at = Some(e.at.map_or(again, |at| at.min(again)));
            }
            drop(s);
            self.ran.notify_all();
        }
    }
}

impl TimerHandle {
    /// Runs the task no later than `at` (a deadline already earlier stays).
    pub fn schedule(&self, at: Instant) {
        let wake = {
            let mut s = self.shared.state.lock();
            match s.tasks.get_mut(&self.id) {
                Some(e) if e.at.is_none_or(|cur| at < cur) => {
                    e.at = Some(at);
                    true
                }
                _ => false,
            }
        };
        if wake {
            self.shared.wakeup.wake();
        }
    }

    /// Runs the task as soon as the thread is free, unless a run is already scheduled (for
    /// a task that does at each run all there is to do, and schedules the next run itself).
    pub fn wake_if_idle(&self) {
        let wake = {
            let mut s = self.shared.state.lock();
            match s.tasks.get_mut(&self.id) {
                Some(e) if e.at.is_none() => {
                    e.at = Some(self.shared.clock.now());
                    true
                }
                _ => false,
            }
        };
        if wake {
            self.shared.wakeup.wake();
        }
    }

    /// Runs the task as soon as the thread is free.
    pub fn schedule_now(&self) {
        self.schedule(self.shared.clock.now());
    }

    /// Removes the task; a run in progress on another thread is waited for, so nothing of
    /// the task runs once this returns (from the task itself, it returns at once).
    pub fn cancel(&self) {
        let mut s = self.shared.state.lock();
        s.tasks.remove(&self.id);
        while s
            .running
            .is_some_and(|(id, t)| id == self.id && t != std::thread::current().id())
        {
            self.shared.ran.wait(&mut s);
        }
    }
}

impl Drop for TimerHandle {
    fn drop(&mut self) {
        self.cancel();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::runtime::clock::ManualClock;

    /// Counts its runs and asks to run again every `every` (if set).
    struct Counter {
        runs: AtomicUsize,
        every: Option<Duration>,
    }

    impl Task for Counter {
        fn fire(&self, now: Instant) -> Option<Instant> {
            self.runs.fetch_add(1, Ordering::SeqCst);
            self.every.map(|d| now + d)
        }
    }

    fn counter(every: Option<Duration>) -> Arc<Counter> {
        Arc::new(Counter {
            runs: AtomicUsize::new(0),
            every,
        })
    }

    /// Waits (real time, bounded) until `f` holds.
    fn eventually(f: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !f() {
            assert!(std::time::Instant::now() < deadline, "condition never held");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_task_runs_at_its_deadline_and_again_when_it_asks() {
        let clock = Arc::new(ManualClock::new());
        let timers = Timers::with_clock("t", clock.clone());
        let c = counter(Some(Duration::from_secs(10)));
        let _h = timers.add(c.clone(), Some(clock.now() + Duration::from_secs(5)));
        clock.advance(Duration::from_secs(4));
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(c.runs.load(Ordering::SeqCst), 0, "not before its deadline");
        clock.advance(Duration::from_secs(1));
        eventually(|| c.runs.load(Ordering::SeqCst) == 1);
        clock.advance(Duration::from_secs(10));
        eventually(|| c.runs.load(Ordering::SeqCst) == 2);
    }

    #[test]
    fn wake_if_idle_runs_an_idle_task_and_keeps_a_scheduled_ones_deadline() {
        let clock = Arc::new(ManualClock::new());
        let timers = Timers::with_clock("t", clock.clone());
        let c = counter(None);
        let h = timers.add(c.clone(), Some(clock.now() + Duration::from_secs(60)));
        h.wake_if_idle();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(c.runs.load(Ordering::SeqCst), 0, "kept its deadline");
        clock.advance(Duration::from_secs(60));
        eventually(|| c.runs.load(Ordering::SeqCst) == 1);
        // Ran and asked for nothing more: idle, so a wake runs it at once.
        h.wake_if_idle();
        eventually(|| c.runs.load(Ordering::SeqCst) == 2);
    }

    #[test]
    fn schedule_moves_a_deadline_earlier_never_later() {
        let clock = Arc::new(ManualClock::new());
        let timers = Timers::with_clock("t", clock.clone());
        let c = counter(None);
        let h = timers.add(c.clone(), Some(clock.now() + Duration::from_secs(60)));
        h.schedule(clock.now() + Duration::from_secs(1));
        h.schedule(clock.now() + Duration::from_secs(30));
        clock.advance(Duration::from_secs(1));
        eventually(|| c.runs.load(Ordering::SeqCst) == 1);
        // Ran once and asked for nothing more: the later deadlines are gone with it.
        clock.advance(Duration::from_secs(120));
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(c.runs.load(Ordering::SeqCst), 1);
        h.schedule_now();
        eventually(|| c.runs.load(Ordering::SeqCst) == 2);
    }

    #[test]
    fn tasks_share_one_thread() {
        let timers = Timers::new("shared-timers");
        let a = counter(None);
        let b = counter(None);
        let ha = timers.add(a.clone(), None);
        let hb = timers.add(b.clone(), None);
        ha.schedule_now();
        hb.schedule_now();
        eventually(|| a.runs.load(Ordering::SeqCst) == 1 && b.runs.load(Ordering::SeqCst) == 1);
        let threads = std::fs::read_dir("/proc/self/task")
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|t| {
                        std::fs::read_to_string(t.path().join("comm"))
                            .is_ok_and(|c| c.trim() == "shared-timers")
                    })
                    .count()
            })
            .unwrap_or(1);
        assert_eq!(threads, 1);
    }

    /// A task that blocks until released, to catch a cancel during a run.
    struct Blocking {
        entered: Mutex<bool>,
        release: Mutex<bool>,
        cv: Condvar,
        done: AtomicUsize,
    }

    impl Task for Blocking {
        fn fire(&self, _: Instant) -> Option<Instant> {
            *self.entered.lock() = true;
            self.cv.notify_all();
            let mut r = self.release.lock();
            while !*r {
                self.cv.wait(&mut r);
            }
            self.done.fetch_add(1, Ordering::SeqCst);
            None
        }
    }

    #[test]
    fn cancel_waits_for_a_run_in_progress_and_nothing_runs_after() {
        let timers = Timers::new("t");
        let b = Arc::new(Blocking {
            entered: Mutex::new(false),
            release: Mutex::new(false),
            cv: Condvar::new(),
            done: AtomicUsize::new(0),
        });
        let h = timers.add(b.clone(), None);
        h.schedule_now();
        {
            let mut e = b.entered.lock();
            while !*e {
                b.cv.wait(&mut e);
            }
        }
        let canceller = std::thread::spawn(move || {
            h.cancel();
            h
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(!canceller.is_finished(), "cancel returned during the run");
        *b.release.lock() = true;
        b.cv.notify_all();
        let h = canceller.join().unwrap();
        assert_eq!(b.done.load(Ordering::SeqCst), 1);
        h.schedule_now();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            b.done.load(Ordering::SeqCst),
            1,
            "a cancelled task never runs"
        );
    }

    #[test]
    fn no_thread_before_the_first_task_and_none_after_shutdown() {
        let timers = Timers::new("t");
        assert!(timers.thread.lock().is_none());
        let c = counter(None);
        let h = timers.add(c.clone(), None);
        assert!(timers.thread.lock().is_some());
        timers.shutdown();
        assert!(timers.thread.lock().is_none());
        h.schedule_now();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(c.runs.load(Ordering::SeqCst), 0);
    }
}
