//! What a sync reports beside its outcome: metrics, Events, and "left alone" notices.

use std::sync::Arc;

use parking_lot::Mutex;

use super::decision::Cell;
use super::events::EventRecorder;
use super::metrics::ControllerMetrics;
use crate::hash::Set;

/// The observers every worker's sync reports to; one per controller.
pub(crate) struct Reporters {
    /// Syncs per cell and result.
    pub(crate) metrics: Arc<ControllerMetrics>,
    /// Kubernetes Events for writes and refusals.
    pub(crate) events: EventRecorder,
    /// (name, cell) pairs already explained at INFO.
    noticed: Mutex<Set<(String, Cell)>>,
}

impl Reporters {
    /// Reporters writing to `metrics` and `events`.
    pub(crate) fn new(metrics: Arc<ControllerMetrics>, events: EventRecorder) -> Reporters {
        Reporters {
            metrics,
            events,
            noticed: Mutex::new(Set::default()),
        }
    }

    /// True the first time `name` is seen left alone in `cell`: say it once at INFO, then at debug.
    pub(crate) fn first_notice(&self, name: &str, cell: Cell) -> bool {
        self.noticed.lock().insert((name.to_string(), cell))
    }
}
