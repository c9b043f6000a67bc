//! The connection half of the client against real loopback servers: TLS trust, server-name
//! override, client certificates, token files, exec plugins and watch cancellation.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use autoregister::api::APIService;
use autoregister::client::{
    Api, AuthConfig, Canceller, Client, Config, Error, ExecConfig, WatchParams,
};
use rcgen::{
    BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair, SignatureAlgorithm,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection, StreamOwned};

// ---------------------------------------------------------------------------------------------
// Certificates

struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A certificate and its key, as PEM for the client and DER for the server.
struct Issued {
    cert_pem: String,
    key_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: PrivateKeyDer<'static>,
}

impl Ca {
    fn new() -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = p.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    fn pem(&self) -> Vec<u8> {
        self.cert.pem().into_bytes()
    }

    fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.cert.der().clone()).unwrap();
        roots
    }

    fn issue(&self, names: &[&str], client: bool, alg: &'static SignatureAlgorithm) -> Issued {
        let key = KeyPair::generate_for(alg).unwrap();
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut p = CertificateParams::new(names).unwrap();
        p.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn server_tls(cert: &Issued, client_ca: Option<&Ca>) -> Arc<ServerConfig> {
    let b = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let b = match client_ca {
        Some(ca) => b.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(Arc::new(ca.roots()), provider())
                .build()
                .unwrap(),
        ),
        None => b.with_no_client_auth(),
    };
    Arc::new(
        b.with_single_cert(vec![cert.cert_der.clone()], cert.key_der.clone_key())
            .unwrap(),
    )
}

// ---------------------------------------------------------------------------------------------
// A small HTTP/1.1 server, thread per connection, keep-alive.

/// What the server answers to one request.
enum Reply {
    Json(u16, String),
    /// Chunked headers, then silence until the client goes away.
    HangAfterHeaders,
    /// No answer at all until the client goes away.
    HangBeforeHeaders,
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

#[derive(Clone, Debug)]
struct Request {
    path: String,
    authorization: Option<String>,
}

#[derive(Default)]
struct Seen {
    requests: Vec<Request>,
    sni: Vec<Option<String>>,
    connections: usize,
    handshake_failures: usize,
    hanging: usize,
}

struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
}

impl Server {
    fn start(tls: Option<Arc<ServerConfig>>, handler: Handler) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                let Ok(tcp) = tcp else { return };
                let (tls, handler, seen) = (tls.clone(), handler.clone(), s.clone());
                std::thread::spawn(move || serve_connection(tcp, tls, handler, seen));
            }
        });
        Server { addr, seen }
    }

    fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}", self.addr)
    }

    fn auth_headers(&self) -> Vec<Option<String>> {
        let seen = self.seen.lock().unwrap();
        seen.requests
            .iter()
            .map(|r| r.authorization.clone())
            .collect()
    }
}

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

fn serve_connection(
    mut tcp: TcpStream,
    tls: Option<Arc<ServerConfig>>,
    handler: Handler,
    seen: Arc<Mutex<Seen>>,
) {
    seen.lock().unwrap().connections += 1;
    let stream: Box<dyn Stream> = match tls {
        None => Box::new(tcp),
        Some(config) => {
            let mut conn = ServerConnection::new(config).unwrap();
            while conn.is_handshaking() {
                if conn.complete_io(&mut tcp).is_err() {
                    seen.lock().unwrap().handshake_failures += 1;
                    return;
                }
            }
            seen.lock()
                .unwrap()
                .sni
                .push(conn.server_name().map(str::to_string));
            Box::new(StreamOwned::new(conn, tcp))
        }
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut authorization = None;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("authorization") {
                    authorization = Some(v.trim().to_string());
                }
            }
        }
        let req = Request {
            path,
            authorization,
        };
        seen.lock().unwrap().requests.push(req.clone());
        let out = reader.get_mut();
        match handler(&req) {
            Reply::Json(code, body) => {
                let head = format!(
                    "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                );
                if out.write_all(head.as_bytes()).is_err()
                    || out.write_all(body.as_bytes()).is_err()
                    || out.flush().is_err()
                {
                    return;
                }
            }
            Reply::HangAfterHeaders => {
                let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
                let _ = out.write_all(head.as_bytes());
                let _ = out.flush();
                seen.lock().unwrap().hanging += 1;
                // Blocks until the client closes its end.
                let _ = std::io::copy(&mut reader, &mut std::io::sink());
                return;
            }
            Reply::HangBeforeHeaders => {
                seen.lock().unwrap().hanging += 1;
                let _ = std::io::copy(&mut reader, &mut std::io::sink());
                return;
            }
        }
    }
}

