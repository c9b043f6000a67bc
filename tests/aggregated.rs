//! Aggregated backends, on the test server and on the real kube-apiserver alike (the real
//! one is the oracle for every message):
//! - kube-aggregator's discovery check: a TLS backend on a loopback Service's ClusterIP is
//!   dialled and its serving certificate verified against the APIService's `caBundle` for
//!   `SERVICE.NAMESPACE.svc`; a wrong bundle, a certificate for another name or a refused
//!   dial fail it with Go's words, the right bundle or `insecureSkipTLSVerify` pass it; a
//!   backend that accepts and never answers is cut after 5 s; no credential reaches it.
//! - the example aggregated server (`examples/apiserver.rs`, run as a program) registers
//!   itself with the CA it generated, passes the check, is served through kube-apiserver's
//!   aggregator (discovery, `kubectl api-resources`, its Widgets), repairs a deleted
//!   registration and deregisters on SIGTERM.
#![cfg(feature = "testing")]

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "support/binary.rs"]
mod binary;
#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/example.rs"]
mod example;
#[path = "support/kube.rs"]
mod kube;
#[path = "support/tls_backend.rs"]
mod tls_backend;

use autoregister::api::APIService;
use cluster::{tag, Cluster};
use kube::LoopbackService;
use tls_backend::{tls_get, Issued, Mode, TlsBackend};

fn base64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// One test's APIService `v1.<tag>.example.com` backed by `svc`.
struct Api {
    group: String,
    name: String,
    url: String,
}

impl Api {
    fn new(test: &str, svc: &LoopbackService) -> Api {
        let group = format!("{}.example.com", tag(test));
        Api {
            name: format!("v1.{group}"),
            url: format!("https://{}/apis/{group}/v1", svc.addr()),
            group,
        }
    }

    /// Creates it with `caBundle` = `ca` (or `insecureSkipTLSVerify` when `None`).
    fn create(&self, c: &Cluster, svc: &LoopbackService, ca: Option<&str>) {
        let mut obj = json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": self.name},
            "spec": {"group": self.group, "version": "v1", "groupPriorityMinimum": 100,
                     "versionPriority": 10,
                     "service": {"namespace": svc.namespace, "name": svc.service, "port": svc.port}},
        });
        set_tls(&mut obj, ca);
        c.create(obj);
    }

    /// Points its TLS at `ca` (or `insecureSkipTLSVerify` when `None`).
    fn set_ca(&self, c: &Cluster, ca: Option<&str>) {
        // The availability controller writes the status meanwhile: read again on a conflict.
        for _ in 0..10 {
            let mut obj = c.get(&self.name).unwrap();
            set_tls(&mut obj, ca);
            let a: APIService = serde_json::from_value(obj).unwrap();
            match c.api().update(&a) {
                Ok(_) => return,
                Err(e) if e.is_conflict() => continue,
                Err(e) => panic!("update {}: {e}", self.name),
            }
        }
        panic!("update {}: a conflict every time", self.name);
    }

    /// Waits until its `Available` reason is `reason`: (status, message, how long it took).
    fn wait(&self, c: &Cluster, reason: &str) -> (String, String, Duration) {
        let started = Instant::now();
        let done = binary::wait_until_for(Duration::from_secs(40), || {
            c.available(&self.name).1 == reason
        });
        let (status, got, message) = c.available(&self.name);
        assert!(done, "no {reason} for {}: {got} {message}", self.name);
        (status, message, started.elapsed())
    }

    /// Waits until the condition's message is `message` (an earlier failure may be worded
    /// otherwise: a check that met the previous backend as it stopped reads "connection
    /// reset by peer"); answers the last message seen.
    fn wait_message(&self, c: &Cluster, message: &str) -> String {
        binary::wait_until_for(Duration::from_secs(40), || {
            c.available(&self.name).2 == message
        });
        c.available(&self.name).2
    }

    /// The message upstream writes when the request failed with `error`.
    fn failed(&self, error: &str) -> String {
        let url = &self.url;
        format!("failing or missing response from {url}: Get \"{url}\": {error}")
    }
}

fn set_tls(obj: &mut Value, ca: Option<&str>) {
    match ca {
        Some(pem) => {
            obj["spec"]["caBundle"] = json!(base64(pem));
            obj["spec"]["insecureSkipTLSVerify"] = json!(false);
        }
        None => {
            obj["spec"]["caBundle"] = Value::Null;
            obj["spec"]["insecureSkipTLSVerify"] = json!(true);
        }
    }
}

const UNKNOWN_AUTHORITY: &str =
    "tls: failed to verify certificate: x509: certificate signed by unknown authority";

/// Whether the availability check verifies the backend's serving certificate. The test
/// server does, as kube-aggregator v1.36 on does: it builds the check's transport from the
/// APIService (`BuildTransportConfig` in `pkg/controllers/status/remote`: `caBundle`, server
/// name `SERVICE.NAMESPACE.svc`). v1.35 and older check with `TLSConfig{Insecure: true}`, so
/// a wrong `caBundle` reads `Passed` there (requests through the aggregator are verified on
/// every version).
fn the_check_verifies_tls(c: &Cluster) -> bool {
    !c.is_real() || kube::minor() >= 36
}

