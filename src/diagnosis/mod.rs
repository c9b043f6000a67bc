//! Why an aggregated API is (not) served: the chain kube-aggregator walks, decided by a
//! pure function over what was read ([`diagnose`]), with one vocabulary of cause codes
//! ([`Cause`]) that `explain`, `plan`, Events and logs share.

mod cause;
mod chain;
pub mod facts;
mod gather;
mod tls;

pub use cause::Cause;
pub use chain::{consequences, diagnose, Diagnosis, Verdict};
pub use facts::Facts;
pub use gather::gather;
