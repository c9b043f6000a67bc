//! The autoregister controller: desired set, decision table, workers, manifests.

pub mod decision;
pub mod manifests;

pub use decision::{decide, with_label, Action, Cell, Current, Decision, Desired, SyncMode};
pub use manifests::{load, ManifestError, ManifestSet, Reload};
