//! kube-aggregator's discovery check of one backend: `GET /apis/GROUP/VERSION` over TLS,
//! the serving certificate verified against the APIService's `caBundle` for
//! `SERVICE.NAMESPACE.svc` (or not at all with `insecureSkipTLSVerify`), within 5 s; any
//! answer outside 2xx, or none, fails it with kube-aggregator's message.
//!
//! As `AvailableConditionController.sync` and `BuildTransportConfig` in kube-aggregator's
//! `pkg/controllers/status/remote/remote_available_controller.go` (v0.36): the same URL,
//! headers and wording, with one attempt where upstream races five (on loopback the five
//! answer alike). No credential is sent: upstream presents the front-proxy client
//! certificate, which the test server does not have, and nothing else.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{CertificateError, ClientConfig, RootCertStore};

/// The discovery client's timeout (`discoveryClient.Timeout`).
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);

/// Go's `http.Client` error when its timeout ends a request in flight. Upstream's five
/// racing attempts also report it as `net/http: request canceled while waiting for
/// connection (Client.Timeout ...)` or a bare `context deadline exceeded`, by where the
/// timeout caught the one that failed last.
const TIMED_OUT: &str =
    "context deadline exceeded (Client.Timeout exceeded while awaiting headers)";

/// Everything one check depends on (the cache key of its result).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Target {
    /// `host:port`: the Service's ClusterIP and port (`proxy.ResolveCluster`).
    pub(crate) host_port: String,
    /// `/apis/GROUP/VERSION` (`/api/VERSION` for the legacy `v1.`).
    pub(crate) path: String,
    /// `SERVICE.NAMESPACE.svc`: the name the certificate must be valid for.
    pub(crate) server_name: String,
    /// `spec.caBundle`, decoded (PEM).
    pub(crate) ca_bundle: Vec<u8>,
    /// `spec.insecureSkipTLSVerify`.
    pub(crate) insecure: bool,
}

impl Target {
    /// The URL upstream names in its messages.
    pub(crate) fn url(&self) -> String {
        format!("https://{}{}", self.host_port, self.path)
    }

    /// The TLS client configuration upstream's `transport.New` would build, or its error
    /// when the bundle holds no certificate (upstream then writes no condition at all).
    pub(crate) fn tls_config(&self) -> Result<Arc<ClientConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let config = if self.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(
                    crate::client::tls::AcceptAnyServer::new(
                        provider.signature_verification_algorithms,
                    ),
                ))
                .with_no_client_auth()
        } else {
            let mut roots = RootCertStore::empty();
            // An empty bundle means the system's roots to Go, which trust no test CA.
            if !self.ca_bundle.is_empty() {
                let (certs, _) = crate::client::tls::pem_roots(&self.ca_bundle);
                if certs.is_empty() {
                    return Err(
                        "unable to load root certificates: unable to parse bytes as PEM block"
                            .into(),
                    );
                }
                for c in certs {
                    roots.add(c).map_err(|e| e.to_string())?;
                }
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        Ok(Arc::new(config))
    }
}

/// One check with `config` (from [`Target::tls_config`]): `Ok` on a 2xx answer within
/// `timeout`, else the condition message upstream writes.
pub(crate) fn check(
    target: &Target,
    config: Arc<ClientConfig>,
    timeout: Duration,
) -> Result<(), String> {
    let url = target.url();
    match get(target, config, Instant::now() + timeout) {
        Ok(code) if (200..300).contains(&code) => Ok(()),
        Ok(code) => Err(format!(
            "failing or missing response from {url}: bad status from {url}: {code}"
        )),
        Err(e) => Err(format!(
            "failing or missing response from {url}: Get \"{url}\": {e}"
        )),
    }
}

/// The request upstream sends, and the status of the answer; errors worded as Go's.
fn get(target: &Target, config: Arc<ClientConfig>, deadline: Instant) -> Result<u16, String> {
    let timed_out = || TIMED_OUT.to_string();
    let dial = |e: io::Error| format!("dial tcp {}: {}", target.host_port, go_errno(&e));
    let addr = target
        .host_port
        .to_socket_addrs()
        .map_err(dial)?
        .next()
        .ok_or_else(|| format!("dial tcp {}: no address", target.host_port))?;
    let left = deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(timed_out)?;
    let tcp = TcpStream::connect_timeout(&addr, left).map_err(|e| match e.kind() {
        io::ErrorKind::TimedOut => timed_out(),
        _ => dial(e),
    })?;
    let name = ServerName::try_from(target.server_name.clone()).map_err(|e| e.to_string())?;
    let conn = rustls::ClientConnection::new(config, name).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, Deadlined { tcp, deadline });
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: Go-http-client/1.1\r\n\
         X-Remote-Group: system:masters\r\nX-Remote-User: system:kube-aggregator\r\n\
         Accept-Encoding: gzip\r\n\r\n",
        target.path, target.host_port
    );
    let wire = |e: io::Error| wire_error(&e, target);
    tls.write_all(request.as_bytes()).map_err(wire)?;
    tls.flush().map_err(wire)?;
    let mut line = String::new();
    BufReader::new(&mut tls)
        .read_line(&mut line)
        .map_err(wire)?;
    if line.is_empty() {
        return Err("EOF".into());
    }
    // `HTTP/1.1 200 OK`
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("net/http: malformed HTTP status code {:?}", line.trim_end()))
}

