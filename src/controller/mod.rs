//! The autoregister controller: desired set, decision table, workers, manifests.

pub mod decision;
mod fights;
mod handle;
pub mod manifests;
mod state;
mod sync;

pub use decision::{
    decide, Action, Cell, Current, Decision, Desired, Facts, Owner, Ownership, SyncMode,
};
pub use fights::{FightDetector, FIGHT_THRESHOLD, FIGHT_WINDOW};
pub use handle::{
    Controller, ControllerOptions, Pending, DEFAULT_FIELD_MANAGER, NOT_SYNCED_YET, QUEUE_NAME,
};
pub use manifests::{load, ManifestError, ManifestSet, Reload, Reloader};
