//! An aggregated API server in plain Rust (std threads and rustls, no async runtime) that
//! registers its own APIService while it runs, as a real one behind kube-apiserver's
//! aggregator does: it serves TLS with a certificate for `SERVICE.NAMESPACE.svc`, puts the
//! CA that verifies it in its APIService (`caBundle`, or a CA source the controller keeps
//! current), answers discovery for `widgets.example.com/v1alpha1` and a small list of
//! Widgets, repairs its registration when someone deletes it, and deregisters on SIGTERM.
//!
//! ```text
//! apiserver [--listen ADDR] [--service NAMESPACE/NAME] [--port PORT] [--no-register]
//!           [--tls-cert FILE --tls-key FILE [--ca-file FILE] [--ca-from-secret NS/NAME[:KEY]]]
//! ```
//!
//! Without `--tls-cert`, it generates a CA and a serving certificate at start and registers
//! with that CA as `caBundle` (one replica; each start brings a new CA). With them, it serves
//! the files, re-read when they change (a cert-manager renewal, a Secret volume's update),
//! and names where the CA lives: a file, or a Secret the controller reads and follows.
//! `--no-register` serves only, for a cluster where something else registers it (the
//! `autoregister` binary and a manifest). The cluster is found as kubectl finds it
//! (`KUBECONFIG`, `~/.kube/config`, else in-cluster).
//!
//! kube-apiserver presents its front-proxy client certificate and `X-Remote-*` headers;
//! this server does not authenticate them (its Widgets are public) and never sends a
//! request's credentials anywhere.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

use autoregister::{
    APIService, APIServiceSpec, CaSource, Client, Config, ConnectOptions, Controller,
    ControllerOptions, ServiceReference,
};
use parking_lot::RwLock;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};

/// This program's own ownership label.
const LABEL_KEY: &str = "widgets.example.com/registered-by";
/// The group and version this server serves, and the APIService naming them.
pub const GROUP: &str = "widgets.example.com";
/// The served version.
pub const VERSION: &str = "v1alpha1";
/// `VERSION.GROUP`, as the API requires.
pub const NAME: &str = "v1alpha1.widgets.example.com";
/// How often `--tls-cert`/`--tls-key` are read again.
const RELOAD_EVERY: Duration = Duration::from_secs(2);

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Where the serving certificate comes from.
#[derive(Clone, Debug)]
pub enum Tls {
    /// A CA and certificate generated at start.
    Generate,
    /// PEM files, re-read when they change, and where the CA that verifies them lives.
    Files {
        /// The certificate chain.
        cert: PathBuf,
        /// Its private key.
        key: PathBuf,
        /// The CA for `caBundle` (none with `--no-register`: whoever registers knows it).
        ca: Option<CaSource>,
    },
}

/// What the server is told on its command line.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where to listen (`127.0.0.1:8443`).
    pub listen: String,
    /// The Service in front of it: its namespace ...
    pub namespace: String,
    /// ... its name ...
    pub service: String,
    /// ... and its port (443).
    pub port: u16,
    /// The serving certificate.
    pub tls: Tls,
    /// Register the APIService (off: something else does).
    pub register: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            listen: "127.0.0.1:8443".into(),
            namespace: "widgets".into(),
            service: "widgets-apiserver".into(),
            port: 443,
            tls: Tls::Generate,
            register: true,
        }
    }
}