fn apiservice_json(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{{"name":"{name}"}},"spec":{{"group":"example.com","version":"v1","groupPriorityMinimum":100,"versionPriority":10}}}}"#
    )
}

fn unauthorized() -> Reply {
    Reply::Json(
        401,
        r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401,"message":"Unauthorized"}"#.into(),
    )
}

/// Answers every GET of an APIService with that object.
fn ok_handler() -> Handler {
    Arc::new(|r: &Request| {
        let name = r.path.rsplit('/').next().unwrap_or("");
        Reply::Json(200, apiservice_json(name))
    })
}

/// Answers only requests carrying `Bearer {token}` where token is the current value of `good`.
fn token_handler(good: Arc<Mutex<String>>) -> Handler {
    Arc::new(move |r: &Request| {
        let want = format!("Bearer {}", good.lock().unwrap());
        if r.authorization.as_deref() == Some(want.as_str()) {
            Reply::Json(200, apiservice_json("v1.example.com"))
        } else {
            unauthorized()
        }
    })
}

fn get(config: Config) -> Result<APIService, Error> {
    let client = Client::new(config)?;
    Api::<APIService>::all(client).get("v1.example.com")
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ar-client-tls-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A TLS server for 127.0.0.1 answering with `handler`, and a client config trusting it:
/// credentials are only ever sent over TLS.
fn secure(handler: Handler) -> (Server, Config) {
    let ca = Ca::new();
    let cert = ca.issue(
        &["127.0.0.1", "api.internal"],
        false,
        &rcgen::PKCS_ECDSA_P256_SHA256,
    );
    let server = Server::start(Some(server_tls(&cert, None)), handler);
    let mut config = Config::new(server.url("https"));
    config.tls.ca_pem = Some(ca.pem());
    (server, config)
}

fn tls_server(ca: &Ca, names: &[&str]) -> Server {
    let cert = ca.issue(names, false, &rcgen::PKCS_ECDSA_P256_SHA256);
    Server::start(Some(server_tls(&cert, None)), ok_handler())
}

// ---------------------------------------------------------------------------------------------
// TLS

#[test]
fn verifies_a_server_signed_by_the_configured_ca_and_pools_connections() {
    let ca = Ca::new();
    let server = tls_server(&ca, &["127.0.0.1"]);
    let mut config = Config::new(server.url("https"));
    config.tls.ca_pem = Some(ca.pem());
    let api = Api::<APIService>::all(Client::new(config).unwrap());
    for _ in 0..3 {
        let got = api.get("v1.example.com").unwrap();
        assert_eq!(got.metadata.name.as_deref(), Some("v1.example.com"));
    }
    assert_eq!(
        server.seen.lock().unwrap().connections,
        1,
        "one pooled connection"
    );
}

#[test]
fn a_server_signed_by_another_ca_is_a_tls_error() {
    let ca = Ca::new();
    let server = tls_server(&ca, &["127.0.0.1"]);
    let mut config = Config::new(server.url("https"));
    config.tls.ca_pem = Some(Ca::new().pem());
    match get(config) {
        Err(Error::Tls(m)) => assert!(m.contains("certificate"), "{m}"),
        other => panic!("want Error::Tls, got {other:?}"),
    }
    // No CA at all: nothing is trusted (the public web's roots are not built in).
    assert!(matches!(
        get(Config::new(server.url("https"))),
        Err(Error::Tls(_))
    ));
}

#[test]
fn tls_server_name_verifies_against_that_name_and_is_sent_as_sni() {
    let ca = Ca::new();
    let server = tls_server(&ca, &["api.internal"]);
    let mut config = Config::new(server.url("https"));
    config.tls.ca_pem = Some(ca.pem());
    // The certificate does not name 127.0.0.1.
    assert!(matches!(get(config.clone()), Err(Error::Tls(_))));
    config.tls.server_name = Some("api.internal".into());
    get(config).unwrap();
    let sni = server.seen.lock().unwrap().sni.clone();
    assert_eq!(
        sni.last().cloned().flatten().as_deref(),
        Some("api.internal")
    );
}

#[test]
fn insecure_skip_tls_verify_accepts_an_unknown_certificate() {
    let server = tls_server(&Ca::new(), &["somewhere.else"]);
    let mut config = Config::new(server.url("https"));
    config.tls.insecure_skip_verify = true;
    get(config).unwrap();
}

#[test]
fn plain_http_needs_no_tls_and_gets_no_credential() {
    let server = Server::start(None, ok_handler());
    get(Config::new(server.url("http"))).unwrap();
    // Credentials go only over TLS: a token, a password or a client certificate
    // configured for an http:// server is not sent (a warning says so).
    let mut config = Config::new(server.url("http"));
    config.auth = AuthConfig::Token("never-in-clear".into());
    get(config.clone()).unwrap();
    config.auth = AuthConfig::Basic {
        username: "u".into(),
        password: "p".into(),
    };
    get(config).unwrap();
    let url = server.url("http").replacen("http://", "http://u:pw@", 1);
    get(Config::new(url)).unwrap();
    assert_eq!(server.auth_headers(), [None, None, None, None]);
}

#[test]
fn client_certificate_authenticates_and_its_absence_fails() {
    let ca = Ca::new();
    let clients = Ca::new();
    let cert = ca.issue(&["127.0.0.1"], false, &rcgen::PKCS_ECDSA_P256_SHA256);
    let server = Server::start(Some(server_tls(&cert, Some(&clients))), ok_handler());
    let mut config = Config::new(server.url("https"));
    config.tls.ca_pem = Some(ca.pem());

    for alg in [&rcgen::PKCS_ECDSA_P256_SHA256, &rcgen::PKCS_ED25519] {
        let id = clients.issue(&["me"], true, alg);
        let mut c = config.clone();
        c.tls.client_cert_pem = Some(id.cert_pem.into_bytes());
        c.tls.client_key_pem = Some(id.key_pem.into_bytes());
        get(c).unwrap_or_else(|e| panic!("{alg:?}: {e}"));
    }

    match get(config.clone()) {
        Err(e @ Error::Tls(_)) => assert!(e.to_string().contains("Certificate"), "{e}"),
        other => panic!("want Error::Tls, got {other:?}"),
    }
    // A certificate from a CA the server does not trust fails the same way.
    let stranger = Ca::new().issue(&["me"], true, &rcgen::PKCS_ECDSA_P256_SHA256);
    config.tls.client_cert_pem = Some(stranger.cert_pem.into_bytes());
    config.tls.client_key_pem = Some(stranger.key_pem.into_bytes());
    assert!(matches!(get(config), Err(Error::Tls(_))));
}

#[test]
fn an_expired_server_certificate_is_refused_naming_the_expiry() {
    let ca = Ca::new();
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    p.not_before = rcgen::date_time_ymd(2000, 1, 1);
    p.not_after = rcgen::date_time_ymd(2000, 12, 31);
    let cert = p.signed_by(&key, &ca.cert, &ca.key).unwrap();
    let issued = Issued {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_der: cert.der().clone(),
        key_der: PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
    };
    let server = Server::start(Some(server_tls(&issued, None)), ok_handler());
    let mut config = Config::new(server.url("https"));
    config.tls.ca_pem = Some(ca.pem());
    match get(config) {
        Err(Error::Tls(m)) => assert!(m.contains("expired"), "{m}"),
        other => panic!("want Error::Tls, got {other:?}"),
    }
    assert!(
        server.seen.lock().unwrap().requests.is_empty(),
        "no request crossed the refused handshake"
    );
}

#[test]
fn a_client_key_that_does_not_match_its_certificate_is_refused_before_connecting() {
    let ca = Ca::new();
    let id = ca.issue(&["me"], true, &rcgen::PKCS_ECDSA_P256_SHA256);
    let other = ca.issue(&["me"], true, &rcgen::PKCS_ECDSA_P256_SHA256);
    let mut config = Config::new("https://127.0.0.1:1");
    config.tls.client_cert_pem = Some(id.cert_pem.into_bytes());
    config.tls.client_key_pem = Some(other.key_pem.into_bytes());
    match Client::new(config).err() {
        Some(Error::Config(m)) => assert!(m.contains("does not match"), "{m}"),
        other => panic!("want Error::Config, got {other:?}"),
    }
}

#[test]
fn unusable_tls_material_is_a_config_error() {
    let mut config = Config::new("https://127.0.0.1:1");
    config.tls.ca_pem = Some(b"not a certificate".to_vec());
    assert!(matches!(Client::new(config), Err(Error::Config(_))));
    let mut config = Config::new("https://127.0.0.1:1");
    config.tls.client_cert_pem = Some(Ca::new().pem());
    config.tls.client_key_pem =
        Some(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_vec());
    assert!(matches!(Client::new(config), Err(Error::Config(_))));
}

// ---------------------------------------------------------------------------------------------
// Tokens

#[test]
fn rotated_token_file_is_picked_up_after_a_401() {
    let dir = temp_dir("tokenfile");
    let path = dir.join("token");
    std::fs::write(&path, "first\n").unwrap();
    let good = Arc::new(Mutex::new("first".to_string()));
    let (server, mut config) = secure(token_handler(good.clone()));
    config.auth = AuthConfig::TokenFile(path.clone());
    let api = Api::<APIService>::all(Client::new(config).unwrap());
    api.get("v1.example.com").unwrap();
    // The token rotates: the server only takes the new one, the file holds it.
    *good.lock().unwrap() = "second".into();
    std::fs::write(&path, "second\n").unwrap();
    api.get("v1.example.com").unwrap();
    assert_eq!(
        server.auth_headers(),
        [
            Some("Bearer first".into()),
            Some("Bearer first".into()),
            Some("Bearer second".into())
        ]
    );
    // A 401 with an unchanged file is not retried.
    *good.lock().unwrap() = "third".into();
    let e = api.get("v1.example.com").unwrap_err();
    assert!(e.is_unauthorized(), "{e}");
    assert_eq!(server.auth_headers().len(), 4);
}

#[test]
fn static_token_and_basic_auth_headers() {
    let (server, mut config) = secure(ok_handler());
    config.auth = AuthConfig::Token("abc".into());
    get(config.clone()).unwrap();
    config.auth = AuthConfig::Basic {
        username: "admin".into(),
        password: "pw".into(),
    };
    get(config).unwrap();
    assert_eq!(
        server.auth_headers(),
        [Some("Bearer abc".into()), Some("Basic YWRtaW46cHc=".into())]
    );
}

// ---------------------------------------------------------------------------------------------
// Exec plugins

const V1: &str = "client.authentication.k8s.io/v1";

/// A plugin that records its KUBERNETES_EXEC_INFO and run count in `dir`, and answers
/// token `exec-token-N` (N = run number) with apiVersion $APIV expiring at $EXP.
fn plugin(dir: &Path) -> PathBuf {
    let path = dir.join("plugin.sh");
    std::fs::write(
        &path,
        r#"#!/bin/sh
printf '%s' "$KUBERNETES_EXEC_INFO" > "$DIR/info.json"
echo run >> "$DIR/runs"
n=$(wc -l < "$DIR/runs" | tr -d ' ')
if [ -n "$SLEEP" ]; then sleep "$SLEEP"; fi
if [ -n "$FAIL" ]; then echo "  plugin broke: $FAIL  " >&2; exit 3; fi
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"exec-token-%s","expirationTimestamp":"%s"}}' "$APIV" "$n" "$EXP"
"#,
    )
    .unwrap();
    let mut perm = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&path, perm).unwrap();
    path
}

