//! The autoregister controller: desired set, decision table, workers, manifests.

mod handle;
mod state;
mod sync;

pub use handle::{Controller, ControllerOptions, Pending, QUEUE_NAME};