/// The serving certificate is verified against `caBundle` for `SERVICE.NAMESPACE.svc`.
fn the_serving_certificate_is_verified_against_ca_bundle(c: &Cluster) {
    let ns = format!("ca-{}", tag("ns"));
    let (svc, listener) = c.loopback_service(&ns, "api");
    let api = Api::new("ca", &svc);
    let right = Issued::new("right-ca", &[&svc.host()]);
    let wrong = Issued::new("wrong-ca", &[&svc.host()]);
    let mut backend = TlsBackend::start(listener, &right, &api.group, "v1");

    api.create(c, &svc, Some(&wrong.ca_pem));
    if the_check_verifies_tls(c) {
        let (status, message, took) = api.wait(c, "FailedDiscoveryCheck");
        println!("wrong caBundle: FailedDiscoveryCheck after {took:?}");
        assert_eq!(
            (status.as_str(), message),
            ("False", api.failed(UNKNOWN_AUTHORITY))
        );
    } else {
        let (status, message, _) = api.wait(c, "Passed");
        assert_eq!(
            (status.as_str(), message.as_str()),
            ("True", "all checks passed"),
            "kube-apiserver {} checks availability without verifying the certificate",
            kube::version()
        );
    }

    api.set_ca(c, Some(&right.ca_pem));
    let (status, message, took) = api.wait(c, "Passed");
    println!("right caBundle: Passed after {took:?}");
    assert_eq!(
        (status.as_str(), message.as_str()),
        ("True", "all checks passed")
    );

    // The aggregator's identity headers, and never a client credential.
    let requests = backend.requests();
    assert!(!requests.is_empty());
    for headers in &requests {
        assert!(
            !headers.iter().any(|(k, _)| k == "authorization"),
            "{headers:?}"
        );
    }
    assert!(requests.iter().any(|h| h
        .iter()
        .any(|(k, v)| k == "x-remote-user" && v == "system:kube-aggregator")));

    // The right CA, but a certificate for another name.
    backend.stop();
    let other = Issued::new("right-ca", &[&format!("other.{ns}.svc")]);
    let listener = std::net::TcpListener::bind(svc.addr()).unwrap();
    let _backend = TlsBackend::start(listener, &other, &api.group, "v1");
    api.set_ca(c, Some(&other.ca_pem));
    let want = match the_check_verifies_tls(c) {
        true => api.failed(&format!(
            "tls: failed to verify certificate: x509: certificate is valid for other.{ns}.svc, not {}",
            svc.host()
        )),
        false => "all checks passed".to_string(),
    };
    assert_eq!(api.wait_message(c, &want), want);
    // insecureSkipTLSVerify: not verified at all.
    api.set_ca(c, None);
    api.wait(c, "Passed");
}

/// A backend that is gone: the dial is refused, in Go's words.
fn a_refused_dial_fails_the_check(c: &Cluster) {
    let ns = format!("refused-{}", tag("ns"));
    let (svc, listener) = c.loopback_service(&ns, "api");
    let api = Api::new("refused", &svc);
    drop(listener);
    api.create(c, &svc, None);
    let (_, message, _) = api.wait(c, "FailedDiscoveryCheck");
    assert_eq!(
        message,
        api.failed(&format!(
            "dial tcp {}: connect: connection refused",
            svc.addr()
        ))
    );
}

/// A backend that accepts the connection and never answers is cut by the 5 s timeout.
fn a_backend_that_never_answers_is_cut_by_the_timeout(c: &Cluster) {
    let ns = format!("hang-{}", tag("ns"));
    let (svc, listener) = c.loopback_service(&ns, "api");
    let api = Api::new("hang", &svc);
    let issued = Issued::new("hang-ca", &[&svc.host()]);
    let backend = TlsBackend::start(listener, &issued, &api.group, "v1");
    backend.set_mode(Mode::Hang);
    api.create(c, &svc, Some(&issued.ca_pem));
    let (status, message, took) = api.wait(c, "FailedDiscoveryCheck");
    println!("a backend that never answers: FailedDiscoveryCheck after {took:?}");
    assert_eq!(status, "False");
    let timed_out =
        api.failed("context deadline exceeded (Client.Timeout exceeded while awaiting headers)");
    if c.is_real() {
        // Upstream races five attempts and reports the last to fail, worded by where its
        // timeout caught it: waiting for the connection, for the headers, or for the context.
        let cut = message
            .strip_prefix(&api.failed(""))
            .unwrap_or_else(|| panic!("{message}"));
        assert!(
            cut.contains("Client.Timeout exceeded") || cut == "context deadline exceeded",
            "{message}"
        );
    } else {
        assert_eq!(message, timed_out);
    }
    // Not a quick failure: the check waited for its timeout.
    assert!(took >= Duration::from_millis(4900), "{took:?}");
    // Answering again: passed.
    backend.set_mode(Mode::Serve);
    api.wait(c, "Passed");
}

