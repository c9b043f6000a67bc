//! The autoregister controller: desired set, decision table, workers, manifests.

pub mod decision;

pub use decision::{decide, with_label, Action, Cell, Current, Decision, Desired, SyncMode};
pub mod manifests;
