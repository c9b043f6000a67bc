//! The operations endpoint (`/healthz`, `/readyz`, `/metrics`) on loopback, with a real
//! controller against the in-process test API server.
#![cfg(feature = "testing")]

#[path = "support/promtext.rs"]
mod promtext;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use autoregister::api::APIService;
use autoregister::client::{Api, Client, Config};
use autoregister::controller::{Controller, ControllerOptions};
use autoregister::ops::{OpsServer, OpsSources, MAX_HEAD_BYTES};
use autoregister::testserver::TestServer;
use serde_json::json;

/// The ownership label these tests own (the CLI's default).
const LABEL: &str = autoregister::api::DEFAULT_LABEL_KEY;

const WAIT: Duration = Duration::from_secs(10);

/// An answer: status code, raw head, body.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// Sends `raw` on a fresh connection and reads the whole answer (the server closes after it).
fn exchange(addr: SocketAddr, raw: &[u8]) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    // The server may stop reading an oversized request early; what matters is its answer.
    let _ = s.write_all(raw);
    let _ = s.shutdown(Shutdown::Write);
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete answer");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

fn request(addr: SocketAddr, method: &str, path: &str) -> Answer {
    exchange(
        addr,
        format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n")
            .as_bytes(),
    )
}

fn get(addr: SocketAddr, path: &str) -> Answer {
    request(addr, "GET", path)
}

/// Polls `f` until it returns Some, or panics after `WAIT`.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn apiservice(group: &str) -> APIService {
    serde_json::from_value(json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": format!("v1.{group}")},
        "spec": {
            "group": group, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
            "service": {"namespace": "ns", "name": "svc", "port": 443},
            "insecureSkipTLSVerify": true
        }
    }))
    .unwrap()
}

fn controller_for(server: &TestServer) -> Controller {
    let client = Client::new(server.client_config()).unwrap();
    Controller::new(client, ControllerOptions::new(LABEL))
}

fn plain_server() -> OpsServer {
    OpsServer::start("127.0.0.1:0", OpsSources::new()).unwrap()
}

#[test]
fn healthz_answers_ok_on_an_ephemeral_port() {
    let ops = plain_server();
    assert_ne!(ops.local_addr().port(), 0);
    let a = get(ops.local_addr(), "/healthz");
    assert_eq!(a.status, 200);
    assert_eq!(a.body, "ok\n");
    assert!(a.head.contains("Connection: close"), "{}", a.head);
    assert!(a.head.contains("Content-Type: text/plain"), "{}", a.head);
}

/// `/livez` as kube components serve it, beside `/healthz`: the same checks, each
/// report naming its own endpoint.
#[test]
fn livez_answers_with_the_liveness_checks_as_healthz_does() {
    let ok = plain_server();
    let a = get(ok.local_addr(), "/livez");
    assert_eq!((a.status, a.body.as_str()), (200, "ok\n"));
    let a = get(ok.local_addr(), "/livez?verbose");
    assert_eq!((a.status, a.body.as_str()), (200, "livez check passed\n"));
    let failing = OpsServer::start(
        "127.0.0.1:0",
        OpsSources::new().health_check("threads", || Err("worker 0 stuck".into())),
    )
    .unwrap();
    for path in ["livez", "healthz"] {
        let a = get(failing.local_addr(), &format!("/{path}"));
        assert_eq!(a.status, 503, "{path}");
        assert_eq!(
            a.body,
            format!("[-]threads failed: worker 0 stuck\n{path} check failed\n")
        );
    }
    ok.shutdown();
    failing.shutdown();
}

