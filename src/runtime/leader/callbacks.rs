//! What the elector calls when leadership starts, ends or moves.

/// A hook without arguments.
type Hook = Box<dyn Fn() + Send>;
/// A hook told the new holder's identity.
type HolderHook = Box<dyn Fn(&str) + Send>;

/// Hooks run on the elector thread; each must return promptly (a slow hook delays renewals).
#[derive(Default)]
pub struct LeaderCallbacks {
    pub(super) started: Option<Hook>,
    pub(super) stopped: Option<Hook>,
    pub(super) new_leader: Option<HolderHook>,
}

impl LeaderCallbacks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Called once when this candidate becomes leader.
    pub fn on_started_leading(mut self, f: impl Fn() + Send + 'static) -> Self {
        self.started = Some(Box::new(f));
        self
    }

    /// Called once when leadership ends: lost (renew deadline passed, lease taken) or given up
    /// on stop. Not called when this candidate never led.
    pub fn on_stopped_leading(mut self, f: impl Fn() + Send + 'static) -> Self {
        self.stopped = Some(Box::new(f));
        self
    }

    /// Called with the holder's identity whenever a different holder (us included) is observed.
    pub fn on_new_leader(mut self, f: impl Fn(&str) + Send + 'static) -> Self {
        self.new_leader = Some(Box::new(f));
        self
    }

    pub(super) fn started(&self) {
        if let Some(f) = &self.started {
            f();
        }
    }

    pub(super) fn stopped(&self) {
        if let Some(f) = &self.stopped {
            f();
        }
    }

    pub(super) fn new_leader(&self, identity: &str) {
        if let Some(f) = &self.new_leader {
            f(identity);
        }
    }
}

impl std::fmt::Debug for LeaderCallbacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderCallbacks")
            .field("on_started_leading", &self.started.is_some())
            .field("on_stopped_leading", &self.stopped.is_some())
            .field("on_new_leader", &self.new_leader.is_some())
            .finish()
    }
}
