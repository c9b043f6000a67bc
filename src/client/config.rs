//! Where and how to connect: server URL, TLS trust, credentials, limits.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use super::impersonation::Impersonation;
use super::server_url::redact_url;

/// Everything needed to build a [`Client`](super::Client).
///
/// # Example
///
/// kubectl's rules ([`Config::infer`]): `--kubeconfig`, else `KUBECONFIG`, else
/// `~/.kube/config`, else in-cluster; or an explicit URL ([`Config::new`]):
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("autoregister-doc-config-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let kubeconfig = dir.join("config");
/// # std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://10.0.0.1:6443', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: abc}\ncontexts:\n- name: prod\n  context: {cluster: c, user: u}\ncurrent-context: prod\n")?;
/// use autoregister::{Config, ConnectOptions};
///
/// let options = ConnectOptions {
///     kubeconfig: Some(kubeconfig), // as --kubeconfig: used alone
///     context: Some("prod".into()),
///     ..Default::default()
/// };
/// let config = Config::infer(&options)?;
/// assert_eq!(config.server, "https://10.0.0.1:6443");
///
/// let mut local = Config::new("http://127.0.0.1:8080");
/// local.user_agent = "my-apiserver/1.0".into(); // audit logs and managedFields name it
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Config {
    /// Base URL, e.g. `https://10.0.0.1:6443` or `http://127.0.0.1:8080` (no trailing slash).
    pub server: String,
    /// Server trust and client certificate.
    pub tls: TlsConfig,
    /// Credentials sent with every request.
    pub auth: AuthConfig,
    /// Act as another user (`Impersonate-*` headers on every request).
    pub impersonate: Impersonation,
    /// Client-side rate limit in requests per second; `0` disables it.
    pub qps: f32,
    /// Requests allowed in a burst above `qps`.
    pub burst: u32,
    /// Drop `qps`/`burst` once the server's first answer shows API Priority and Fairness
    /// (default); `false` keeps them whatever the server does (explicit `--qps`/`--burst`).
    pub detect_flow_control: bool,
    /// Total time allowed for one non-watch request.
    pub timeout: Duration,
    /// Time allowed to establish a connection.
    pub connect_timeout: Duration,
    /// Longest run of an exec credential plugin before it is killed (default 30 s); a
    /// request's own timeout bounds it further.
    pub exec_timeout: Duration,
    /// Hold every write for a 429's `Retry-After` and send no more writes at once than the
    /// server took (default); `false` lets each request meet its own 429 (for comparisons).
    pub throttle_writes: bool,
    /// Where this configuration came from, for messages (e.g. `kubeconfig /root/.kube/config, context kind`).
    pub origin: String,
    /// The proxy for every connection (kubeconfig `proxy-url`: http, https or socks5, with
    /// optional `user:password@`); `None` reads `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` as client-go.
    pub proxy_url: Option<String>,
    /// `User-Agent` of every request, which audit logs show: `PROGRAM/VERSION`. The default
    /// names the running executable, as client-go does, so an embedding program is told
    /// apart from the `autoregister` binary.
    pub user_agent: String,
}

/// TLS settings for the connection to the API server.
#[derive(Clone, Default)]
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
#[derive(Clone, Default)]
pub enum AuthConfig {
    /// No credentials (or client certificate only).
    #[default]
    None,
    /// A fixed bearer token.
    Token(String),
    /// A bearer token re-read from a file (service-account tokens rotate).
    TokenFile(PathBuf),
    /// kubeconfig `token` and `tokenFile` together: the file's token while it can be read
    /// (it may rotate), else `token` (client-go's precedence).
    TokenFileOr {
        /// The file read first.
        path: PathBuf,
        /// Sent when the file cannot be read or is empty.
        token: String,
    },
    /// HTTP basic auth.
    Basic {
        /// User name.
        username: String,
        /// Password.
        password: String,
    },
    /// A credential plugin run as a command (kubeconfig `users[].user.exec`).
    Exec(ExecConfig),
}

/// A kubeconfig `exec` credential plugin.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct ExecConfig {
    /// Program to run (absolute, relative to the kubeconfig's directory, or looked up in `PATH`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables `(name, value)` for the plugin.
    pub env: Vec<(String, String)>,
    /// `client.authentication.k8s.io/v1` or `client.authentication.k8s.io/v1beta1`.
    pub api_version: String,
    /// Shown when the plugin cannot be run.
    pub install_hint: Option<String>,
    /// Pass the cluster's server and CA to the plugin in `KUBERNETES_EXEC_INFO`.
    pub provide_cluster_info: bool,
    /// `Never`, `IfAvailable` or `Always`; required by v1, defaults to `IfAvailable` in v1beta1.
    pub interactive_mode: Option<String>,
    /// With `provide_cluster_info`: the server as the kubeconfig writes it (sent verbatim).
    pub cluster_server: Option<String>,
    /// With `provide_cluster_info`: the cluster's `client.authentication.k8s.io/exec`
    /// extension, as JSON text (sent as `spec.cluster.config`).
    pub cluster_config: Option<String>,
}

