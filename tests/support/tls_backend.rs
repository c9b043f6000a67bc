//! A minimal aggregated API backend for tests: TLS with a CA of its own and a serving
//! certificate for `SERVICE.NAMESPACE.svc`, answering the discovery document of one
//! group/version, with behaviours a test switches (serve, answer a status, accept and never
//! answer) and a record of the headers each request carried.
//!
//! Use with `#[path = "support/tls_backend.rs"] mod tls_backend;`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// What the backend does with a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Answers discovery for its group/version (200), anything else 404.
    Serve,
    /// Answers every request with this status.
    Status(u16),
    /// Accepts the connection and never reads or writes (a hung process).
    Hang,
}

/// A CA and a serving certificate it signed.
pub struct Issued {
    /// The CA, PEM: what an APIService's `caBundle` holds.
    pub ca_pem: String,
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its key, PEM.
    pub key_pem: String,
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl Issued {
    /// A fresh CA named `ca_name` and a certificate for `names` (DNS names or IPs).
    pub fn new(ca_name: &str, names: &[&str]) -> Issued {
        Issued::issue(ca_name, names, false)
    }

    /// As [`new`](Self::new), with a serving certificate that expired in 2020.
    pub fn expired(ca_name: &str, names: &[&str]) -> Issued {
        Issued::issue(ca_name, names, true)
    }

    fn issue(ca_name: &str, names: &[&str], expired: bool) -> Issued {
        let ca_key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, ca_name);
        let ca = p.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut p = CertificateParams::new(names.clone()).unwrap();
        p.distinguished_name.push(DnType::CommonName, &names[0]);
        if expired {
            p.not_before = rcgen::date_time_ymd(2019, 1, 1);
            p.not_after = rcgen::date_time_ymd(2020, 1, 1);
        }
        let cert = p.signed_by(&key, &ca, &ca_key).unwrap();
        Issued {
            ca_pem: ca.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert: cert.der().to_vec(),
            key: key.serialize_der(),
        }
    }

    fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(self.cert.clone())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone())),
            )
            .unwrap();
        Arc::new(config)
    }
}

struct Shared {
    mode: Mutex<Mode>,
    group_version: String,
    stopping: AtomicBool,
    /// The header names (lowercase) and values of every request read.
    requests: Mutex<Vec<Vec<(String, String)>>>,
    /// Connections held open (hanging ones too), closed on stop.
    open: Mutex<Vec<TcpStream>>,
}