/// `autoregister_build_info{version,commit} 1`, and no sample reads `-0` (an idle
/// workqueue's unfinished work was a float sum of nothing).
#[test]
fn metrics_carry_build_info_and_no_negative_zero() {
    let api = TestServer::start();
    let controller = controller_for(&api);
    controller.add_api_service_to_sync(apiservice("build.example.com"));
    let ops = OpsServer::start("127.0.0.1:0", OpsSources::for_controller(&controller)).unwrap();
    controller.start();
    controller.wait_converged(WAIT).unwrap();
    // Idle: nothing queued and nothing in flight. `wait_converged` can return while the
    // worker that converged the name has yet to finish its item, and the queue's depth is 0
    // then too: the unfinished work is read as a number here (0 and -0 alike) and its
    // spelling checked below.
    let unfinished = |body: &str| {
        body.lines()
            .find_map(|l| {
                l.strip_prefix("workqueue_unfinished_work_seconds{name=\"autoregister\"} ")
            })
            .and_then(|v| v.parse::<f64>().ok())
    };
    let body = wait_for("an idle workqueue", || {
        let body = get(ops.local_addr(), "/metrics").body;
        (body.contains("workqueue_depth{name=\"autoregister\"} 0\n")
            && unfinished(&body) == Some(0.0))
        .then_some(body)
    });
    let exp = promtext::parse(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    let info = exp.value(
        "autoregister_build_info",
        &[
            ("version", env!("CARGO_PKG_VERSION")),
            ("commit", autoregister::build_info::COMMIT),
        ],
    );
    assert_eq!(info, Some(1.0), "{body}");
    assert_eq!(exp.types["autoregister_build_info"], "gauge");
    assert!(
        body.contains("workqueue_unfinished_work_seconds{name=\"autoregister\"} 0\n"),
        "{body}"
    );
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let value = line.rsplit(' ').next().unwrap_or_default();
        assert!(!value.starts_with("-0"), "negative zero: {line}");
    }
    ops.shutdown();
    controller.shutdown();
}

#[test]
fn readyz_is_503_with_the_reason_until_the_cache_syncs_then_200() {
    let api = TestServer::start();
    api.faults().pause(); // the first list is held: the cache cannot sync
    let controller = controller_for(&api);
    let ops = OpsServer::start("127.0.0.1:0", OpsSources::for_controller(&controller)).unwrap();
    controller.start();

    let a = get(ops.local_addr(), "/readyz");
    assert_eq!(a.status, 503);
    assert!(
        a.body
            .contains("[-]apiservice-cache-synced failed: the APIService cache has not synced yet"),
        "{}",
        a.body
    );
    // Liveness does not depend on readiness.
    assert_eq!(get(ops.local_addr(), "/healthz").status, 200);

    api.faults().resume();
    let a = wait_for("readyz 200", || {
        let a = get(ops.local_addr(), "/readyz");
        (a.status == 200).then_some(a)
    });
    assert_eq!(a.body, "ok\n");
    assert!(controller.is_synced());
    ops.shutdown();
    controller.shutdown();
}

#[test]
fn healthz_is_503_naming_a_thread_stuck_past_its_bound_and_200_again_once_it_moves() {
    let api = TestServer::start();
    let controller = controller_for(&api);
    controller.add_api_service_to_sync(apiservice("live.example.com"));
    let ops = OpsServer::start("127.0.0.1:0", OpsSources::for_controller(&controller)).unwrap();
    controller.start();
    assert!(controller.wait_until_synced(WAIT));
    assert_eq!(
        get(ops.local_addr(), "/healthz").status,
        200,
        "reflector and workers alive"
    );
    // A manifest watcher (as `run` registers one) stuck in a reload past its bound.
    let watcher = controller.liveness().register("manifest-watcher");
    watcher.busy_for(Duration::from_millis(1), "reload");
    let a = wait_for("healthz 503", || {
        let a = get(ops.local_addr(), "/healthz");
        (a.status == 503).then_some(a)
    });
    assert!(
        a.body
            .contains("[-]threads failed: manifest-watcher: 1 stuck past its bound (reload)"),
        "{}",
        a.body
    );
    watcher.idle();
    assert_eq!(get(ops.local_addr(), "/healthz").status, 200);
    // A thread that ended without retiring counts as dead.
    drop(watcher);
    let a = get(ops.local_addr(), "/healthz");
    assert_eq!(a.status, 503);
    assert!(
        a.body.contains("manifest-watcher: 1 ended unexpectedly"),
        "{}",
        a.body
    );
    ops.shutdown();
    controller.shutdown();
}