/// Default client-side limits for a server without API Priority and Fairness:
/// kube-controller-manager's recommended QPS 50 / burst 100.
pub const DEFAULT_QPS: f32 = 50.0;
/// See [`DEFAULT_QPS`].
pub const DEFAULT_BURST: u32 = 100;
/// Default [`Config::exec_timeout`]: a plugin that has not answered in 30 s (a cloud CLI
/// waiting on a dead metadata server, a login prompt nobody sees) will not answer.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(30);

impl Config {
    /// A configuration for `server` with no TLS trust, no credentials and default limits.
    pub fn new(server: impl Into<String>) -> Self {
        let server: String = server.into();
        Config {
            server: server.trim_end_matches('/').to_string(),
            tls: TlsConfig::default(),
            auth: AuthConfig::None,
            impersonate: Impersonation::default(),
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
            detect_flow_control: true,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            exec_timeout: DEFAULT_EXEC_TIMEOUT,
            throttle_writes: true,
            origin: "explicit server".to_string(),
            proxy_url: None,
            user_agent: default_user_agent(),
        }
    }

    /// The program named by [`user_agent`](Self::user_agent) (its first product token
    /// without the version): the default `fieldManager` of the controller's writes.
    pub fn program_name(&self) -> &str {
        let product = self
            .user_agent
            .split_whitespace()
            .next()
            .unwrap_or_default();
        match product.split('/').next() {
            Some(p) if !p.is_empty() => p,
            _ => "autoregister",
        }
    }
}

/// `autoregister/VERSION` in the `autoregister` binary; `PROGRAM autoregister/VERSION` in
/// a program embedding the library (PROGRAM: its executable's file name).
fn default_user_agent() -> String {
    let program = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        // A header token: no spaces, slashes or non-ASCII.
        .map(|p| {
            p.chars()
                .map(|c| match c {
                    'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
                    _ => '_',
                })
                .collect::<String>()
        })
        .filter(|p| !p.is_empty() && p != "autoregister");
    match program {
        Some(p) => format!("{p} {}", super::USER_AGENT),
        None => super::USER_AGENT.to_string(),
    }
}

impl Config {
    /// This configuration with a scheme on a server given as a bare `host:port`, as
    /// client-go's `DefaultServerURL` (so kubectl) chooses it: `https://` when TLS is
    /// configured (a CA, a client certificate or insecure-skip-tls-verify), else `http://`.
    pub fn with_default_scheme(mut self) -> Config {
        if !self.server.contains("://") {
            let t = &self.tls;
            let tls = t.ca_pem.is_some() || t.client_cert_pem.is_some() || t.insecure_skip_verify;
            let scheme = if tls { "https" } else { "http" };
            self.server = format!("{scheme}://{}", self.server);
        }
        self
    }
}