impl Options {
    /// Parses the command line (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options> {
        let mut o = Options::default();
        let (mut cert, mut key, mut ca) = (None, None, None);
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let (flag, inline) = match flag.split_once('=') {
                Some((f, v)) => (f.to_string(), Some(v.to_string())),
                None => (flag, None),
            };
            if flag == "--no-register" {
                o.register = false;
                continue;
            }
            let value = inline
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--listen" => o.listen = value,
                "--service" => {
                    let (ns, name) = value
                        .split_once('/')
                        .ok_or("--service takes NAMESPACE/NAME")?;
                    (o.namespace, o.service) = (ns.into(), name.into());
                }
                "--port" => o.port = value.parse().map_err(|_| "--port takes a number")?,
                "--tls-cert" => cert = Some(PathBuf::from(value)),
                "--tls-key" => key = Some(PathBuf::from(value)),
                "--ca-file" => ca = Some(CaSource::File(std::path::absolute(&value)?)),
                "--ca-from-secret" => {
                    let (reference, key) = value.split_once(':').unwrap_or((&value, "ca.crt"));
                    let (namespace, name) = reference
                        .split_once('/')
                        .ok_or("--ca-from-secret takes NAMESPACE/NAME[:KEY]")?;
                    ca = Some(CaSource::Secret {
                        namespace: namespace.into(),
                        name: name.into(),
                        key: key.into(),
                    });
                }
                other => return Err(format!("unknown flag {other}").into()),
            }
        }
        o.tls = match (cert, key, ca) {
            (None, None, None) => Tls::Generate,
            (Some(_), Some(_), None) if o.register => {
                return Err(
                    "--tls-cert needs --ca-file or --ca-from-secret: the CA that \
                            verifies it goes into the APIService"
                        .into(),
                )
            }
            (Some(cert), Some(key), ca) => Tls::Files { cert, key, ca },
            (None, None, Some(_)) => return Err("--ca-* goes with --tls-cert".into()),
            _ => return Err("--tls-cert and --tls-key go together".into()),
        };
        Ok(o)
    }

    /// `SERVICE.NAMESPACE.svc`: the name kube-apiserver verifies the certificate for.
    pub fn host(&self) -> String {
        format!("{}.{}.svc", self.service, self.namespace)
    }
}

fn main() {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("apiserver: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = start(options) {
        eprintln!("apiserver: {e}");
        std::process::exit(1);
    }
}

fn start(options: Options) -> Result<()> {
    let config = if options.register {
        Some(Config::infer(&ConnectOptions::default())?)
    } else {
        None
    };
    let listener = TcpListener::bind(&options.listen)?;
    let (stop_tx, stop) = std::sync::mpsc::channel();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = stop_tx.send(());
        }
    });
    run(config, options, listener, stop)
}

/// Serves on `listener` and (unless told not to) keeps this server's APIService registered
/// through `config`'s cluster until `stop` receives (or its sender is dropped), then
/// deregisters it and stops serving.
pub fn run(
    config: Option<Config>,
    options: Options,
    listener: TcpListener,
    stop: Receiver<()>,
) -> Result<()> {
    let (certs, ca) = Certs::load(&options)?;
    let stopping = Arc::new(AtomicBool::new(false));
    if let Tls::Files { cert, key, .. } = &options.tls {
        certs.reload_until(cert.clone(), key.clone(), stopping.clone());
    }
    let addr = listener.local_addr()?;
    let tls = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(certs)),
    );
    let accept = {
        let stopping = stopping.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(stream) = stream {
                    let tls = tls.clone();
                    std::thread::spawn(move || serve(tls, stream));
                }
            }
        })
    };

    let controller = if let Some(mut config) = config.filter(|_| options.register) {
        config.user_agent = format!("widgets-apiserver/{}", env!("CARGO_PKG_VERSION"));
        let mut controller_options = ControllerOptions::new(LABEL_KEY);
        // This program's one name is removed on shutdown, and must then be deleted.
        controller_options.allow_empty = true;
        let controller = Controller::new(Client::new(config)?, controller_options);
        controller.add_api_service_to_sync(apiservice(&options, &ca));
        controller.start();
        match controller.wait_converged(Duration::from_secs(30)) {
            Ok(()) => eprintln!(
                "serving {GROUP}/{VERSION} on {addr} (TLS, {}), registered as {NAME}",
                options.host()
            ),
            Err(pending) => eprintln!("serving on {addr}; registration pending: {pending:?}"),
        }
        Some(controller)
    } else {
        eprintln!(
            "serving {GROUP}/{VERSION} on {addr} (TLS, {})",
            options.host()
        );
        None
    };

    // Until told to stop; the controller repairs the registration meanwhile.
    let _ = stop.recv();
    if let Some(controller) = controller {
        controller.remove_api_service_to_sync(NAME);
        if let Err(pending) = controller.wait_converged(Duration::from_secs(10)) {
            eprintln!("could not deregister: {pending:?}");
        }
        controller.shutdown();
        eprintln!("deregistered {NAME}");
    }
    stopping.store(true, Ordering::SeqCst);
    // Wake the blocking accept with one last connection.
    let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
    let _ = accept.join();
    eprintln!("stopped");
    Ok(())
}