/// The APIService the example server registers.
const EXAMPLE: &str = "v1alpha1.widgets.example.com";

/// A process ended (SIGKILL) and reaped when dropped, if still running.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The example aggregated server, run as a program behind a loopback Service: it
/// registers itself with the CA it generated (no `insecureSkipTLSVerify`), the server's
/// discovery check passes, the API is served (through kube-apiserver's aggregator on the
/// real server), a deleted registration comes back, and SIGTERM deregisters it.
fn the_example_server_registers_itself_and_is_served(c: &Cluster) {
    let ns = format!("widgets-{}", tag("ns"));
    let (svc, listener) = c.loopback_service(&ns, "widgets-apiserver");
    // The example binds the address itself.
    drop(listener);
    let scratch = binary::Scratch::new("example-apiserver");
    let mut cmd = Command::new(example::path("apiserver"));
    cmd.args(["--listen", &svc.addr()])
        .args(["--service", &format!("{ns}/widgets-apiserver")])
        .args(["--port", &svc.port.to_string()])
        .env("KUBECONFIG", scratch.kubeconfig(c.target()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for v in binary::PROXY_VARS {
        cmd.env_remove(v);
    }
    let started = Instant::now();
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let available = || c.available(EXAMPLE).0 == "True";
    assert!(
        binary::wait_until_for(Duration::from_secs(60), available),
        "{:?}",
        c.available(EXAMPLE)
    );
    println!(
        "example server: Available=True {:?} after start",
        started.elapsed()
    );
    assert_eq!(
        c.available(EXAMPLE),
        ("True".into(), "Passed".into(), "all checks passed".into())
    );
    let obj = c.get(EXAMPLE).unwrap();
    assert_eq!(
        obj["metadata"]["labels"]["widgets.example.com/registered-by"], "true",
        "{obj}"
    );
    assert!(obj["spec"]["insecureSkipTLSVerify"] != json!(true), "{obj}");
    let ca = {
        use base64::Engine as _;
        let b64 = obj["spec"]["caBundle"].as_str().expect("a caBundle");
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap()
    };

    // Served over TLS, verified by the CA it registered, for SERVICE.NAMESPACE.svc.
    let (code, body) = tls_get(
        &svc.addr(),
        &svc.host(),
        &ca,
        "/apis/widgets.example.com/v1alpha1",
    );
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""kind":"APIResourceList""#), "{body}");
    if let Cluster::Real(k) = c {
        // Through kube-apiserver's aggregator.
        let (ok, out, err) = k.kubectl(&["get", "--raw", "/apis/widgets.example.com/v1alpha1"]);
        assert!(ok && out.contains(r#""name":"widgets""#), "{out}{err}");
        let (ok, out, err) = k.kubectl(&["api-resources", "--api-group=widgets.example.com"]);
        assert!(ok && out.contains("widgets"), "{out}{err}");
        let (ok, out, err) = k.kubectl(&["-n", "default", "get", "widgets", "-o", "name"]);
        assert!(
            ok && out.contains("widget.widgets.example.com/gear"),
            "{out}{err}"
        );
    }

    // Deleted behind its back: registered again.
    c.api()
        .delete(EXAMPLE, &autoregister::client::DeleteParams::default())
        .unwrap();
    assert!(binary::wait_until(|| c.get(EXAMPLE).is_some()));

    // SIGTERM: deregistered, and a clean exit.
    let pid = child.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = child.0.wait().unwrap();
    let mut log = String::new();
    if let Some(mut e) = child.0.stderr.take() {
        e.read_to_string(&mut log).unwrap();
    }
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(c.get(EXAMPLE).is_none(), "still registered:\n{log}");
    assert!(
        log.contains("deregistered v1alpha1.widgets.example.com"),
        "{log}"
    );
}

on_both!(
    the_serving_certificate_is_verified_against_ca_bundle,
    a_refused_dial_fails_the_check,
    a_backend_that_never_answers_is_cut_by_the_timeout,
    the_example_server_registers_itself_and_is_served,
);

/// The test server checks again every second: a backend that dies while its endpoint
/// still looks ready is noticed without any object changing.
#[test]
fn the_test_server_notices_a_dead_backend_by_checking_again() {
    let c = Cluster::test_server();
    let (svc, listener) = c.loopback_service("recheck", "api");
    let api = Api::new("recheck", &svc);
    let issued = Issued::new("recheck-ca", &[&svc.host()]);
    let mut backend = TlsBackend::start(listener, &issued, &api.group, "v1");
    api.create(&c, &svc, Some(&issued.ca_pem));
    api.wait(&c, "Passed");
    backend.stop();
    let (_, message, took) = api.wait(&c, "FailedDiscoveryCheck");
    assert!(
        message.ends_with("connect: connection refused"),
        "{message}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
}