/// A running backend; stops (and closes every connection) on [`stop`](Self::stop) or drop.
pub struct TlsBackend {
    addr: SocketAddr,
    /// The CA of its serving certificate.
    pub ca_pem: String,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl TlsBackend {
    /// Serves `group/version` on `listener` with a certificate from `issued`.
    pub fn start(listener: TcpListener, issued: &Issued, group: &str, version: &str) -> TlsBackend {
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            mode: Mutex::new(Mode::Serve),
            group_version: format!("{group}/{version}"),
            stopping: AtomicBool::new(false),
            requests: Mutex::new(Vec::new()),
            open: Mutex::new(Vec::new()),
        });
        let config = issued.server_config();
        let s = shared.clone();
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if s.stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                if let Ok(copy) = stream.try_clone() {
                    s.open.lock().unwrap().push(copy);
                }
                let (s, config) = (s.clone(), config.clone());
                std::thread::spawn(move || serve(&s, config, stream));
            }
        });
        TlsBackend {
            addr,
            ca_pem: issued.ca_pem.clone(),
            shared,
            accept: Some(accept),
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Switches what it does with the next connections.
    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap() = mode;
    }

    /// The headers of every request it read, oldest first.
    pub fn requests(&self) -> Vec<Vec<(String, String)>> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Stops listening and closes every open connection; the port refuses from now on.
    pub fn stop(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept with one last connection.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        let _ = accept.join();
        for s in self.shared.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for TlsBackend {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve(s: &Shared, config: Arc<rustls::ServerConfig>, mut tcp: TcpStream) {
    let mode = *s.mode.lock().unwrap();
    if mode == Mode::Hang {
        // Held open by `open` until stop; nothing is read or written.
        return;
    }
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, &mut tcp);
    let mut line = String::new();
    let mut headers = Vec::new();
    {
        // The requests read here have no body: nothing is left in the buffer.
        let mut reader = BufReader::new(&mut tls);
        if reader.read_line(&mut line).is_err() {
            return;
        }
        loop {
            let mut h = String::new();
            match reader.read_line(&mut h) {
                Ok(n) if n > 2 => {
                    if let Some((k, v)) = h.trim_end().split_once(':') {
                        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                    }
                }
                _ => break,
            }
        }
    }
    s.requests.lock().unwrap().push(headers);
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let (code, body) = match mode {
        Mode::Status(code) => (code, String::new()),
        _ if path == format!("/apis/{}", s.group_version) => (
            200,
            serde_json::json!({
                "kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": s.group_version, "resources": [],
            })
            .to_string(),
        ),
        _ => (404, String::new()),
    };
    let _ = write!(
        tls,
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tls.flush();
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

/// On the test server: Service `ns/name` (its ClusterIP allocated on loopback) with a ready
/// EndpointSlice, and a listener on that ClusterIP whose port is the Service's. The port is
/// picked by binding the ClusterIP, then written into the Service and the slice, so no
/// other listener on the machine can hold it.
pub fn service_on(
    server: &autoregister::testserver::TestServer,
    ns: &str,
    name: &str,
) -> TcpListener {
    use serde_json::json;
    let svc = server
        .create_object_as(
            "test",
            "services",
            Some(ns),
            json!({"metadata": {"name": name}, "spec": {"ports": [{"name": "https", "port": 1}]}}),
        )
        .unwrap();
    let ip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
    assert!(ip.starts_with("127.1.0."), "{svc}");
    let listener = TcpListener::bind((ip.as_str(), 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    server
        .update_object_as("test", "services", Some(ns), name, |s| {
            s["spec"]["ports"] = json!([{"name": "https", "port": port}]);
        })
        .unwrap();
    server
        .create_object_as(
            "test",
            "endpointslices",
            Some(ns),
            json!({
                "metadata": {"name": format!("{name}-1"), "labels": {"kubernetes.io/service-name": name}},
                "addressType": "FQDN",
                "endpoints": [{"addresses": ["backend.localhost"], "conditions": {"ready": true}}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            }),
        )
        .unwrap();
    listener
}

/// On the test server: marks the endpoint of [`service_on`]'s slice ready or not.
pub fn set_ready_on(
    server: &autoregister::testserver::TestServer,
    ns: &str,
    name: &str,
    ready: bool,
) {
    server
        .update_object_as(
            "test",
            "endpointslices",
            Some(ns),
            &format!("{name}-1"),
            |s| {
                s["endpoints"][0]["conditions"]["ready"] = serde_json::json!(ready);
            },
        )
        .unwrap();
}

/// `GET path` over TLS to `addr`, verifying the certificate against `ca_pem` for `host`:
/// (status code, body). Panics when the exchange fails.
pub fn tls_get(addr: &str, host: &str, ca_pem: &[u8], path: &str) -> (u16, String) {
    try_tls_get(addr, host, ca_pem, path).unwrap_or_else(|e| panic!("GET {path} from {addr}: {e}"))
}

/// [`tls_get`], with the failure (a refused handshake, say) as an error.
pub fn try_tls_get(
    addr: &str,
    host: &str,
    ca_pem: &[u8],
    path: &str,
) -> std::io::Result<(u16, String)> {
    use rustls_pki_types::pem::PemObject;
    let bad = |e: &dyn std::fmt::Display| std::io::Error::other(e.to_string());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(c.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(&e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from(host.to_string()).map_err(|e| bad(&e))?;
    let conn = rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| bad(&e))?;
    let mut tls = rustls::StreamOwned::new(conn, TcpStream::connect(addr)?);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut reader = BufReader::new(tls);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let code = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad(&format!("no status line: {line:?}")))?;
    let mut length = 0;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        if h.trim().is_empty() {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().map_err(|e| bad(&e))?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    String::from_utf8(body)
        .map(|b| (code, b))
        .map_err(|e| bad(&e))
}