/// The APIService this server registers: its Service, and the CA that verifies it.
fn apiservice(options: &Options, ca: &Ca) -> APIService {
    let mut obj = APIService::new(
        NAME,
        APIServiceSpec {
            service: Some(ServiceReference {
                namespace: options.namespace.clone().into(),
                name: options.service.clone().into(),
                port: Some(options.port.into()),
                ..Default::default()
            }),
            group: GROUP.into(),
            version: VERSION.into(),
            group_priority_minimum: 1000,
            version_priority: 15,
            ..Default::default()
        },
    );
    match ca {
        Ca::Pem(pem) => obj.spec.ca_bundle = Some(pem.clone().into_bytes().into()),
        // The controller fills caBundle from there, and again whenever it changes.
        Ca::Source(Some(source)) => source.annotate(&mut obj),
        Ca::Source(None) => {}
    }
    obj
}

/// The CA that verifies the serving certificate, for the APIService.
enum Ca {
    /// Generated here: the bundle itself.
    Pem(String),
    /// Kept elsewhere (or not known here).
    Source(Option<CaSource>),
}

/// The serving certificate handed to every handshake; replaced when its files change.
#[derive(Debug)]
struct Certs {
    current: Arc<RwLock<Arc<CertifiedKey>>>,
}

impl Certs {
    /// The certificate the options name (generated or read), and where its CA is.
    fn load(options: &Options) -> Result<(Certs, Ca)> {
        let (key, ca) = match &options.tls {
            Tls::Generate => {
                let (cert, key, ca) = generate(&options.host())?;
                (certified(cert.as_bytes(), key.as_bytes())?, Ca::Pem(ca))
            }
            Tls::Files { cert, key, ca } => (
                certified(&std::fs::read(cert)?, &std::fs::read(key)?)?,
                Ca::Source(ca.clone()),
            ),
        };
        let certs = Certs {
            current: Arc::new(RwLock::new(Arc::new(key))),
        };
        Ok((certs, ca))
    }

    /// Reads the files every [`RELOAD_EVERY`] and serves what they hold once it changes
    /// and parses (a half-written pair keeps the previous certificate).
    fn reload_until(&self, cert: PathBuf, key: PathBuf, stopping: Arc<AtomicBool>) {
        let current = self.current.clone();
        std::thread::spawn(move || {
            let mut seen = (std::fs::read(&cert).ok(), std::fs::read(&key).ok());
            while !stopping.load(Ordering::SeqCst) {
                std::thread::sleep(RELOAD_EVERY);
                let now = (std::fs::read(&cert).ok(), std::fs::read(&key).ok());
                if now == seen {
                    continue;
                }
                if let (Some(c), Some(k)) = &now {
                    match certified(c, k) {
                        Ok(new) => {
                            *current.write() = Arc::new(new);
                            eprintln!("serving the new certificate from {}", cert.display());
                        }
                        Err(e) => eprintln!("keeping the serving certificate: {e}"),
                    }
                }
                seen = now;
            }
        });
    }
}

impl ResolvesServerCert for Certs {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().clone())
    }
}

/// A certificate chain and key (PEM) ready to serve.
fn certified(cert: &[u8], key: &[u8]) -> Result<CertifiedKey> {
    let chain = CertificateDer::pem_slice_iter(cert).collect::<std::result::Result<Vec<_>, _>>()?;
    if chain.is_empty() {
        return Err("the certificate file holds no PEM certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key)?;
    let signing = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(key)?;
    Ok(CertifiedKey::new(chain, signing))
}

/// A fresh CA and a serving certificate it signed for `host` (and its short forms):
/// (certificate PEM, key PEM, CA PEM).
fn generate(host: &str) -> Result<(String, String, String)> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "widgets-apiserver-ca");
    let ca = params.self_signed(&ca_key)?;
    let key = KeyPair::generate()?;
    let service = host.trim_end_matches(".svc");
    let names = vec![
        host.to_string(),
        format!("{host}.cluster.local"),
        service.to_string(),
    ];
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name.push(DnType::CommonName, host);
    let cert = params.signed_by(&key, &ca, &ca_key)?;
    Ok((cert.pem(), key.serialize_pem(), ca.pem()))
}