fn exec_config(dir: &Path, answer_version: &str, expires: &str) -> ExecConfig {
    ExecConfig {
        command: plugin(dir).to_string_lossy().into_owned(),
        args: vec![],
        env: vec![
            ("DIR".into(), dir.to_string_lossy().into_owned()),
            ("APIV".into(), answer_version.into()),
            ("EXP".into(), expires.into()),
        ],
        api_version: V1.into(),
        install_hint: Some("install the plugin from example.com".into()),
        provide_cluster_info: true,
        interactive_mode: Some("Never".into()),
        cluster_server: None,
        cluster_config: None,
    }
}

fn runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn exec_plugin_token_is_cached_until_expiry_and_gets_exec_info() {
    let dir = temp_dir("exec-cache");
    let (server, mut config) = secure(ok_handler());
    config.tls.server_name = Some("api.internal".into());
    config.auth = AuthConfig::Exec(exec_config(&dir, V1, "2999-01-01T00:00:00Z"));
    let api = Api::<APIService>::all(Client::new(config).unwrap());
    assert_eq!(
        runs(&dir),
        0,
        "the plugin runs at the first request, not before"
    );
    api.get("a").unwrap();
    api.get("b").unwrap();
    assert_eq!(runs(&dir), 1);
    assert_eq!(
        server.auth_headers(),
        [
            Some("Bearer exec-token-1".into()),
            Some("Bearer exec-token-1".into())
        ]
    );
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("info.json")).unwrap()).unwrap();
    assert_eq!(info["apiVersion"], V1);
    assert_eq!(info["kind"], "ExecCredential");
    assert_eq!(info["spec"]["interactive"], false);
    assert_eq!(info["spec"]["cluster"]["server"], server.url("https"));
    assert_eq!(info["spec"]["cluster"]["tls-server-name"], "api.internal");
}

