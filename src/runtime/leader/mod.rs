//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's `leaderelection`.
//!
//! Candidates read the Lease every retry period (jittered). A lease whose holder is empty, or
//! whose record has not changed for its `leaseDurationSeconds` *as observed on our own clock*,
//! is taken over with a conditional update (the resourceVersion makes concurrent candidates
//! race safely: one wins, the others get a 409 and read again). The leader renews every retry
//! period and gives leadership up when no renewal succeeded within the renew deadline, which
//! is shorter than the lease duration, so it stops before anyone else may start. Stopping
//! with [`LeaderHandle::release_and_stop`] writes an empty holder and a 1 s duration so a
//! successor takes over at once.
//!
//! ```no_run
//! # use autoregister::runtime::leader::*;
//! # fn demo(api: autoregister::client::Api<autoregister::api::Lease>) -> std::io::Result<()> {
//! let handle = LeaderElector::start(api, "autoregister", default_identity(),
//!                                   LeaderConfig::default(), LeaderCallbacks::new())?;
//! while !handle.wait_until_leader(std::time::Duration::from_millis(200)) { /* check signals */ }
//! // ... lead; `handle.lost()` receives when leadership is lost ...
//! handle.release_and_stop();
//! # Ok(()) }
//! ```

mod callbacks;
mod config;
pub mod decide;
mod elector;
mod handle;
mod identity;

pub use callbacks::LeaderCallbacks;
pub use config::{LeaderConfig, ACQUIRE_JITTER, RELEASE_TIMEOUT};
pub use elector::LeaderElector;
pub use handle::LeaderHandle;
pub use identity::default_identity;