#[test]
fn readiness_checks_added_by_the_caller_gate_readyz() {
    let leading = Arc::new(AtomicBool::new(false));
    let l = leading.clone();
    let sources = OpsSources::new().readiness_check("leader", move || {
        if l.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("not leading".into())
        }
    });
    let ops = OpsServer::start("127.0.0.1:0", sources).unwrap();
    let a = get(ops.local_addr(), "/readyz");
    assert_eq!(a.status, 503);
    assert_eq!(
        a.body,
        "[-]leader failed: not leading\nreadyz check failed\n"
    );
    leading.store(true, Ordering::SeqCst);
    assert_eq!(get(ops.local_addr(), "/readyz").status, 200);
    let a = get(ops.local_addr(), "/readyz?verbose");
    assert_eq!(a.body, "[+]leader ok\nreadyz check passed\n");
}

#[test]
fn metrics_show_workqueue_and_rest_client_activity_after_a_sync() {
    let api = TestServer::start();
    let controller = controller_for(&api);
    controller.add_api_service_to_sync(apiservice("metrics.example.com"));
    let ops = OpsServer::start("127.0.0.1:0", OpsSources::for_controller(&controller)).unwrap();
    controller.start();
    controller.wait_converged(WAIT).unwrap();

    let a = get(ops.local_addr(), "/metrics");
    assert_eq!(a.status, 200);
    assert!(
        a.head.contains("Content-Type: text/plain; version=0.0.4"),
        "{}",
        a.head
    );
    let exp = promtext::parse(&a.body).unwrap_or_else(|e| panic!("{e}\n{}", a.body));
    let adds = exp
        .value("workqueue_adds_total", &[("name", "autoregister")])
        .expect("workqueue_adds_total{name=\"autoregister\"}");
    assert!(adds > 0.0, "{}", a.body);
    assert_eq!(exp.types["workqueue_adds_total"], "counter");

    let host = api.addr().to_string();
    let host = host.as_str();
    // The initial list (GET 200) and the create (POST 201).
    let lists = exp
        .value(
            "rest_client_requests_total",
            &[("code", "200"), ("method", "GET"), ("host", host)],
        )
        .expect("GET 200 counted");
    assert!(lists >= 1.0);
    let creates = exp
        .value(
            "rest_client_requests_total",
            &[("code", "201"), ("method", "POST"), ("host", host)],
        )
        .expect("POST 201 counted");
    assert_eq!(creates, 1.0);
    let timed = exp
        .value(
            "rest_client_request_duration_seconds_count",
            &[("verb", "POST"), ("host", host)],
        )
        .expect("POST latency observed");
    assert_eq!(timed, 1.0);
    assert_eq!(
        exp.types["rest_client_request_duration_seconds"],
        "histogram"
    );

    // HEAD: the same headers, no body.
    let h = request(ops.local_addr(), "HEAD", "/metrics");
    assert_eq!(h.status, 200);
    assert_eq!(h.body, "");
    assert!(h.head.contains("Content-Length: "), "{}", h.head);
    ops.shutdown();
    controller.shutdown();
}

#[test]
fn rest_client_counts_requests_without_an_answer_as_error() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }; // closed again: connections are refused
    let mut config = Config::new(format!("http://127.0.0.1:{port}"));
    config.qps = 0.0;
    let client = Client::new(config).unwrap();
    assert!(Api::<APIService>::all(client.clone()).get("x").is_err());
    let exp = promtext::parse(&client.metrics().render_prometheus()).unwrap();
    let host = format!("127.0.0.1:{port}");
    assert_eq!(
        exp.value(
            "rest_client_requests_total",
            &[("code", "<error>"), ("method", "GET"), ("host", &host)]
        ),
        Some(1.0)
    );
}

