//! The autoregister controller: desired set, decision table, workers, manifests.

pub mod decision;
mod handle;
pub mod manifests;
mod state;
mod sync;

pub use decision::{decide, with_label, Action, Cell, Current, Decision, Desired, SyncMode};
pub use handle::{Controller, ControllerOptions, Pending, NOT_SYNCED_YET, QUEUE_NAME};
pub use manifests::{load, ManifestError, ManifestSet, Reload};
