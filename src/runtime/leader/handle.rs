//! The caller's side of a running elector: leadership queries, the loss signal, stop.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use parking_lot::{Condvar, Mutex};

use crate::client::Canceller;
use crate::runtime::clock::{deadline_after, Wakeup};

/// State shared by the elector thread and its handle.
pub(super) struct Shared {
    pub(super) identity: String,
    pub(super) state: Mutex<State>,
    /// Notified on every change of `state`.
    pub(super) changed: Condvar,
    /// Wakes the elector out of its wait between attempts (stop).
    pub(super) wakeup: Arc<Wakeup>,
    /// One message when leadership is lost against our will; never on a requested stop.
    pub(super) lost_tx: Sender<()>,
    /// Ends the elector's acquire/renew request in flight when a stop is asked for, so a
    /// stop never waits for a stalled server (the release has its own short timeout).
    pub(super) cancel: Canceller,
}

/// What the handle reads and the elector writes.
#[derive(Debug, Default)]
pub(super) struct State {
    /// While leading: the renew deadline of the last successful renewal.
    pub(super) leading_until: Option<Instant>,
    /// The last holder observed (us included); `None` before the first read or when free.
    pub(super) leader: Option<String>,
    /// A stop was asked for, and how.
    pub(super) stop: Option<StopMode>,
    /// The elector thread has finished.
    pub(super) finished: bool,
}

/// How the elector should stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StopMode {
    /// Write the release record if we hold the lease.
    Release,
    /// Just stop; the lease runs out by itself (as when the process dies).
    Abandon,
}

impl State {
    pub(super) fn is_leader(&self, now: Instant) -> bool {
        self.leading_until.is_some_and(|until| now < until)
    }
}

impl Shared {
    pub(super) fn new(identity: String, lost_tx: Sender<()>) -> Shared {
        Shared {
            identity,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            wakeup: Arc::new(Wakeup::new()),
            lost_tx,
            cancel: Canceller::new(),
        }
    }

    /// Applies `f` to the state and tells every waiter.
    pub(super) fn update<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let r = f(&mut self.state.lock());
        self.changed.notify_all();
        r
    }

    pub(super) fn stop_requested(&self) -> Option<StopMode> {
        self.state.lock().stop
    }
}

/// A running elector. Dropping it releases the lease (if held) and stops the thread.
pub struct LeaderHandle {
    shared: Arc<Shared>,
    lost_rx: Receiver<()>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl LeaderHandle {
    pub(super) fn new(shared: Arc<Shared>, lost_rx: Receiver<()>, thread: JoinHandle<()>) -> Self {
        LeaderHandle {
            shared,
            lost_rx,
            thread: Mutex::new(Some(thread)),
        }
    }

    /// This candidate's identity, as written into `holderIdentity`.
    pub fn identity(&self) -> &str {
        &self.shared.identity
    }

    /// Whether this candidate leads now. Judged on the clock, not only on the elector's last
    /// word: once the renew deadline of the last successful renewal passes, this is `false`
    /// even if the elector is still stuck in a request.
    pub fn is_leader(&self) -> bool {
        self.shared.state.lock().is_leader(Instant::now())
    }

    /// The holder last observed (possibly us), if any.
    pub fn leader(&self) -> Option<String> {
        self.shared.state.lock().leader.clone()
    }

    /// Blocks until this candidate leads (`true`), or `timeout` passes or the elector stops
    /// (`false`). Call it in slices to stay responsive to signals.
    pub fn wait_until_leader(&self, timeout: Duration) -> bool {
        let deadline = deadline_after(Instant::now(), timeout);
        let mut state = self.shared.state.lock();
        loop {
            let now = Instant::now();
            if state.is_leader(now) {
                return true;
            }
            if state.finished || state.stop.is_some() || now >= deadline {
                return false;
            }
            self.shared.changed.wait_until(&mut state, deadline);
        }
    }

    /// Receives one `()` when leadership is lost against our will (renew deadline passed, or
    /// the lease was taken); never on [`release_and_stop`](Self::release_and_stop) or
    /// [`stop`](Self::stop). Sent after `on_stopped_leading` has run. After a loss the elector
    /// does not compete again.
    pub fn lost(&self) -> Receiver<()> {
        self.lost_rx.clone()
    }

    /// Stops the elector: if the last record we saw names us, writes the release record (no
    /// holder, 1 s) so a successor takes over at once. An acquire or renew request in flight
    /// is cancelled and the release gets at most [`RELEASE_TIMEOUT`](super::RELEASE_TIMEOUT),
    /// so this returns within about a second whatever the server does. Idempotent.
    pub fn release_and_stop(&self) {
        self.stop_with(StopMode::Release);
    }

    /// Stops the elector without releasing: the lease runs out after its duration, as when
    /// the process dies. Idempotent.
    pub fn stop(&self) {
        self.stop_with(StopMode::Abandon);
    }

    fn stop_with(&self, mode: StopMode) {
        self.shared.update(|s| {
            s.stop.get_or_insert(mode);
        });
        self.shared.wakeup.wake();
        self.shared.cancel.cancel();
        let Some(thread) = self.thread.lock().take() else {
            return;
        };
        // From a callback (the elector thread itself) joining would deadlock; the stop is
        // asked for and the thread ends after the callback returns.
        if thread.thread().id() == std::thread::current().id() {
            return;
        }
        if thread.join().is_err() {
            log::error!("leader election thread panicked");
        }
    }
}

impl Drop for LeaderHandle {
    fn drop(&mut self) {
        self.release_and_stop();
    }
}

impl std::fmt::Debug for LeaderHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderHandle")
            .field("identity", &self.shared.identity)
            .field("state", &*self.shared.state.lock())
            .finish()
    }
}
