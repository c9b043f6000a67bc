//! The autoregister controller: desired set, decision table, workers, manifests.

mod apply;
pub mod availability;
pub mod ca;
pub mod decision;
pub mod events;
pub mod fields;
mod fights;
mod handle;
pub mod manifests;
pub mod metrics;
mod report;
mod state;
mod sync;

pub use decision::{
    decide, Action, Apply, Cell, Current, Decision, Desired, Facts, Owner, Ownership, SyncMode,
    Withdrawal,
};
pub use events::{EventReason, EventRecorder};
pub use fields::{Applied, Comparison, Takeover};
pub use fights::{
    FightDetector, DEFAULT_FIGHT_BACKOFF_MAX, FIGHT_BACKOFF_MAX_RANGE, FIGHT_THRESHOLD,
    FIGHT_WINDOW,
};
pub use handle::{Controller, ControllerOptions, Pending, NOT_SYNCED_YET, QUEUE_NAME};
pub use manifests::{load, ManifestError, ManifestSet, Reload, Reloader};
pub use metrics::{ControllerMetrics, Gauges, ReloadResult, SyncResult};
