//! Exec credential plugins (`client.authentication.k8s.io/v1` and `v1beta1`): run, parse, cache.

use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use parking_lot::{Condvar, Mutex};
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;
use rustls::SignatureScheme;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use serde_json::json;

use super::child::{self, Bounds, RunError};
use super::config::{Config, ExecConfig};
use super::Error;

const V1: &str = "client.authentication.k8s.io/v1";
const V1BETA1: &str = "client.authentication.k8s.io/v1beta1";

/// Longest plugin stderr we quote in an error.
const MAX_STDERR: usize = 2048;

/// Most bytes read from a plugin's stdout or stderr: an ExecCredential is a few KB, a
/// certificate chain a few more; a plugin writing more is broken (and would cost memory).
pub(crate) const MAX_OUTPUT: usize = 1 << 20;

/// A plugin still running after this long is logged ("waiting for exec plugin NAME"), so a
/// stall (login prompt, dead metadata server) shows in the log instead of looking like a hang.
const SLOW_AFTER: Duration = Duration::from_secs(2);

/// How often a thread waiting for another's plugin run checks its own bounds.
const WAIT_SLICE: Duration = Duration::from_millis(20);

/// Kills every exec credential plugin running now, with what it started: for a process
/// about to exit at once (a second SIGTERM), whose plugins run in their own process group
/// and would outlive it. A plugin run that is cancelled instead ends the same way by itself.
pub fn kill_running_plugins() {
    child::kill_running();
}

/// A credential plugin and its cached answer.
pub(crate) struct ExecPlugin {
    config: ExecConfig,
    /// The `KUBERNETES_EXEC_INFO` value.
    exec_info: String,
    /// Longest run before the plugin is killed.
    timeout: Duration,
    state: Mutex<Cache>,
    /// Notified when a run ends, for threads waiting for its answer.
    ran: Condvar,
}

/// The cached answer and whether a run is in progress (at most one at a time). The lock is
/// never held while the plugin runs: other requests wait on `ran` with their own bounds.
#[derive(Default)]
struct Cache {
    credential: Option<Credential>,
    running: bool,
    /// Runs finished so far.
    runs: u64,
    /// The last run that failed (its number and error): threads that waited for it get
    /// that error instead of running the plugin again one after another.
    failure: Option<(u64, Error)>,
}

impl Credential {
    fn is_valid(&self) -> bool {
        self.expires.is_none_or(|t| SystemTime::now() < t)
    }
}

/// A plugin's answer: a token, a client certificate, or both.
#[derive(Clone)]
pub(crate) struct Credential {
    pub(crate) token: Option<String>,
    pub(crate) cert: Option<Arc<CertifiedKey>>,
    pub(crate) expires: Option<SystemTime>,
}

