//! The `autoregister-testserver` process contract: flags, first stdout line, files, signals.
#![cfg(feature = "testing")]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/tls_backend.rs"]
mod tls_backend;

const BIN: &str = env!("CARGO_BIN_EXE_autoregister-testserver");

fn base64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn tls_get(addr: &str, ca_pem: &[u8], path: &str, token: &str) -> String {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(ca_pem).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(cfg), name).unwrap();
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn process_prints_url_writes_files_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("autoregister-tsproc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let tls_dir = dir.join("tls");
    let mut child = Command::new(BIN)
        .args(["--addr", "127.0.0.1:0", "--token", "t0k", "--history", "10"])
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .arg("--tls-dir")
        .arg(&tls_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first.trim();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let addr = url.trim_start_matches("https://");
    assert_ne!(addr, "127.0.0.1:0", "port 0 picks a free port");
    let ca = std::fs::read(tls_dir.join("ca.crt")).unwrap();
    let kc = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(kc.contains(&format!("server: {url}")), "{kc}");
    assert!(kc.contains("token: t0k") && kc.contains("certificate-authority-data:"));

    let answer = tls_get(
        addr,
        &ca,
        "/apis/apiregistration.k8s.io/v1/apiservices",
        "t0k",
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answer = tls_get(
        addr,
        &ca,
        "/apis/apiregistration.k8s.io/v1/apiservices",
        "bad",
    );
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn process_rejects_bad_usage_with_exit_2() {
    let out = Command::new(BIN).arg("--bogus").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(BIN)
        .args(["--history", "many"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A plain HTTP/1.1 request to the process; answers (status line, body).
fn plain_request(addr: &str, method: &str, path: &str, body: &str) -> (String, String) {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    write!(
        c,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

#[test]
fn process_plays_kube_apiserver_with_crd_groups() {
    let mut child = Command::new(BIN)
        .args(["--addr", "127.0.0.1:0", "--kube-apiserver"])
        .args(["--crd-group", "widgets.example.com/v1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first.trim().trim_start_matches("http://").to_string();
    let (status, body) = plain_request(
        &addr,
        "GET",
        "/apis/apiregistration.k8s.io/v1/apiservices",
        "",
    );
    assert!(status.contains(" 200 "), "{status}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"v1.apps") && names.contains(&"v1."),
        "{names:?}"
    );
    assert!(names.contains(&"v1.widgets.example.com"), "{names:?}");
    assert_eq!(names.len(), 22);

    // The admin endpoint adds a CRD group and shows kube-apiserver's writes.
    let (status, _) = plain_request(
        &addr,
        "POST",
        "/_testserver/kube-apiserver/crd-groups",
        r#"{"group": "gadgets.example.com", "version": "v2"}"#,
    );
    assert!(status.contains(" 200 "), "{status}");
    let (_, writes) = plain_request(&addr, "GET", "/_testserver/kube-apiserver/writes", "");
    let writes: serde_json::Value = serde_json::from_str(&writes).unwrap();
    assert!(
        writes
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["name"] == "v2.gadgets.example.com"
                && w["verb"] == "create"
                && w["cell"] == "2C"),
        "{writes}"
    );

    // The availability controller, driven by Services and EndpointSlices, and its discovery
    // check, which dials the Service's ClusterIP (allocated on loopback) over TLS.
    let condition = |addr: &str| -> (String, String, String) {
        let (_, body) = plain_request(
            addr,
            "GET",
            "/apis/apiregistration.k8s.io/v1/apiservices/v1.served.example.com",
            "",
        );
        let o: serde_json::Value = serde_json::from_str(&body).unwrap();
        let c = &o["status"]["conditions"][0];
        let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
        (s("status"), s("reason"), s("message"))
    };
    let wait_reason = |reason: &str| {
        let until = Instant::now() + Duration::from_secs(10);
        while condition(&addr).1 != reason && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        condition(&addr)
    };
    let listener = std::net::TcpListener::bind("127.1.0.254:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let issued = tls_backend::Issued::new("served-ca", &["svc.ns.svc"]);
    let _backend = tls_backend::TlsBackend::start(listener, &issued, "served.example.com", "v1");
    let apiservice = serde_json::json!({
        "metadata": {"name": "v1.served.example.com"},
        "spec": {"group": "served.example.com", "version": "v1", "groupPriorityMinimum": 100,
                 "versionPriority": 10, "service": {"namespace": "ns", "name": "svc", "port": port},
                 "caBundle": base64(&issued.ca_pem)},
    });
    let (status, _) = plain_request(
        &addr,
        "POST",
        "/apis/apiregistration.k8s.io/v1/apiservices",
        &apiservice.to_string(),
    );
    assert!(status.contains(" 201 "), "{status}");
    assert_eq!(wait_reason("ServiceNotFound").0, "False");
    let service = |cluster_ip: Option<&str>| {
        let mut svc = serde_json::json!({"metadata": {"name": "svc"},
            "spec": {"ports": [{"name": "https", "port": port}]}});
        if let Some(ip) = cluster_ip {
            svc["spec"]["clusterIP"] = ip.into();
        }
        let (status, body) = plain_request(
            &addr,
            "POST",
            "/api/v1/namespaces/ns/services",
            &svc.to_string(),
        );
        assert!(status.contains(" 201 "), "{status}");
        let created: serde_json::Value = serde_json::from_str(&body).unwrap();
        created["spec"]["clusterIP"].as_str().unwrap().to_string()
    };
    // An allocated ClusterIP, where nothing listens: the dial is refused, in Go's words.
    let ip = service(None);
    assert!(ip.starts_with("127.1.0."), "{ip}");
    let (status, _) = plain_request(
        &addr,
        "POST",
        "/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices",
        r#"{"metadata": {"name": "svc-1", "labels": {"kubernetes.io/service-name": "svc"}}, "addressType": "FQDN", "endpoints": [{"addresses": ["backend.localhost"]}], "ports": [{"name": "https", "port": 8443}]}"#,
    );
    assert!(status.contains(" 201 "), "{status}");
    let url = format!("https://{ip}:{port}/apis/served.example.com/v1");
    assert_eq!(
        wait_reason("FailedDiscoveryCheck"),
        (
            "False".into(),
            "FailedDiscoveryCheck".into(),
            format!("failing or missing response from {url}: Get \"{url}\": dial tcp {ip}:{port}: connect: connection refused")
        )
    );
    // The Service where the backend listens: its certificate verifies against caBundle.
    let (status, _) = plain_request(&addr, "DELETE", "/api/v1/namespaces/ns/services/svc", "");
    assert!(status.contains(" 200 "), "{status}");
    service(Some("127.1.0.254"));
    assert_eq!(
        wait_reason("Passed"),
        ("True".into(), "Passed".into(), "all checks passed".into())
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn process_refuses_crd_groups_without_the_mode_or_malformed() {
    for args in [
        &["--crd-group", "a.example.com/v1"][..],
        &["--kube-apiserver", "--crd-group", "a.example.com"][..],
        &["--kube-apiserver", "--crd-group", "/v1"][..],
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("crd-group"));
    }
}

#[test]
fn process_with_client_ca_refuses_a_client_without_a_certificate() {
    let dir = std::env::temp_dir().join(format!("autoregister-tsproc-ca-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let client_ca = p.self_signed(&key).unwrap();
    std::fs::write(dir.join("clients.crt"), client_ca.pem()).unwrap();
    let tls_dir = dir.join("tls");
    let mut child = Command::new(BIN)
        .args(["--addr", "127.0.0.1:0", "--client-ca"])
        .arg(dir.join("clients.crt"))
        .arg("--tls-dir")
        .arg(&tls_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first.trim().trim_start_matches("https://").to_string();
    let ca = std::fs::read(tls_dir.join("ca.crt")).unwrap();
    // The handshake fails: no HTTP answer at all (the write or the read fails, as the
    // server's alert arrives).
    let answer = (|| -> std::io::Result<String> {
        use rustls_pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls_pki_types::CertificateDer::from_pem_slice(&ca).unwrap())
            .unwrap();
        let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(cfg), name).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, std::net::TcpStream::connect(&addr)?);
        tls.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
        let mut out = Vec::new();
        tls.read_to_end(&mut out)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    })();
    assert!(
        answer.as_deref().map_or(true, str::is_empty),
        "a client without a certificate got an answer: {answer:?}"
    );
    let _ = child.kill();
    let _ = child.wait();
    // A missing --client-ca file is bad usage.
    let out = Command::new(BIN)
        .args(["--client-ca", "/nonexistent/clients.crt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/clients.crt"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--help` is the whole usage: every flag with its default; `--addr` is optional.
#[test]
fn help_lists_every_flag_with_addr_optional() {
    let out = std::process::Command::new(BIN)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("usage: autoregister-testserver [--addr HOST:PORT]"),
        "{text}"
    );
    assert!(text.contains("--addr HOST:PORT         where to listen (default 127.0.0.1:0"));
    for flag in [
        "--kubeconfig-out",
        "--tls-dir",
        "--client-ca",
        "--token",
        "--history",
        "--no-flow-control",
        "--kube-apiserver",
        "--crd-group",
        "--seat-limit",
    ] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(flag)),
            "{flag} not described:\n{text}"
        );
    }
}

#[test]
fn process_with_a_seat_limit_answers_429_with_retry_after_beyond_it() {
    let mut child = Command::new(BIN)
        .args(["--addr", "127.0.0.1:0", "--seat-limit", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first.trim().trim_start_matches("http://").to_string();
    // Each request holds its seat for 2 s: four sent together contend for the one seat.
    let (status, _) = plain_request(
        &addr,
        "POST",
        "/_testserver/faults",
        r#"{"latencyMs": 2000}"#,
    );
    assert!(status.contains(" 200 "), "{status}");
    let answers: Vec<(String, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    plain_request(
                        &addr,
                        "GET",
                        "/apis/apiregistration.k8s.io/v1/apiservices",
                        "",
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let served = answers.iter().filter(|(s, _)| s.contains(" 200 ")).count();
    let refused: Vec<&String> = answers
        .iter()
        .filter(|(s, _)| s.contains(" 429 "))
        .map(|(_, b)| b)
        .collect();
    assert_eq!(served, 1, "{answers:?}");
    assert_eq!(refused.len(), 3, "{answers:?}");
    for body in refused {
        let status: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(status["reason"], "TooManyRequests", "{body}");
        assert_eq!(status["details"]["retryAfterSeconds"], 1, "{body}");
    }
    let _ = child.kill();
    let _ = child.wait();
}