/// Stands in for a secret in `Debug` output, so a logged config never leaks it.
const REDACTED: &str = "<redacted>";

fn redact<T>(v: &Option<T>) -> Option<&'static str> {
    v.as_ref().map(|_| REDACTED)
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("server", &redact_url(&self.server))
            .field("tls", &self.tls)
            .field("auth", &self.auth)
            .field("impersonate", &self.impersonate)
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .field("detect_flow_control", &self.detect_flow_control)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("exec_timeout", &self.exec_timeout)
            .field("origin", &self.origin)
            .field("proxy_url", &self.proxy_url.as_ref().map(|_| REDACTED))
            .field("user_agent", &self.user_agent)
            .finish()
    }
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("ca_pem", &self.ca_pem.as_ref().map(|c| c.len()))
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .field("server_name", &self.server_name)
            .field(
                "client_cert_pem",
                &self.client_cert_pem.as_ref().map(|c| c.len()),
            )
            .field("client_key_pem", &redact(&self.client_key_pem))
            .finish()
    }
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthConfig::None => f.write_str("None"),
            AuthConfig::Token(_) => f.debug_tuple("Token").field(&REDACTED).finish(),
            AuthConfig::TokenFile(p) => f.debug_tuple("TokenFile").field(p).finish(),
            AuthConfig::TokenFileOr { path, .. } => f
                .debug_struct("TokenFileOr")
                .field("path", path)
                .field("token", &REDACTED)
                .finish(),
            AuthConfig::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &REDACTED)
                .finish(),
            AuthConfig::Exec(e) => f.debug_tuple("Exec").field(e).finish(),
        }
    }
}

impl fmt::Debug for ExecConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Plugin arguments and env often carry secrets (client secrets, API keys): names only.
        let env: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("ExecConfig")
            .field("command", &self.command)
            .field("args", &self.args.len())
            .field("env", &env)
            .field("api_version", &self.api_version)
            .field("provide_cluster_info", &self.provide_cluster_info)
            .field("interactive_mode", &self.interactive_mode)
            .field("cluster_config", &self.cluster_config.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_secrets() {
        let mut c = Config::new("https://x");
        c.auth = AuthConfig::Token("sekrit-token".into());
        c.tls.client_key_pem = Some(b"-----BEGIN PRIVATE KEY----- sekrit-key".to_vec());
        let s = format!("{c:?}");
        assert!(!s.contains("sekrit"), "{s}");
        assert!(s.contains(REDACTED));
        let b = AuthConfig::Basic {
            username: "u".into(),
            password: "sekrit-pw".into(),
        };
        assert!(!format!("{b:?}").contains("sekrit"));
        let e = AuthConfig::Exec(ExecConfig {
            command: "plugin".into(),
            args: vec!["--secret=sekrit".into()],
            env: vec![("KEY".into(), "sekrit".into())],
            ..ExecConfig::default()
        });
        let s = format!("{e:?}");
        assert!(!s.contains("sekrit") && s.contains("KEY"), "{s}");
    }

    #[test]
    fn a_bare_host_gets_the_scheme_client_go_gives_it() {
        let bare = Config::new("localhost:6443");
        assert_eq!(
            bare.clone().with_default_scheme().server,
            "http://localhost:6443"
        );
        let mut with_ca = bare.clone();
        with_ca.tls.ca_pem = Some(b"pem".to_vec());
        assert_eq!(
            with_ca.with_default_scheme().server,
            "https://localhost:6443"
        );
        let mut insecure = bare;
        insecure.tls.insecure_skip_verify = true;
        assert_eq!(
            insecure.with_default_scheme().server,
            "https://localhost:6443"
        );
        let explicit = Config::new("http://10.0.0.1:8080").with_default_scheme();
        assert_eq!(explicit.server, "http://10.0.0.1:8080");
    }
}