/// Serves one connection: a TLS handshake, then HTTP/1.1 requests until the client closes.
fn serve(tls: Arc<rustls::ServerConfig>, mut tcp: TcpStream) {
    // An idle connection is dropped after a while; kube-apiserver dials again.
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(60)));
    let Ok(conn) = rustls::ServerConnection::new(tls) else {
        return;
    };
    let mut stream = BufReader::new(rustls::StreamOwned::new(conn, &mut tcp));
    loop {
        let Some((method, path, has_body)) = read_head(&mut stream) else {
            return;
        };
        let (code, body) = answer(&method, &path);
        let out = stream.get_mut();
        let written =
            write!(
            out,
            "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n",
            reason(code),
            body.len(),
            if has_body { "Connection: close\r\n" } else { "" },
        )
            .and_then(|()| out.write_all(body.as_bytes()))
            .and_then(|()| out.flush());
        // A request with a body is refused and the connection closed rather than read on.
        if written.is_err() || has_body {
            return;
        }
    }
}

/// Reads a request head: (method, path without query, whether a body follows); `None` at
/// the end of the connection or on garbage.
fn read_head(stream: &mut impl BufRead) -> Option<(String, String, bool)> {
    let mut line = String::new();
    if stream.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut words = line.split_whitespace();
    let method = words.next()?.to_string();
    let target = words.next()?;
    let path = target.split('?').next().unwrap_or(target).to_string();
    let mut has_body = false;
    loop {
        let mut header = String::new();
        if stream.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        // Header values (credentials among them) are not kept: only the framing matters.
        let name = header.split(':').next().unwrap_or("").to_ascii_lowercase();
        let value = header.split_once(':').map_or("", |(_, v)| v.trim());
        if (name == "content-length" && value != "0") || name == "transfer-encoding" {
            has_body = true;
        }
    }
    Some((method, path, has_body))
}

/// The answer to `method path`: discovery, the Widgets, health, else a Status.
fn answer(method: &str, path: &str) -> (u16, String) {
    if method != "GET" {
        return status(405, "MethodNotAllowed", "only GET is served");
    }
    let group_version = format!("{GROUP}/{VERSION}");
    let version = json!({"groupVersion": group_version, "version": VERSION});
    let group = json!({
        "name": GROUP, "versions": [version.clone()], "preferredVersion": version,
    });
    let base = format!("/apis/{group_version}");
    let doc = match path {
        "/healthz" | "/readyz" | "/livez" => return (200, "ok".into()),
        "/apis" => json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}),
        p if p == format!("/apis/{GROUP}") => {
            let mut g = group.clone();
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            g
        }
        p if p == base => json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{
                "name": "widgets", "singularName": "widget", "namespaced": true,
                "kind": "Widget", "verbs": ["get", "list"], "shortNames": ["wg"],
            }],
        }),
        p => match p
            .strip_prefix(&base)
            .map(|rest| rest.split('/').collect::<Vec<_>>())
        {
            Some(parts) => match parts.as_slice() {
                ["", "widgets"] => list(None),
                ["", "namespaces", ns, "widgets"] => list(Some(ns)),
                ["", "namespaces", ns, "widgets", name] => {
                    match widgets(Some(ns))
                        .into_iter()
                        .find(|w| w["metadata"]["name"] == *name)
                    {
                        Some(w) => w,
                        None => {
                            return status(
                                404,
                                "NotFound",
                                &format!("widgets.{GROUP} \"{name}\" not found"),
                            )
                        }
                    }
                }
                _ => {
                    return status(
                        404,
                        "NotFound",
                        "the server could not find the requested resource",
                    )
                }
            },
            None => {
                return status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                )
            }
        },
    };
    (200, doc.to_string())
}

/// The Widgets this server holds: two in `default`.
fn widgets(ns: Option<&str>) -> Vec<Value> {
    ["gear", "sprocket"]
        .into_iter()
        .map(|name| {
            json!({
                "apiVersion": format!("{GROUP}/{VERSION}"), "kind": "Widget",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"teeth": name.len() * 4},
            })
        })
        .filter(|w| ns.is_none_or(|n| w["metadata"]["namespace"] == n))
        .collect()
}

fn list(ns: Option<&str>) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"), "kind": "WidgetList",
        "metadata": {"resourceVersion": "1"}, "items": widgets(ns),
    })
}

fn status(code: u16, reason: &str, message: &str) -> (u16, String) {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    (code, body.to_string())
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Error",
    }
}
