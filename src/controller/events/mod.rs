//! Kubernetes Events (`events.k8s.io/v1`) on the APIServices the controller writes or refuses
//! to write, so `kubectl describe apiservice NAME` shows what happened and why.
//!
//! Best-effort, as client-go's recorder: [`EventRecorder::record`] never blocks and never
//! fails; a bounded queue feeds one background thread that writes at a bounded rate through
//! its own client (Event writes never wait behind, or delay, the controller's requests);
//! repeats of the same (name, reason, note) within [`DEDUP_WINDOW`] are dropped, like
//! client-go's `EventCorrelator`, and so is anything past a full queue.

mod filter;
mod reason;
mod recorder;

pub use filter::{Deduper, DEDUP_MAX_KEYS, DEDUP_WINDOW};
pub use reason::EventReason;
pub use recorder::{
    EventRecorder, EVENTS_BURST, EVENTS_QPS, EVENT_NAMESPACE, EVENT_WRITE_TIMEOUT, MAX_NOTE_BYTES,
    QUEUE_CAPACITY, REPORTING_CONTROLLER,
};