#[test]
fn exec_plugin_runs_once_for_concurrent_requests_which_wait_for_its_answer() {
    let dir = temp_dir("exec-concurrent");
    let (_server, mut config) = secure(ok_handler());
    let mut exec = exec_config(&dir, V1, "2999-01-01T00:00:00Z");
    exec.env.push(("SLEEP".into(), "0.3".into()));
    config.auth = AuthConfig::Exec(exec);
    let api = Api::<APIService>::all(Client::new(config).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let api = api.clone();
            std::thread::spawn(move || api.get(&format!("n{i}")).map(drop))
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    assert_eq!(runs(&dir), 1, "one run served every waiting request");
}

#[test]
fn a_failed_exec_run_answers_every_request_that_waited_for_it() {
    let dir = temp_dir("exec-concurrent-fail");
    let (_server, mut config) = secure(ok_handler());
    let mut exec = exec_config(&dir, V1, "2999-01-01T00:00:00Z");
    exec.env.push(("SLEEP".into(), "0.5".into()));
    exec.env.push(("FAIL".into(), "no credentials".into()));
    config.auth = AuthConfig::Exec(exec);
    let api = Api::<APIService>::all(Client::new(config).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let api = api.clone();
            std::thread::spawn(move || api.get(&format!("n{i}")).map(drop))
        })
        .collect();
    for t in threads {
        let e = t.join().unwrap().unwrap_err();
        assert!(e.to_string().contains("no credentials"), "{e}");
    }
    assert_eq!(
        runs(&dir),
        1,
        "the waiters took the failed run's answer, not a run each"
    );
}

