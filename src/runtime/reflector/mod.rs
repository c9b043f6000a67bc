//! The reflector: one OS thread that lists then watches a kind into a [`Store`].
//!
//! List (paginated, consistent) → replace the cache and deliver the differences →
//! watch from the list's resourceVersion, re-watching from the last one seen when a
//! watch ends cleanly → relist when the server says our version is gone (410, at once),
//! when its history moved backwards, after a broken connection, and periodically.
//! Failures wait an exponential, jittered backoff.

mod handler;
mod kind;
mod list;
mod lister_watcher;
mod replace;
mod run;
#[cfg(test)]
mod test_support;
mod transform;
mod watch;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;

use crate::api::Resource;
use crate::client::Canceller;
use crate::runtime::backoff::BackoffConfig;
use crate::runtime::clock::deadline_after;
use crate::runtime::liveness::Liveness;
use crate::runtime::reachability::{Change, Reachability};
use crate::runtime::store::Store;
use crate::runtime::timers::{TimerHandle, Timers};

use kind::{Kind, Typed};

pub use handler::EventHandler;
pub use list::{list_all, Listed};
pub use lister_watcher::{ListerWatcher, WatchEvents};
pub use transform::Transformed;

/// How a reflector lists and watches.
#[derive(Clone, Debug)]
pub struct ReflectorOptions {
    /// Objects per list page (500, as client-go); 0 lists in one request.
    pub page_size: u32,
    /// Re-deliver every cached object as an update this often; `None` never.
    pub resync: Option<Duration>,
    /// Where the resync runs: a task of these timers (shared with other components), or
    /// with `None` a thread of its own named `resync-<plural>`.
    pub timers: Option<Arc<Timers>>,
    /// Only objects matching this label selector.
    pub label_selector: Option<String>,
    /// Waits between failed attempts.
    pub backoff: BackoffConfig,
    /// Shortest `timeoutSeconds` asked of a watch (5 min, as client-go).
    pub min_watch_timeout: Duration,
    /// Longest `timeoutSeconds` (10 min); each watch picks at random in between so
    /// many clients do not reconnect together.
    pub max_watch_timeout: Duration,
    /// A full relist this often, whatever the watch says (10 min; `None` never). Catches
    /// what no error shows, e.g. a server restored under an unbroken connection. Unlike
    /// `resync` (which re-delivers the cache) this asks the server.
    pub relist: Option<Duration>,
    /// A watch that sends no byte for this long is dead (2 min; `None`: only its
    /// `timeoutSeconds` ends it). kube-apiserver sends a bookmark to every watch about once a
    /// minute, so silence for twice that means a half-open connection, not a quiet cluster.
    pub watch_idle_timeout: Option<Duration>,
    /// Where the reflector thread reports its heartbeat (group `reflector`), for `/healthz`.
    pub liveness: Option<Arc<Liveness>>,
    /// The "server reachable" gate this reflector keeps: closed when a list or watch finds
    /// the server unreachable, opened by every list or watch it answers. When someone else
    /// closes it (a write that got no answer), an open watch is restarted at once to check.
    pub reachability: Option<Arc<Reachability>>,
}

/// Default of [`ReflectorOptions::relist`]: APIService collections are small, so a list
/// every 10 minutes costs little and bounds how long any missed change can stay unseen.
pub const DEFAULT_RELIST: Duration = Duration::from_secs(600);

/// Default of [`ReflectorOptions::watch_idle_timeout`]: two bookmark periods of kube-apiserver.
pub const DEFAULT_WATCH_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

impl Default for ReflectorOptions {
    fn default() -> Self {
        ReflectorOptions {
            page_size: 500,
            resync: None,
            timers: None,
            label_selector: None,
            backoff: BackoffConfig::default(),
            min_watch_timeout: Duration::from_secs(300),
            max_watch_timeout: Duration::from_secs(600),
            relist: Some(DEFAULT_RELIST),
            watch_idle_timeout: Some(DEFAULT_WATCH_IDLE_TIMEOUT),
            liveness: None,
            reachability: None,
        }
    }
}

/// Starts reflector threads.
pub struct Reflector;

impl Reflector {
    /// Starts a thread named `reflector-<plural>` that keeps `store` in line with the
    /// server and calls `handler` for every change; stops when the handle is stopped or dropped.
    pub fn spawn<K: Resource>(
        lw: impl ListerWatcher<K>,
        store: Arc<Store<K>>,
        handler: Arc<dyn EventHandler<K>>,
        opts: ReflectorOptions,
    ) -> ReflectorHandle {
        let kind = Typed {
            lw: Box::new(lw),
            store,
            handler,
        };
        spawn_kind(K::PLURAL, Arc::new(kind), opts)
    }
}

