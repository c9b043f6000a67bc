//! autoregister: keeps a declared set of Kubernetes APIService objects registered.
//!
//! A synchronous port of kube-aggregator's autoregister controller: blocking
//! list/watch threads fill a cache, a workqueue with per-key backoff feeds a
//! fixed pool of worker threads, and the workers call the REST API directly.
//! No async runtime.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod api;
pub mod build_info;
pub mod client;
pub mod controller;
pub mod ops;
mod prometheus;
pub mod runtime;
#[cfg(feature = "testing")]
pub mod testserver;
pub mod text;
mod token_bucket;
mod yaml;
