//! Where and how to connect: server URL, TLS trust, credentials, limits.

use std::path::PathBuf;
use std::time::Duration;

/// Everything needed to build a [`Client`](super::Client).
#[derive(Clone, Debug)]
pub struct Config {
    /// Base URL, e.g. `https://10.0.0.1:6443` or `http://127.0.0.1:8080` (no trailing slash).
    pub server: String,
    /// Server trust and client certificate.
    pub tls: TlsConfig,
    /// Credentials sent with every request.
    pub auth: AuthConfig,
    /// Client-side rate limit in requests per second; `0` disables it.
    pub qps: f32,
    /// Requests allowed in a burst above `qps`.
    pub burst: u32,
    /// Total time allowed for one non-watch request.
    pub timeout: Duration,
    /// Time allowed to establish a connection.
    pub connect_timeout: Duration,
    /// Where this configuration came from, for messages (e.g. `kubeconfig /root/.kube/config, context kind`).
    pub origin: String,
}

/// TLS settings for the connection to the API server.
#[derive(Clone, Debug, Default)]
pub struct TlsConfig {
    /// PEM CA certificates to trust; none means the connection must be plain HTTP or insecure.
    pub ca_pem: Option<Vec<u8>>,
    /// Skip server certificate verification (kubeconfig `insecure-skip-tls-verify`).
    pub insecure_skip_verify: bool,
    /// Name to verify the server certificate against instead of the URL's host.
    pub server_name: Option<String>,
    /// PEM client certificate chain.
    pub client_cert_pem: Option<Vec<u8>>,
    /// PEM client private key (RSA, ECDSA or Ed25519).
    pub client_key_pem: Option<Vec<u8>>,
}

/// How the client authenticates.
#[derive(Clone, Debug, Default)]
pub enum AuthConfig {
    /// No credentials (or client certificate only).
    #[default]
    None,
    /// A fixed bearer token.
    Token(String),
    /// A bearer token re-read from a file (service-account tokens rotate).
    TokenFile(PathBuf),
    /// HTTP basic auth.
    Basic {
        /// User name.
        username: String,
        /// Password.
        password: String,
    },
}

/// Default client-side limits: kube-controller-manager's recommended QPS 50 / burst 100.
pub const DEFAULT_QPS: f32 = 50.0;
/// See [`DEFAULT_QPS`].
pub const DEFAULT_BURST: u32 = 100;

impl Config {
    /// A configuration for `server` with no TLS trust, no credentials and default limits.
    pub fn new(server: impl Into<String>) -> Self {
        let server: String = server.into();
        Config {
            server: server.trim_end_matches('/').to_string(),
            tls: TlsConfig::default(),
            auth: AuthConfig::None,
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            origin: "explicit server".to_string(),
        }
    }
}
