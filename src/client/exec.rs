//! Exec credential plugins (`client.authentication.k8s.io/v1` and `v1beta1`): run, parse, cache.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use parking_lot::Mutex;
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;
use rustls::SignatureScheme;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use serde_json::json;

use super::config::{Config, ExecConfig};
use super::Error;

const V1: &str = "client.authentication.k8s.io/v1";
const V1BETA1: &str = "client.authentication.k8s.io/v1beta1";

/// Longest plugin stderr we quote in an error.
const MAX_STDERR: usize = 2048;

/// A credential plugin and its cached answer.
pub(crate) struct ExecPlugin {
    config: ExecConfig,
    /// The `KUBERNETES_EXEC_INFO` value.
    exec_info: String,
    cache: Mutex<Option<Credential>>,
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
type Registry = Mutex<HashMap<(ExecConfig, String), Arc<ExecPlugin>>>;
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
        let key = (exec.clone(), plugin.exec_info.clone());
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
            let mut cluster = json!({ "server": config.server });
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
            cache: Mutex::new(None),
        })
    }

    /// The credential, from the cache while it has not expired, else from a fresh run.
    pub(crate) fn credential(&self) -> Result<Credential, Error> {
        // Held across the run so concurrent requests start the plugin once.
        let mut cache = self.cache.lock();
        if let Some(c) = cache.as_ref() {
            if c.expires.map_or(true, |t| SystemTime::now() < t) {
                return Ok(c.clone());
            }
        }
        let c = self.run()?;
        *cache = Some(c.clone());
        Ok(c)
    }

    /// The bearer token, if the plugin gives one (it may give only a client certificate).
    pub(crate) fn token(&self) -> Result<Option<String>, Error> {
        Ok(self.credential()?.token)
    }

    /// Drops the cached token so the next request runs the plugin again.
    pub(crate) fn invalidate(&self) -> bool {
        *self.cache.lock() = None;
        true
    }

    fn fail(&self, m: impl std::fmt::Display) -> Error {
        let hint = match &self.config.install_hint {
            Some(h) => format!("\n{}", h.trim()),
            None => String::new(),
        };
        Error::Auth(format!("exec plugin {}: {m}{hint}", self.config.command))
    }

    fn run(&self) -> Result<Credential, Error> {
        let out = Command::new(&self.config.command)
            .args(&self.config.args)
            .envs(self.config.env.iter().map(|(k, v)| (k, v)))
            .env("KUBERNETES_EXEC_INFO", &self.exec_info)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| self.fail(format!("cannot run: {e}")))?;
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
                parse_rfc3339(t)
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
        // A failing plugin here means no certificate; the request's own credential lookup
        // reports the plugin's error.
        match self.0.credential() {
            Ok(c) => c.cert,
            Err(e) => {
                log::debug!("no client certificate from the exec plugin: {e}");
                None
            }
        }
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, the RFC 3339 timestamps Kubernetes writes.
pub(crate) fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let mut n: u64 = 0;
        for (i, c) in frac[..digits].bytes().enumerate() {
            if i < 9 {
                n = n * 10 + u64::from(c - b'0');
            }
        }
        for _ in digits..9 {
            n *= 10;
        }
        nanos = u32::try_from(n).ok()?;
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes()[3] != b':' {
                return None;
            }
            let h: i64 = rest[1..3].parse().ok()?;
            let m: i64 = rest[4..6].parse().ok()?;
            sign * (h * 3600 + m * 60)
        }
    };
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + min * 60 + sec - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> u64 {
        parse_rfc3339(s)
            .unwrap()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    #[test]
    fn rfc3339_parses_kubernetes_timestamps() {
        assert_eq!(at("1970-01-01T00:00:00Z"), 0);
        assert_eq!(at("2024-02-29T12:34:56Z"), 1_709_210_096);
        assert_eq!(at("2024-02-29T14:34:56+02:00"), 1_709_210_096);
        assert_eq!(at("2024-02-29T12:04:56-00:30"), 1_709_210_096);
        let t = parse_rfc3339("2030-01-01T00:00:00.250Z").unwrap();
        assert_eq!(t.duration_since(UNIX_EPOCH).unwrap().subsec_millis(), 250);
        assert_eq!(at("2030-01-01T00:00:00Z"), 1_893_456_000);
    }

    #[test]
    fn rfc3339_rejects_garbage() {
        for bad in [
            "",
            "2024-02-29",
            "2024-02-29T12:34:56",
            "2024-13-01T00:00:00Z",
            "2024-02-29T12:34:56+0200",
            "2024-02-29T12:34:56.Z",
            "abcd-02-29T12:34:56Z",
            "2024-02-29T12:34:56Zjunk",
        ] {
            assert!(parse_rfc3339(bad).is_none(), "{bad}");
        }
    }
}