#[test]
fn exec_plugin_past_its_timeout_is_killed_and_the_request_fails_naming_it() {
    let dir = temp_dir("exec-timeout");
    let (server, mut config) = secure(ok_handler());
    config.exec_timeout = Duration::from_millis(300);
    let mut exec = exec_config(&dir, V1, "2999-01-01T00:00:00Z");
    exec.env.push(("SLEEP".into(), "30".into()));
    config.auth = AuthConfig::Exec(exec);
    let api = Api::<APIService>::all(Client::new(config).unwrap());
    let t0 = std::time::Instant::now();
    let e = api.get("a").unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let text = e.to_string();
    assert!(text.contains("plugin.sh: did not answer within"), "{text}");
    assert!(
        server.auth_headers().is_empty(),
        "nothing sent without a credential"
    );
}

#[test]
fn exec_plugin_reruns_when_the_token_expired() {
    let dir = temp_dir("exec-expired");
    let (_server, mut config) = secure(ok_handler());
    config.auth = AuthConfig::Exec(exec_config(&dir, V1, "2001-01-01T00:00:00Z"));
    let api = Api::<APIService>::all(Client::new(config).unwrap());
    api.get("a").unwrap();
    api.get("b").unwrap();
    assert_eq!(runs(&dir), 2);
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("info.json")).unwrap()).unwrap();
    assert!(info["spec"]["cluster"].get("tls-server-name").is_none());
}