/// [`Reflector::spawn`] past the typed seam: compiled once for every kind.
fn spawn_kind(
    plural: &'static str,
    kind: Arc<dyn Kind>,
    opts: ReflectorOptions,
) -> ReflectorHandle {
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let shutdown = Arc::new(Shutdown {
        state: Mutex::new(StopState::default()),
        stop_tx: Mutex::new(Some(stop_tx)),
        stop_rx,
    });
    let deliver = Arc::new(Mutex::new(()));
    if let Some(reach) = &opts.reachability {
        // Weak: the gate outlives this reflector (it belongs to the caller).
        let shutdown = Arc::downgrade(&shutdown);
        reach.subscribe(move |change| {
            if let (Change::Lost(_), Some(s)) = (change, shutdown.upgrade()) {
                s.probe();
            }
        });
    }

    let resync = opts.resync.map(|period| {
        let own = opts
            .timers
            .is_none()
            .then(|| Timers::new(&format!("resync-{plural}")));
        let task = Arc::new(run::Resync {
            period,
            kind: kind.clone(),
            shutdown: shutdown.clone(),
            deliver: deliver.clone(),
        });
        let timers = opts.timers.as_ref().or(own.as_ref());
        let handle = timers.map(|t| {
            let first = deadline_after(t.clock().now(), period);
            t.add(task, Some(first))
        });
        (handle, own)
    });
    let main = {
        let shutdown = shutdown.clone();
        std::thread::Builder::new()
            .name(format!("reflector-{plural}"))
            .spawn(move || run::Runner::new(plural, kind, opts, shutdown, deliver).run())
    };
    let mut threads = Vec::new();
    match main {
        Ok(h) => threads.push(h),
        // Out of threads: nothing sensible to do but say so; the store never syncs.
        Err(e) => log::error!("cannot start a reflector thread for {plural}: {e}"),
    }
    let (resync, own_timers) = resync.unwrap_or((None, None));
    ReflectorHandle {
        shutdown,
        threads,
        resync: Mutex::new(resync),
        own_timers,
    }
}

/// Owns a running reflector; dropping it stops the reflector and waits for it.
pub struct ReflectorHandle {
    shutdown: Arc<Shutdown>,
    threads: Vec<JoinHandle<()>>,
    /// The resync task, if any; cancelled on stop.
    resync: Mutex<Option<TimerHandle>>,
    /// The resync's own timers, when none were given: shut down with the reflector.
    own_timers: Option<Arc<Timers>>,
}

impl ReflectorHandle {
    /// Asks the reflector to stop: cancels an open watch and ends a backoff wait. Idempotent.
    pub fn stop(&self) {
        self.shutdown.stop();
        // Cancelling waits for a resync in progress: none runs after the stop.
        if let Some(r) = self.resync.lock().take() {
            r.cancel();
        }
        if let Some(t) = &self.own_timers {
            t.shutdown();
        }
    }

    /// Stops the reflector (if not yet asked) and waits for its threads to end;
    /// re-raises a panic of a handler.
    pub fn join(mut self) {
        self.stop();
        for t in std::mem::take(&mut self.threads) {
            if let Err(panic) = t.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }

    /// What is failing now (`list failing: …`), while the reflector backs off; `None`
    /// once it works again (or before anything failed).
    pub fn last_error(&self) -> Option<String> {
        self.shutdown.state.lock().failure.clone()
    }

    /// Whether every reflector thread has ended.
    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(JoinHandle::is_finished)
    }
}

impl Drop for ReflectorHandle {
    fn drop(&mut self) {
        self.stop();
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                log::error!("a reflector thread panicked");
            }
        }
    }
}

/// Stop signalling shared by the handle and the threads.
struct Shutdown {
    state: Mutex<StopState>,
    /// Dropped on stop: every receiver wakes with `Disconnected`.
    stop_tx: Mutex<Option<Sender<()>>>,
    stop_rx: Receiver<()>,
}

#[derive(Default)]
struct StopState {
    stopped: bool,
    /// The open list's or watch's canceller, so stop can end a blocked read.
    request: Option<Canceller>,
    /// Whether `request` is a watch (a probe ends only a watch: a list proves or disproves
    /// reachability by itself).
    watching: bool,
    /// A probe ended the open watch: re-watch at once, it was no failure.
    probed: bool,
    /// The failure being backed off from, for [`ReflectorHandle::last_error`].
    failure: Option<String>,
}

impl Shutdown {
    fn stop(&self) {
        {
            let mut s = self.state.lock();
            s.stopped = true;
            if let Some(c) = s.request.take() {
                c.cancel();
            }
        }
        self.stop_tx.lock().take();
    }

    fn is_stopped(&self) -> bool {
        self.state.lock().stopped
    }

    /// A canceller registered for the next list or watch, or `None` when already stopped.
    /// Both under one lock, so a stop either sees this canceller or the caller sees the stop.
    fn register_request(&self) -> Option<Canceller> {
        self.register(false)
    }

    /// [`register_request`](Self::register_request) for a watch, which a probe may end.
    fn register_watch(&self) -> Option<Canceller> {
        self.register(true)
    }

    fn register(&self, watching: bool) -> Option<Canceller> {
        let mut s = self.state.lock();
        if s.stopped {
            return None;
        }
        let c = Canceller::new();
        s.request = Some(c.clone());
        s.watching = watching;
        s.probed = false;
        Some(c)
    }

    fn unregister_request(&self) {
        let mut s = self.state.lock();
        s.request = None;
        s.watching = false;
    }

    /// Someone found the server unreachable while a watch may still look open (a half-open
    /// connection, or a write that timed out on a server whose watch still flows): end the
    /// watch so the reflector re-watches at once and finds out. Nothing while listing or
    /// backing off: that attempt answers the question by itself.
    fn probe(&self) {
        let mut s = self.state.lock();
        if s.stopped || !s.watching {
            return;
        }
        if let Some(c) = s.request.clone() {
            s.probed = true;
            c.cancel();
        }
    }

    /// Whether a probe ended the last watch (and forgets it).
    fn take_probed(&self) -> bool {
        std::mem::take(&mut self.state.lock().probed)
    }

    fn set_failure(&self, failure: Option<String>) {
        self.state.lock().failure = failure;
    }

    /// Sleeps `d` unless stopped first; answers true when stopped.
    fn sleep(&self, d: Duration) -> bool {
        match self.stop_rx.recv_timeout(d) {
            Err(RecvTimeoutError::Timeout) => self.is_stopped(),
            Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
        }
    }
}
