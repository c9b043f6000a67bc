//! Blocking Kubernetes REST client over one shared `ureq` agent with rustls.

mod auth;
mod child;
mod config;
mod created_uid;
mod error;
mod exec;
mod impersonation;
mod incluster;
mod infer;
mod kubeconfig;
mod metrics;
mod proxy;
mod ratelimit;
mod resolver;
mod rest;
mod server_url;
mod throttle;
pub(crate) mod tls;
mod transport;
mod typed_api;
mod version;
mod watch;

pub use config::{
    AuthConfig, Config, ExecConfig, Impersonation, TlsConfig, DEFAULT_BURST, DEFAULT_EXEC_TIMEOUT,
    DEFAULT_QPS,
};
pub use error::{ApiError, Error, MAX_RETRY_AFTER};
pub use exec::kill_running_plugins;
pub use infer::{ConfigError, ConnectOptions, InferEnv, SERVICE_ACCOUNT_DIR};
pub use metrics::{RestMetrics, ERROR_CODE};
pub use rest::{Client, WriteGate, MAX_BODY_BYTES};
pub use server_url::redact_url;
pub use transport::Canceller;
pub use typed_api::{Api, DeleteParams, ListParams, WatchParams, WATCH_SLACK};
pub use version::ServerVersion;
pub use watch::{WatchStream, MAX_EVENT_BYTES};

/// `User-Agent` sent with every request.
pub const USER_AGENT: &str = concat!("autoregister/", env!("CARGO_PKG_VERSION"));
