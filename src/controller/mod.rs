//! The autoregister controller: desired set, decision table, workers, manifests.

pub mod decision;
pub mod events;
mod handle;
pub mod manifests;
pub mod metrics;
mod report;
mod state;
mod sync;

pub use decision::{decide, with_label, Action, Cell, Current, Decision, Desired, SyncMode};
pub use events::{EventReason, EventRecorder};
pub use handle::{Controller, ControllerOptions, Pending, QUEUE_NAME};
pub use manifests::{load, ManifestError, ManifestSet, Reload};
pub use metrics::{ControllerMetrics, Gauges, ReloadResult, SyncResult};