#[test]
fn exec_plugin_reruns_after_a_401() {
    let dir = temp_dir("exec-401");
    let good = Arc::new(Mutex::new("exec-token-2".to_string()));
    let (server, mut config) = secure(token_handler(good));
    config.auth = AuthConfig::Exec(exec_config(&dir, V1, ""));
    get(config).unwrap();
    assert_eq!(runs(&dir), 2);
    assert_eq!(
        server.auth_headers(),
        [
            Some("Bearer exec-token-1".into()),
            Some("Bearer exec-token-2".into())
        ]
    );
}

#[test]
fn exec_plugin_v1_without_interactive_mode_is_refused() {
    let dir = temp_dir("exec-mode");
    let mut exec = exec_config(&dir, V1, "");
    exec.interactive_mode = None;
    let mut config = Config::new("https://127.0.0.1:1");
    config.auth = AuthConfig::Exec(exec.clone());
    match Client::new(config.clone()) {
        Err(Error::Auth(m)) => assert!(m.contains("interactiveMode must be set"), "{m}"),
        other => panic!("{:?}", other.err()),
    }
    exec.interactive_mode = Some("Always".into());
    config.auth = AuthConfig::Exec(exec.clone());
    match Client::new(config.clone()) {
        Err(Error::Auth(m)) => assert!(m.contains("terminal"), "{m}"),
        other => panic!("{:?}", other.err()),
    }
    // v1beta1 defaults to IfAvailable.
    exec.interactive_mode = None;
    exec.api_version = "client.authentication.k8s.io/v1beta1".into();
    config.auth = AuthConfig::Exec(exec);
    assert!(Client::new(config).is_ok());
    assert_eq!(runs(&dir), 0);
}