/// Plugins by configuration, shared by every client in the process (as client-go does), so
/// the transport's certificate and the authenticator's token come from one run.
type Registry = Mutex<HashMap<(ExecConfig, String, Duration), Arc<ExecPlugin>>>;
static REGISTRY: OnceLock<Registry> = OnceLock::new();

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecCredential {
    api_version: Option<String>,
    kind: Option<String>,
    status: Option<ExecStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecStatus {
    token: Option<String>,
    expiration_timestamp: Option<String>,
    client_certificate_data: Option<String>,
    client_key_data: Option<String>,
}

impl ExecPlugin {
    /// The plugin for this configuration, shared with other clients using the same one;
    /// checks the configuration, the plugin itself runs at the first request.
    pub(crate) fn shared(config: &Config, exec: &ExecConfig) -> Result<Arc<Self>, Error> {
        let plugin = Self::new(config, exec)?;
        let registry = REGISTRY.get_or_init(Registry::default);
        let key = (exec.clone(), plugin.exec_info.clone(), plugin.timeout);
        Ok(registry
            .lock()
            .entry(key)
            .or_insert_with(|| Arc::new(plugin))
            .clone())
    }

    fn new(config: &Config, exec: &ExecConfig) -> Result<Self, Error> {
        let bad = |m: String| Err(Error::Auth(format!("exec plugin {}: {m}", exec.command)));
        if exec.api_version != V1 && exec.api_version != V1BETA1 {
            return bad(format!(
                "apiVersion {:?} is not supported (use {V1} or {V1BETA1})",
                exec.api_version
            ));
        }
        match exec.interactive_mode.as_deref() {
            None if exec.api_version == V1 => {
                return bad(format!("interactiveMode must be set for {V1}"))
            }
            None | Some("Never") | Some("IfAvailable") => {}
            Some("Always") => {
                return bad(
                    "interactiveMode Always needs a terminal, which this program never has".into(),
                )
            }
            Some(other) => return bad(format!("unknown interactiveMode {other:?}")),
        }
        let mut spec = json!({ "interactive": false });
        if exec.provide_cluster_info {
            // client-go's ConfigToExecCluster: the server as written, TLS settings, and the
            // cluster's `client.authentication.k8s.io/exec` extension as `config`.
            let server = exec.cluster_server.as_deref().unwrap_or(&config.server);
            let mut cluster = json!({ "server": server });
            if let Some(name) = &config.tls.server_name {
                cluster["tls-server-name"] = json!(name);
            }
            if config.tls.insecure_skip_verify {
                cluster["insecure-skip-tls-verify"] = json!(true);
            }
            if let Some(ca) = &config.tls.ca_pem {
                cluster["certificate-authority-data"] =
                    json!(base64::engine::general_purpose::STANDARD.encode(ca));
            }
            if let Some(extension) = &exec.cluster_config {
                let value: serde_json::Value = serde_json::from_slice(extension.as_bytes())
                    .map_err(|e| Error::Config(format!("exec extension: {e}")))?;
                if !value.is_null() {
                    cluster["config"] = value;
                }
            }
            spec["cluster"] = cluster;
        }
        let exec_info = json!({
            "apiVersion": exec.api_version,
            "kind": "ExecCredential",
            "spec": spec,
        })
        .to_string();
        Ok(ExecPlugin {
            config: exec.clone(),
            exec_info,
            timeout: config.exec_timeout,
            state: Mutex::new(Cache::default()),
            ran: Condvar::new(),
        })
    }

    /// The credential, from the cache while it has not expired, else from a fresh run (one
    /// at a time: a request arriving during a run waits for its answer). Gives up at `until`
    /// or when `cancelled()`; a run of ours is then killed.
    pub(crate) fn credential(
        &self,
        until: Instant,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Credential, Error> {
        let mut state = self.state.lock();
        let runs_before = state.runs;
        loop {
            if let Some(c) = state.credential.as_ref().filter(|c| c.is_valid()) {
                return Ok(c.clone());
            }
            if let Some((run, e)) = &state.failure {
                if *run > runs_before {
                    return Err(e.clone());
                }
            }
            if !state.running {
                break;
            }
            if cancelled() {
                return Err(Error::Cancelled);
            }
            let now = Instant::now();
            if now >= until {
                return Err(self.fail("timed out waiting for another run of the plugin"));
            }
            let slice = crate::runtime::clock::deadline_after(now, WAIT_SLICE).min(until);
            self.ran.wait_until(&mut state, slice);
        }
        state.running = true;
        drop(state);
        let result = self.run(until, cancelled);
        let mut state = self.state.lock();
        state.running = false;
        state.runs += 1;
        match &result {
            Ok(c) => state.credential = Some(c.clone()),
            // A cancelled run says nothing about the plugin: a waiter runs it itself.
            Err(e) if e.is_cancelled() => {}
            Err(e) => state.failure = Some((state.runs, e.clone())),
        }
        drop(state);
        self.ran.notify_all();
        result
    }

    /// The last credential the plugin gave, expired or not; never runs the plugin. Every
    /// request asks [`credential`](Self::credential) first, which runs the plugin again
    /// when this one expired, so this is the freshest answer there is: as client-go, a
    /// certificate that arrived already expired is still used for that request.
    pub(crate) fn last(&self) -> Option<Credential> {
        self.state.lock().credential.clone()
    }

    /// The bearer token, if the plugin gives one (it may give only a client certificate).
    pub(crate) fn token(
        &self,
        until: Instant,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<String>, Error> {
        Ok(self.credential(until, cancelled)?.token)
    }

    /// Drops the cached token so the next request runs the plugin again.
    pub(crate) fn invalidate(&self) -> bool {
        self.state.lock().credential = None;
        true
    }

    fn fail(&self, m: impl std::fmt::Display) -> Error {
        let hint = match &self.config.install_hint {
            Some(h) => format!("\n{}", h.trim()),
            None => String::new(),
        };
        Error::Auth(format!("exec plugin {}: {m}{hint}", self.config.command))
    }

    /// Runs the plugin once, killed after [`Config::exec_timeout`], at `until` or on cancel.
    fn run(&self, until: Instant, cancelled: &dyn Fn() -> bool) -> Result<Credential, Error> {
        let mut cmd = Command::new(&self.config.command);
        cmd.args(&self.config.args)
            .envs(self.config.env.iter().map(|(k, v)| (k, v)))
            .env("KUBERNETES_EXEC_INFO", &self.exec_info);
        let bounds = Bounds {
            until: crate::runtime::clock::deadline_after(Instant::now(), self.timeout).min(until),
            max_output: MAX_OUTPUT,
            cancelled,
            slow_after: SLOW_AFTER,
            on_slow: &|| log::info!("waiting for exec plugin {}", self.config.command),
        };
        let out = match child::run(&mut cmd, &bounds) {
            Ok(out) => out,
            Err(RunError::Cancelled) => return Err(Error::Cancelled),
            Err(e) => return Err(self.fail(e)),
        };
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stderr: String = stderr.trim().chars().take(MAX_STDERR).collect();
            return Err(self.fail(format!("{}: {stderr}", out.status)));
        }
        self.parse(&out.stdout)
    }

    fn parse(&self, stdout: &[u8]) -> Result<Credential, Error> {
        let cred: ExecCredential = serde_json::from_slice(stdout)
            .map_err(|e| self.fail(format!("answer is not an ExecCredential: {e}")))?;
        if cred.kind.as_deref() != Some("ExecCredential") {
            return Err(self.fail(format!(
                "answer has kind {:?}, want ExecCredential",
                cred.kind.unwrap_or_default()
            )));
        }
        if cred.api_version.as_deref() != Some(self.config.api_version.as_str()) {
            return Err(self.fail(format!(
                "answer has apiVersion {:?}, want {:?}",
                cred.api_version.unwrap_or_default(),
                self.config.api_version
            )));
        }
        let status = cred
            .status
            .ok_or_else(|| self.fail("answer has no status"))?;
        let expires = match status.expiration_timestamp.as_deref() {
            None | Some("") => None,
            Some(t) => Some(
                crate::api::time::parse_rfc3339(t)
                    .ok_or_else(|| self.fail(format!("bad status.expirationTimestamp {t:?}")))?,
            ),
        };
        let cert = match (status.client_certificate_data, status.client_key_data) {
            (Some(c), Some(k)) if !c.is_empty() && !k.is_empty() => {
                Some(self.certified_key(c.as_bytes(), k.as_bytes())?)
            }
            (None, None) => None,
            _ => return Err(self.fail("answer needs both clientCertificateData and clientKeyData")),
        };
        let token = status.token.filter(|t| !t.is_empty());
        if token.is_none() && cert.is_none() {
            return Err(self.fail("answer has neither status.token nor a client certificate"));
        }
        Ok(Credential {
            token,
            cert,
            expires,
        })
    }

    fn certified_key(&self, cert: &[u8], key: &[u8]) -> Result<Arc<CertifiedKey>, Error> {
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.fail(format!("clientCertificateData: {e}")))?;
        if chain.is_empty() {
            return Err(self.fail("clientCertificateData holds no PEM certificate"));
        }
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| self.fail(format!("clientKeyData: {e}")))?;
        let provider = rustls::crypto::ring::default_provider();
        CertifiedKey::from_der(chain, key, &provider)
            .map(Arc::new)
            .map_err(|e| self.fail(format!("client certificate: {e}")))
    }
}

/// Presents the plugin's client certificate in each TLS handshake, re-running the plugin
/// when it expired, so rotated certificates are used by new connections.
#[derive(Debug)]
pub(crate) struct ExecClientCert(pub(crate) Arc<ExecPlugin>);

impl std::fmt::Debug for ExecPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecPlugin")
            .field("command", &self.config.command)
            .finish()
    }
}

impl ResolvesClientCert for ExecClientCert {
    fn resolve(&self, _hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        // Never runs the plugin here, inside a TLS handshake nothing can cancel: every
        // request asks for its credential first (bounded, cancellable), which fills the
        // cache (see `last`).
        self.0.last().and_then(|c| c.cert)
    }

    fn has_certs(&self) -> bool {
        true
    }
}