/// A TCP stream whose every read and write ends at `deadline` (the client's total timeout).
struct Deadlined {
    tcp: TcpStream,
    deadline: Instant,
}

impl Deadlined {
    fn left(&self) -> io::Result<Duration> {
        self.deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| io::Error::from(io::ErrorKind::TimedOut))
    }
}

impl Read for Deadlined {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.tcp.set_read_timeout(Some(self.left()?))?;
        self.tcp.read(buf)
    }
}

impl Write for Deadlined {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tcp.set_write_timeout(Some(self.left()?))?;
        self.tcp.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

/// An error during the handshake or the exchange, as Go's transport words it.
fn wire_error(e: &io::Error, target: &Target) -> String {
    if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        return tls_error(tls, &target.server_name);
    }
    match e.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => TIMED_OUT.into(),
        io::ErrorKind::UnexpectedEof => "EOF".into(),
        _ => format!("read tcp {}: {}", target.host_port, go_errno(e)),
    }
}

/// A rustls error in Go's `crypto/tls` and `crypto/x509` words where they match.
fn tls_error(e: &rustls::Error, server_name: &str) -> String {
    let verify = |why: String| format!("tls: failed to verify certificate: x509: {why}");
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                verify("certificate signed by unknown authority".into())
            }
            // Go's `HostnameError` for a DNS name lists the certificate's DNS names only.
            CertificateError::NotValidForNameContext { presented, .. } => {
                let names: Vec<&str> = presented
                    .iter()
                    .filter_map(|n| n.strip_prefix("DnsName(\"")?.strip_suffix("\")"))
                    .collect();
                if names.is_empty() {
                    verify(format!(
                        "certificate is not valid for any names, but wanted to match {server_name}"
                    ))
                } else {
                    verify(format!(
                        "certificate is valid for {}, not {server_name}",
                        names.join(", ")
                    ))
                }
            }
            CertificateError::NotValidForName => {
                verify(format!("certificate is not valid for {server_name}"))
            }
            CertificateError::ExpiredContext { time, not_after } => verify(format!(
                "certificate has expired or is not yet valid: current time {} is after {}",
                rfc3339(*time),
                rfc3339(*not_after)
            )),
            CertificateError::NotValidYetContext { time, not_before } => verify(format!(
                "certificate has expired or is not yet valid: current time {} is before {}",
                rfc3339(*time),
                rfc3339(*not_before)
            )),
            CertificateError::Expired | CertificateError::NotValidYet => {
                verify("certificate has expired or is not yet valid".into())
            }
            other => verify(format!("{other:?}")),
        },
        other => format!("tls: {other}"),
    }
}

fn rfc3339(t: rustls::pki_types::UnixTime) -> String {
    let at = std::time::UNIX_EPOCH + Duration::from_secs(t.as_secs());
    crate::api::time::format_rfc3339(at)
}

/// The errno text Go prints (`connect: connection refused`), from an io error.
fn go_errno(e: &io::Error) -> String {
    let what = match e.kind() {
        io::ErrorKind::ConnectionRefused => "connect: connection refused",
        io::ErrorKind::ConnectionReset => "read: connection reset by peer",
        io::ErrorKind::AddrNotAvailable => "connect: cannot assign requested address",
        _ => return e.to_string(),
    };
    what.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(insecure: bool, ca: &[u8]) -> Target {
        Target {
            host_port: "127.0.0.1:1".into(),
            path: "/apis/g/v".into(),
            server_name: "svc.ns.svc".into(),
            ca_bundle: ca.to_vec(),
            insecure,
        }
    }

    #[test]
    fn a_bundle_without_a_certificate_is_upstreams_transport_error() {
        let e = target(false, b"not pem").tls_config().unwrap_err();
        assert_eq!(
            e,
            "unable to load root certificates: unable to parse bytes as PEM block"
        );
        assert!(target(false, b"").tls_config().is_ok());
        assert!(target(true, b"not pem").tls_config().is_ok());
    }

    #[test]
    fn tls_errors_read_as_go_words_them() {
        let unknown = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        assert_eq!(
            tls_error(&unknown, "svc.ns.svc"),
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        );
        let name = rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("svc.ns.svc").unwrap().to_owned(),
            presented: vec![
                r#"DnsName("other.ns.svc")"#.into(),
                "IpAddress(127.1.0.2)".into(),
            ],
        });
        assert_eq!(
            tls_error(&name, "svc.ns.svc"),
            "tls: failed to verify certificate: x509: certificate is valid for other.ns.svc, not svc.ns.svc"
        );
        let ip_only = rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("svc.ns.svc").unwrap().to_owned(),
            presented: vec!["IpAddress(127.1.0.2)".into()],
        });
        assert_eq!(
            tls_error(&ip_only, "svc.ns.svc"),
            "tls: failed to verify certificate: x509: certificate is not valid for any names, but wanted to match svc.ns.svc"
        );
    }
}