#[test]
fn exec_plugin_answer_with_another_api_version_is_an_error() {
    let dir = temp_dir("exec-version");
    let (server, mut config) = secure(ok_handler());
    config.auth = AuthConfig::Exec(exec_config(
        &dir,
        "client.authentication.k8s.io/v1beta1",
        "",
    ));
    match get(config) {
        Err(Error::Auth(m)) => assert!(m.contains("apiVersion"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(server.auth_headers().is_empty(), "nothing sent");
}

#[test]
fn failing_exec_plugin_reports_stderr_and_install_hint() {
    let dir = temp_dir("exec-fail");
    let mut config = Config::new("https://127.0.0.1:1");
    let mut exec = exec_config(&dir, V1, "");
    exec.env.push(("FAIL".into(), "no login".into()));
    config.auth = AuthConfig::Exec(exec.clone());
    match get(config.clone()) {
        Err(Error::Auth(m)) => {
            assert!(m.contains(": plugin broke: no login\n"), "{m}");
            assert!(m.ends_with("install the plugin from example.com"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    exec.command = dir.join("missing").to_string_lossy().into_owned();
    config.auth = AuthConfig::Exec(exec);
    match get(config) {
        Err(Error::Auth(m)) => assert!(m.contains("install the plugin"), "{m}"),
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Watch cancellation

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn hanging_server(reply: fn() -> Reply) -> (Server, Api<APIService>) {
    let ca = Ca::new();
    let cert = ca.issue(&["127.0.0.1"], false, &rcgen::PKCS_ECDSA_P256_SHA256);
    let server = Server::start(
        Some(server_tls(&cert, None)),
        Arc::new(move |_: &Request| reply()),
    );
    let mut config = Config::new(server.url("https"));
    config.tls.ca_pem = Some(ca.pem());
    let api = Api::<APIService>::all(Client::new(config).unwrap());
    (server, api)
}

fn watch_params() -> WatchParams {
    WatchParams {
        timeout_seconds: 300,
        ..WatchParams::default()
    }
}

#[test]
fn a_watch_silent_past_its_idle_timeout_fails_as_a_dead_connection() {
    // Headers, then nothing: what a half-open connection looks like from the client.
    let (_server, api) = hanging_server(|| Reply::HangAfterHeaders);
    let idle = Duration::from_millis(300);
    let params = WatchParams {
        idle_timeout: Some(idle),
        ..watch_params()
    };
    let started = Instant::now();
    let mut stream = api.watch(&params, &Canceller::new()).unwrap();
    let first = stream.next();
    let took = started.elapsed();
    match first {
        Some(Err(Error::Timeout(m))) => assert!(m.contains("presumed dead"), "{m}"),
        other => panic!("expected an idle timeout, got {other:?}"),
    }
    assert!(took >= idle, "cut after {took:?}, before the idle timeout");
    assert!(
        took < Duration::from_secs(10),
        "noticed after {took:?}, not long before the watch's 300 s timeout"
    );
    assert!(stream.next().is_none(), "the stream ends after the error");
}

#[test]
fn cancel_unblocks_a_watch_waiting_for_events() {
    let (server, api) = hanging_server(|| Reply::HangAfterHeaders);
    let cancel = Canceller::new();
    let c = cancel.clone();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let watcher = std::thread::spawn(move || {
        let mut stream = api.watch(&watch_params(), &c).unwrap();
        let r = stream.next();
        d.store(1, Ordering::SeqCst);
        r
    });
    wait_for("the server to hang", || {
        server.seen.lock().unwrap().hanging == 1
    });
    // Give the watcher a moment to block in its read; the outcome is the same if it has not.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(done.load(Ordering::SeqCst), 0, "the watch is blocked");
    let start = Instant::now();
    cancel.cancel();
    let r = watcher.join().unwrap();
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "took {:?}",
        start.elapsed()
    );
    assert!(matches!(r, Some(Err(Error::Cancelled))), "{r:?}");
}

#[test]
fn cancel_unblocks_a_watch_waiting_for_headers() {
    let (server, api) = hanging_server(|| Reply::HangBeforeHeaders);
    let cancel = Canceller::new();
    let c = cancel.clone();
    let watcher = std::thread::spawn(move || api.watch(&watch_params(), &c).map(|_| ()));
    wait_for("the server to hang", || {
        server.seen.lock().unwrap().hanging == 1
    });
    let start = Instant::now();
    cancel.cancel();
    let r = watcher.join().unwrap();
    assert!(start.elapsed() < Duration::from_millis(500));
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
}

#[test]
fn a_watch_opened_after_cancel_fails_at_once() {
    let (server, api) = hanging_server(|| Reply::HangAfterHeaders);
    let cancel = Canceller::new();
    cancel.cancel();
    let r = api.watch(&watch_params(), &cancel).map(|_| ());
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    assert_eq!(
        server.seen.lock().unwrap().connections,
        0,
        "no connection made"
    );
    // Cancelling one watch leaves the client usable for others.
    let other = Canceller::new();
    let mut stream = api.watch(&watch_params(), &other).unwrap();
    other.cancel();
    assert!(matches!(stream.next(), Some(Err(Error::Cancelled))));
}

#[test]
fn exec_plugin_client_certificate_is_presented_in_the_handshake() {
    let dir = temp_dir("exec-cert");
    let ca = Ca::new();
    let clients = Ca::new();
    let cert = ca.issue(&["127.0.0.1"], false, &rcgen::PKCS_ECDSA_P256_SHA256);
    let server = Server::start(Some(server_tls(&cert, Some(&clients))), ok_handler());
    let id = clients.issue(&["me"], true, &rcgen::PKCS_ECDSA_P256_SHA256);
    let answer = serde_json::json!({
        "apiVersion": V1,
        "kind": "ExecCredential",
        "status": {"clientCertificateData": id.cert_pem, "clientKeyData": id.key_pem},
    });
    std::fs::write(dir.join("answer.json"), answer.to_string()).unwrap();
    let script = dir.join("cert-plugin.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho run >> \"$DIR/runs\"\ncat \"$DIR/answer.json\"\n",
    )
    .unwrap();
    let mut perm = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&script, perm).unwrap();

    let mut config = Config::new(server.url("https"));
    config.tls.ca_pem = Some(ca.pem());
    config.auth = AuthConfig::Exec(ExecConfig {
        command: script.to_string_lossy().into_owned(),
        ..exec_config(&dir, V1, "")
    });
    get(config).unwrap();
    assert_eq!(runs(&dir), 1, "token lookup and handshake share one run");
    assert_eq!(server.auth_headers(), [None], "no token, certificate only");
}
