//! `run --once --wait-available`: after converging, wait until every registered API is served.

use std::time::Instant;

use autoregister::controller::Controller;
use log::{error, info};

/// How many unavailable names the summary lists (then "and N more").
const SUMMARY_NAMES: usize = 10;

/// How waiting for availability ended.
pub(crate) enum Available {
    /// Every desired APIService backed by a service is available.
    Yes,
    /// `deadline` passed first (logged, with which ones and why).
    TimedOut,
    /// The controller was stopped (a signal, a lost lease).
    Stopped,
}

/// Waits until `deadline` for every desired APIService with a service to be `Available`.
pub(crate) fn wait(controller: &Controller, deadline: Instant) -> Available {
    let left = deadline.saturating_duration_since(Instant::now());
    match controller.wait_available(left) {
        Ok(()) => {
            info!("available: every desired APIService backed by a service is available");
            Available::Yes
        }
        Err(_) if controller.is_stopped() => Available::Stopped,
        Err(pending) => {
            error!(
                "not available within --timeout: {} APIServices are not available:",
                pending.len()
            );
            for p in pending.iter().take(SUMMARY_NAMES) {
                error!("  {}: {}", p.name, p.reason);
            }
            if pending.len() > SUMMARY_NAMES {
                error!("  and {} more", pending.len() - SUMMARY_NAMES);
            }
            Available::TimedOut
        }
    }
}
