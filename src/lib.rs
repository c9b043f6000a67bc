//! Keeps a declared set of Kubernetes `APIService` objects registered, without an async
//! runtime.
//!
//! A synchronous port of kube-aggregator's *autoregister* controller: blocking
//! list/watch threads fill a cache, a workqueue with per-key backoff feeds a fixed pool
//! of worker threads, and the workers call the Kubernetes REST API directly. Embed it in
//! a program that does not want tokio — typically an aggregated API server that
//! registers its own `APIService` while it runs. The guide, [`docs/library.md`][guide],
//! says the same with more context; the other pages beside it cover the `autoregister`
//! binary, the manifest format and connecting to a cluster.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use autoregister::{
//!     APIService, APIServiceSpec, Client, ConnectOptions, Config, Controller,
//!     ControllerOptions, ServiceReference,
//! };
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Connect as kubectl would: KUBECONFIG, ~/.kube/config, else in-cluster.
//!     let mut config = Config::infer(&ConnectOptions::default())?;
//!     config.user_agent = "example-apiserver/1.0".into();
//!     let client = Client::new(config)?;
//!
//!     // A label key of this program's own: every APIService carrying it is this
//!     // controller's to create, update and delete.
//!     let mut options = ControllerOptions::new("example.com/registered-by");
//!     // Removing the last name deletes it (by default an emptied set deletes nothing).
//!     options.allow_empty = true;
//!     let controller = Controller::new(client, options);
//!     controller.add_api_service_to_sync(APIService::new(
//!         "v1alpha1.example.com",
//!         APIServiceSpec {
//!             service: Some(ServiceReference {
//!                 namespace: "example".into(),
//!                 name: "example-apiserver".into(),
//!                 port: Some(443),
//!                 ..Default::default()
//!             }),
//!             group: "example.com".into(),
//!             version: "v1alpha1".into(),
//!             ca_bundle: Some(std::fs::read("/etc/example/ca.crt")?.into()),
//!             group_priority_minimum: 1000,
//!             version_priority: 15,
//!             ..Default::default()
//!         },
//!     ));
//!     controller.start();
//!     if let Err(pending) = controller.wait_converged(Duration::from_secs(30)) {
//!         eprintln!("not registered yet: {pending:?}");
//!     }
//!     // ... serve the API; the controller keeps the registration in place ...
//!
//!     // Deregister on the way out, then stop every thread the controller started.
//!     controller.remove_api_service_to_sync("v1alpha1.example.com");
//!     controller.wait_converged(Duration::from_secs(5)).ok();
//!     controller.shutdown();
//!     Ok(())
//! }
//! ```
//!
//! # The API
//!
//! Only the items re-exported here are the stable interface; the modules are internal
//! (used by the `autoregister` binary and the tests) and may change in any release.
//!
//! - [`Controller`]: the handle (`Clone + Send + Sync`; any thread may add or remove
//!   names) with upstream's registration interface —
//!   [`add_api_service_to_sync`](Controller::add_api_service_to_sync) (kept registered
//!   continuously), [`add_api_service_to_sync_on_start`](Controller::add_api_service_to_sync_on_start)
//!   (synced once, at start), [`remove_api_service_to_sync`](Controller::remove_api_service_to_sync)
//!   — and [`start`](Controller::start), [`wait_converged`](Controller::wait_converged),
//!   [`stop`](Controller::stop) (no write after it) and [`shutdown`](Controller::shutdown)
//!   (also joins every thread the controller started).
//! - [`ControllerOptions`]: workers, relist period, adoption, Events, withdrawal, and the
//!   ownership label key, which has no default.
//! - [`Config`] / [`Client`]: where and how to connect ([`Config::infer`] applies
//!   kubectl's rules to a [`ConnectOptions`]; [`Config::new`] takes an explicit URL).
//! - [`APIService`], [`APIServiceSpec`], [`ServiceReference`], [`ObjectMeta`]: the API
//!   types; fields the crate does not model survive a round trip unchanged.
//! - [`parse_api_services`] and [`load_manifests`]: APIServices from YAML/JSON text or
//!   from files, checked as the `autoregister` binary checks its manifests.
//! - [`CaSource`]: a Secret, ConfigMap or file that `spec.caBundle` follows as it rotates.
//!
//! # Choose your own label key
//!
//! Every APIService carrying the key with `true` or `onstart` is this controller's to
//! create, update and delete; two programs sharing one key delete each other's objects.
//! [`ControllerOptions::new`] takes the key: there is no default.
//!
//! # Events, logs and names
//!
//! Events are recorded only when [`ControllerOptions::events_instance`] is set. Logs go
//! through the [`log`](https://docs.rs/log) facade: install any logger. Requests carry
//! [`Config::user_agent`] (by default your executable's name beside `autoregister/VERSION`)
//! and writes the same program name as `fieldManager`, so audit logs and `managedFields`
//! name your program.
//!
//! # Features
//!
//! - `cli` (default): the `autoregister` binary's own dependencies (argument parsing,
//!   the logging backend, signal handling). Embedders use `default-features = false`.
//! - `testing`: an in-process Kubernetes API server for tests (see the guide's
//!   [`docs/testserver.md`][testserver]); never in a release build.
//!
//! [guide]: https://docs.rs/crate/autoregister/latest/source/docs/library.md
//! [testserver]: https://docs.rs/crate/autoregister/latest/source/docs/testserver.md
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[doc(hidden)]
pub mod api;
#[doc(hidden)]
pub mod build_info;
#[doc(hidden)]
pub mod client;
#[doc(hidden)]
pub mod controller;
#[doc(hidden)]
pub mod diagnosis;
mod hash;
#[doc(hidden)]
pub mod ops;
mod prometheus;
#[doc(hidden)]
pub mod runtime;
#[doc(hidden)]
pub mod sort;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testserver;
#[doc(hidden)]
pub mod text;
mod token_bucket;
mod yaml;

pub use api::{
    APIService, APIServiceCondition, APIServiceSpec, APIServiceStatus, Extra, ObjectMeta,
    ServiceReference, StringMap,
};
pub use client::{
    AuthConfig, Client, Config, ConfigError, ConnectOptions, Error, ExecConfig, Impersonation,
    TlsConfig,
};
pub use controller::ca::{CaBundle, CaSource, CertSummary};
pub use controller::manifests::parse_api_services;
pub use controller::{
    load as load_manifests, Controller, ControllerOptions, Desired, ManifestError, Pending,
    SyncMode,
};

// The guides' Rust blocks are compiled, and run unless marked `no_run`, as doctests: the
// README's library example, docs/library.md, and docs/testserver.md (which needs `testing`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/library.md")]
pub struct LibraryGuideDoctests;

#[cfg(all(doctest, feature = "testing"))]
#[doc = include_str!("../docs/testserver.md")]
pub struct TestServerGuideDoctests;