#[test]
fn unknown_paths_are_404_and_other_methods_405() {
    let ops = plain_server();
    let addr = ops.local_addr();
    assert_eq!(get(addr, "/nope").status, 404);
    assert_eq!(get(addr, "/healthz/extra").status, 404);
    let a = request(addr, "POST", "/metrics");
    assert_eq!(a.status, 405);
    assert!(a.head.contains("Allow: GET, HEAD"), "{}", a.head);
    assert_eq!(request(addr, "DELETE", "/healthz").status, 405);
    assert_eq!(request(addr, "POST", "/nope").status, 404);
    // A query string does not change the route.
    assert_eq!(get(addr, "/healthz?x=1").status, 200);
}

#[test]
fn garbage_and_oversized_requests_get_400_and_the_server_keeps_serving() {
    let ops = plain_server();
    let addr = ops.local_addr();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage line", b"garbage\r\n\r\n".to_vec()),
        ("bad version", b"GET /healthz HTTP/9\r\n\r\n".to_vec()),
        (
            "absolute target",
            b"GET http://x/healthz HTTP/1.1\r\n\r\n".to_vec(),
        ),
        (
            "header without colon",
            b"GET /healthz HTTP/1.1\r\nnope\r\n\r\n".to_vec(),
        ),
        (
            "cut short",
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n".to_vec(),
        ),
        (
            "oversized header",
            format!(
                "GET /healthz HTTP/1.1\r\nX-Big: {}\r\n\r\n",
                "a".repeat(4 * MAX_HEAD_BYTES)
            )
            .into_bytes(),
        ),
        (
            "binary without newlines",
            (0..2 * MAX_HEAD_BYTES)
                .map(|i| (i * 7 % 251) as u8 | 0x80)
                .collect(),
        ),
    ];
    for (what, raw) in cases {
        let a = exchange(addr, &raw);
        assert_eq!(a.status, 400, "{what}: {a:?}");
        assert!(a.body.starts_with("bad request: "), "{what}: {}", a.body);
    }
    // A connection that closes without a byte gets no answer and harms nothing.
    drop(TcpStream::connect(addr).unwrap());
    assert_eq!(get(addr, "/healthz").status, 200);
}

#[test]
fn a_silent_client_does_not_block_other_requests() {
    let ops = plain_server();
    let addr = ops.local_addr();
    let _silent = TcpStream::connect(addr).unwrap();
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
    let started = Instant::now();
    assert_eq!(get(addr, "/healthz").status, 200);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn shutdown_returns_promptly_with_idle_connections_open() {
    let ops = plain_server();
    let addr = ops.local_addr();
    let mut silent = TcpStream::connect(addr).unwrap();
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
    // Both connections are being served (the request above proves the accept loop took them).
    assert_eq!(get(addr, "/healthz").status, 200);

    let started = Instant::now();
    ops.shutdown();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "shutdown took {:?}",
        started.elapsed()
    );
    // The open connections were closed, not left hanging.
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert!(matches!(silent.read(&mut buf), Ok(0) | Err(_)));
    // Nothing listens any more.
    assert!(TcpStream::connect(addr).is_err());
    ops.shutdown(); // idempotent
}

#[test]
fn dropping_the_server_stops_it() {
    let addr = {
        let ops = plain_server();
        let addr = ops.local_addr();
        assert_eq!(get(addr, "/healthz").status, 200);
        addr
    };
    assert!(TcpStream::connect(addr).is_err());
}

#[test]
fn colon_port_listens_on_every_interface() {
    let ops = OpsServer::start(":0", OpsSources::new()).unwrap();
    assert!(ops.local_addr().ip().is_unspecified());
    let local: SocketAddr = format!("127.0.0.1:{}", ops.local_addr().port())
        .parse()
        .unwrap();
    assert_eq!(get(local, "/healthz").status, 200);
}
