//! Whether the API server can be reached: one fact shared by the reflector, which proves it
//! (every list or watch that the server answers), and the workers, which wait on it.
//!
//! A server that cannot be reached is one fact, not one per name: when a write finds it
//! down, every other name would find the same, each on its own backoff (client-go's default
//! keeps a dead server at 10 requests a second). So the first failure closes this gate,
//! workers wait at it, and the reflector's own backoff is the only traffic until it reaches
//! the server again. The gate knows nothing of names or logs; observers subscribe.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// How often a waiter re-checks whether it should give up (stop), beside being woken.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// A change of the gate, as told to subscribers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The server stopped answering; why (the failure that showed it).
    Lost(String),
    /// It answers again, after this long.
    Regained(Duration),
}

type Hook = Box<dyn Fn(&Change) + Send + Sync>;

/// The shared "server reachable" gate; open until a failure closes it.
#[derive(Default)]
pub struct Reachability {
    state: Mutex<State>,
    changed: Condvar,
    hooks: Mutex<Vec<Hook>>,
}

#[derive(Default)]
struct State {
    /// Since when, and why, the server is unreachable; `None` while it answers.
    down: Option<(Instant, String)>,
    /// Wakes waiters for good (shutdown).
    closed: bool,
}

impl std::fmt::Debug for Reachability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reachability")
            .field("down", &self.state.lock().down)
            .finish()
    }
}

impl Reachability {
    /// An open gate.
    pub fn new() -> Self {
        Reachability::default()
    }

    /// Calls `hook` on every change from now on, in order, on the thread that caused it.
    /// Hooks must be quick and must not call back into the gate.
    pub fn subscribe(&self, hook: impl Fn(&Change) + Send + Sync + 'static) {
        self.hooks.lock().push(Box::new(hook));
    }

    /// A request found the server unreachable (`why`); closes the gate. True when this
    /// closed it (it was open).
    pub fn lost(&self, why: &str) -> bool {
        // The hook lock is taken first and held across the state change, so subscribers see
        // changes in the order they happened.
        let hooks = self.hooks.lock();
        {
            let mut s = self.state.lock();
            if s.down.is_some() {
                return false;
            }
            s.down = Some((Instant::now(), why.to_string()));
        }
        let change = Change::Lost(why.to_string());
        for h in hooks.iter() {
            h(&change);
        }
        true
    }

    /// The server answered; opens the gate and wakes every waiter. Answers how long it was
    /// closed when this opened it.
    pub fn regained(&self) -> Option<Duration> {
        let hooks = self.hooks.lock();
        let since = {
            let mut s = self.state.lock();
            let (since, _) = s.down.take()?;
            since
        };
        self.changed.notify_all();
        let after = since.elapsed();
        let change = Change::Regained(after);
        for h in hooks.iter() {
            h(&change);
        }
        Some(after)
    }

    /// Whether the gate is open (the server answered last time anyone asked).
    pub fn is_reachable(&self) -> bool {
        self.state.lock().down.is_none()
    }

    /// How long the server has been unreachable and why; `None` while it answers.
    pub fn down(&self) -> Option<(Duration, String)> {
        self.state
            .lock()
            .down
            .as_ref()
            .map(|(since, why)| (since.elapsed(), why.clone()))
    }

    /// Blocks while the gate is closed; true once it is open, false when `stopped()` says to
    /// give up (checked every few tens of milliseconds) or the gate was shut for good.
    pub fn wait_reachable(&self, stopped: impl Fn() -> bool) -> bool {
        let mut s = self.state.lock();
        loop {
            if s.closed || stopped() {
                return false;
            }
            if s.down.is_none() {
                return true;
            }
            self.changed.wait_for(&mut s, STOP_CHECK);
        }
    }

    /// Wakes every waiter for good: [`wait_reachable`](Self::wait_reachable) answers false
    /// from now on (shutdown).
    pub fn shut(&self) {
        self.state.lock().closed = true;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn one_loss_and_one_regain_are_told_once_each_however_many_report_them() {
        let r = Reachability::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        r.subscribe(move |c| s.lock().push(c.clone()));
        assert!(r.is_reachable());
        assert!(r.lost("connect failed"));
        assert!(!r.lost("connect failed again"), "already down");
        assert!(!r.is_reachable());
        assert_eq!(r.down().map(|d| d.1), Some("connect failed".to_string()));
        assert!(r.regained().is_some());
        assert!(r.regained().is_none(), "already up");
        let seen = seen.lock();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(seen[0], Change::Lost("connect failed".into()));
        assert!(matches!(seen[1], Change::Regained(_)));
    }

    #[test]
    fn a_waiter_passes_when_the_server_is_regained() {
        let r = Arc::new(Reachability::new());
        r.lost("refused");
        let w = {
            let r = r.clone();
            std::thread::spawn(move || r.wait_reachable(|| false))
        };
        std::thread::sleep(Duration::from_millis(30));
        assert!(!w.is_finished(), "waits while down");
        r.regained();
        assert!(w.join().unwrap());
    }

    #[test]
    fn a_waiter_gives_up_on_stop_and_on_shut() {
        let r = Arc::new(Reachability::new());
        r.lost("refused");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let w = {
            let (r, stop) = (r.clone(), stop.clone());
            std::thread::spawn(move || {
                r.wait_reachable(|| stop.load(std::sync::atomic::Ordering::SeqCst))
            })
        };
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(!w.join().unwrap());
        let w = {
            let r = r.clone();
            std::thread::spawn(move || r.wait_reachable(|| false))
        };
        r.shut();
        assert!(!w.join().unwrap());
        r.regained();
        assert!(!r.wait_reachable(|| false), "shut for good");
    }
}
