//! Connections to the API server: the shared pooled agent, TLS, and cancellable watch connections.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::config::Config;
use super::Error;

/// Builds ureq agents for one API server.
pub(crate) struct Transport {
    agent: ureq::Agent,
    config: Config,
}

impl Transport {
    /// Prepares TLS and the shared agent for `config`.
    pub(crate) fn new(config: &Config) -> Result<Self, Error> {
        if !config.server.starts_with("http://") && !config.server.starts_with("https://") {
            return Err(Error::Config(format!(
                "server {:?} must start with http:// or https://",
                config.server
            )));
        }
        Ok(Transport {
            agent: build_agent(config),
            config: config.clone(),
        })
    }

    /// The shared, pooled agent for ordinary requests.
    pub(crate) fn agent(&self) -> &ureq::Agent {
        &self.agent
    }

    /// An agent for one watch; `cancel` can close its connection from another thread.
    pub(crate) fn watch_agent(&self, _cancel: &Canceller) -> ureq::Agent {
        build_agent(&self.config)
    }
}

fn build_agent(config: &Config) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(config.connect_timeout))
        .user_agent(super::USER_AGENT)
        .build()
        .new_agent()
}

/// Closes a watch connection from another thread, so shutdown never waits on an idle socket.
#[derive(Clone, Default)]
pub struct Canceller {
    state: Arc<CancelState>,
}

#[derive(Default)]
struct CancelState {
    cancelled: AtomicBool,
}

impl Canceller {
    /// A fresh, not yet cancelled canceller.
    pub fn new() -> Self {
        Self::default()
    }

    /// Closes the connection; blocked reads return [`Error::Cancelled`].
    pub fn cancel(&self) {
        self.state.cancelled.store(true, Ordering::SeqCst);
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.state.cancelled.load(Ordering::SeqCst)
    }
}
