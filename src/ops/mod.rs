//! The operations endpoint: `/livez`, `/healthz`, `/readyz` and `/metrics` over plain HTTP/1.1.
//!
//! A hand-written, loopback-grade server on `std::net` (a few KB of binary, where a server
//! crate costs ~190 KB): one accept thread and one short-lived thread per connection, `GET`
//! and `HEAD` only, one request per connection (`Connection: close`), bounded request heads
//! and read/write deadlines, so a slow or hostile client costs one thread for a few seconds
//! and never a panic. It is meant for probes and a Prometheus scraper, not for the internet.
//!
//! - `/livez` (and `/healthz`, its older name, as kube components keep it): `200 ok`
//!   while every liveness check passes (for a controller: its
//!   reflector, its manifest watcher and at least one worker are alive and not stuck past
//!   their bounds), else `503` naming each failed check and why.
//! - `/readyz`: `200 ok` when every readiness check passes (the controller's cache has synced;
//!   callers add more, e.g. "is leading"), else `503` naming each failed check and why.
//!   `?verbose` lists every check.
//! - `/metrics`: every registered source in the Prometheus text format, merged so each
//!   metric family has one `HELP`/`TYPE` header, `autoregister_build_info` among them.
//!   No sample reads `-0`.
//!
//! ```no_run
//! # fn demo(controller: &autoregister::controller::Controller) -> std::io::Result<()> {
//! use autoregister::ops::{OpsServer, OpsSources};
//! let server = OpsServer::start("127.0.0.1:8080", OpsSources::for_controller(controller))?;
//! println!("serving on {}", server.local_addr());
//! server.shutdown();
//! # Ok(()) }
//! ```

mod build_info;
mod health;
mod metrics;
mod process;
mod request;
mod server;
mod sources;

pub use build_info::BuildInfo;
pub use health::ReadyCheck;
pub use metrics::{compose, MetricsSource, CONTENT_TYPE};
pub use process::ProcessMetrics;
pub use request::MAX_HEAD_BYTES;
pub use server::{OpsServer, IO_TIMEOUT, MAX_CONNECTIONS};
pub use sources::OpsSources;
