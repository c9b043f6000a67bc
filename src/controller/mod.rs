//! The autoregister controller: desired set, decision table, workers, manifests.
