//! End to end: the real `autoregister` binary against the in-process test API server on loopback.
#![cfg(feature = "testing")]

use std::path::Path;
use std::time::{Duration, Instant};

use autoregister::api::APIService;
use autoregister::client::{Api, Client};
use autoregister::testserver::TestServer;
use serde_json::Value;

#[path = "support/binary.rs"]
mod binary;
#[path = "support/promtext.rs"]
mod promtext;

use binary::{stored, wait_until, writes, Proc, Scratch, WAIT};

const LABEL: &str = autoregister::api::DEFAULT_LABEL_KEY;

/// `binary::manifest` with our label set to `mode`, if any.
fn manifest(group: &str, mode: Option<&str>, version_priority: i64) -> String {
    binary::manifest(group, &labels(mode), version_priority)
}

/// `binary::object` with our label set to `mode`, if any.
fn object(group: &str, mode: Option<&str>, version_priority: i64) -> Value {
    binary::object(group, &labels(mode), version_priority)
}

fn labels(mode: Option<&str>) -> Vec<(&'static str, &str)> {
    mode.map(|m| (LABEL, m)).into_iter().collect()
}

fn api(server: &TestServer) -> Api<APIService> {
    Api::all(Client::new(server.client_config()).unwrap())
}

/// An "intruder" changes the spec of `name` through the API.
fn edit_priority(server: &TestServer, name: &str, priority: i32) {
    let api = api(server);
    let mut obj = api.get(name).unwrap();
    obj.spec.version_priority = priority;
    api.update(&obj).unwrap();
}

fn priority(server: &TestServer, name: &str) -> Option<i64> {
    stored(server, name).and_then(|o| o["spec"]["versionPriority"].as_i64())
}

#[test]
fn once_creates_every_manifest_object_with_the_label() {
    let server = TestServer::start();
    let s = Scratch::new("create");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    s.write(
        "b.yaml",
        &format!(
            "{}---\n{}",
            manifest("b.example.com", Some("onstart"), 11),
            manifest("c.example.com", Some("true"), 12)
        ),
    );
    let (code, log) = Proc::run(&server, &s, &["--once", "--timeout", "20s"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    for (name, label) in [
        ("v1.a.example.com", "true"),
        ("v1.b.example.com", "onstart"),
        ("v1.c.example.com", "true"),
    ] {
        let obj = stored(&server, name).unwrap_or_else(|| panic!("{name} not created\n{log}"));
        assert_eq!(obj["metadata"]["labels"][LABEL], label, "{name}");
        assert_eq!(writes(&server, name), ["create 201"], "{name}");
        assert!(
            log.contains(&format!("{name} 2")),
            "log names {name} and its cell:\n{log}"
        );
    }
}

#[test]
fn unmanaged_object_with_a_desired_name_is_never_written() {
    let server = TestServer::start();
    server.seed("apiservices", None, object("a.example.com", None, 99));
    let s = Scratch::new("unmanaged");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    // Not ours and not as desired: --once exits 1 at once naming it, without waiting out --timeout.
    let started = Instant::now();
    let (code, log) = Proc::run(&server, &s, &["--once", "--timeout", "60s"]).wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(started.elapsed() < Duration::from_secs(15), "{log}");
    assert!(
        log.contains("v1.a.example.com: held by an object without ownership label")
            && log.contains("--adopt"),
        "{log}"
    );
    assert!(writes(&server, "v1.a.example.com").is_empty(), "{log}");
    assert_eq!(priority(&server, "v1.a.example.com"), Some(99));
    // With the same spec it counts as converged: nothing to write.
    let s2 = Scratch::new("unmanaged-equal");
    s2.write("a.yaml", &manifest("a.example.com", None, 99));
    let (code, log) = Proc::run(&server, &s2, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    assert!(writes(&server, "v1.a.example.com").is_empty(), "{log}");
}

#[test]
fn continuous_object_is_stomped_back_but_onstart_edit_after_first_sync_is_left_alone() {
    let server = TestServer::start();
    let s = Scratch::new("stomp");
    s.write(
        "a.yaml",
        &format!(
            "{}---\n{}",
            manifest("a.example.com", Some("onstart"), 10),
            manifest("b.example.com", None, 20)
        ),
    );
    // One worker: names are processed in queue order, so once b is restored, a's event was handled too.
    let p = Proc::run(&server, &s, &["--workers", "1"]);
    assert!(wait_until(|| priority(&server, "v1.a.example.com")
        == Some(10)
        && priority(&server, "v1.b.example.com") == Some(20)));
    edit_priority(&server, "v1.a.example.com", 77);
    edit_priority(&server, "v1.b.example.com", 88);
    assert!(
        wait_until(|| priority(&server, "v1.b.example.com") == Some(20)),
        "continuous object not restored:\n{}",
        p.log()
    );
    assert_eq!(
        priority(&server, "v1.a.example.com"),
        Some(77),
        "onstart object must be left alone"
    );
    assert_eq!(
        writes(&server, "v1.a.example.com"),
        ["create 201", "update 200"],
        "only our create and the intruder's update"
    );
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("v1.b.example.com 6C update"), "{log}");
}

#[test]
fn managed_object_present_at_start_without_entry_is_deleted_once_and_late_onstart_object_untouched()
{
    let server = TestServer::start();
    let stale = server.seed(
        "apiservices",
        None,
        object("stale.example.com", Some("true"), 5),
    );
    let uid = stale["metadata"]["uid"].as_str().unwrap().to_string();
    let s = Scratch::new("delete");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    let p = Proc::run(&server, &s, &["--workers", "1"]);
    assert!(
        wait_until(|| stored(&server, "v1.stale.example.com").is_none()),
        "{}",
        p.log()
    );
    let delete = server
        .requests()
        .into_iter()
        .find(|r| r.verb == "delete" && r.name.as_deref() == Some("v1.stale.example.com"))
        .unwrap();
    assert_eq!(
        delete.body.unwrap()["preconditions"]["uid"],
        uid.as_str(),
        "delete carries a UID precondition"
    );

    // Created after start with the onstart label and no desired entry: cell 4A, never touched.
    p.wait_log("cache synced");
    server.seed(
        "apiservices",
        None,
        object("late.example.com", Some("onstart"), 5),
    );
    // Then a continuous edit whose restoration proves the late object's event was processed first.
    edit_priority(&server, "v1.a.example.com", 3);
    assert!(
        wait_until(|| priority(&server, "v1.a.example.com") == Some(10)),
        "{}",
        p.log()
    );
    assert!(stored(&server, "v1.late.example.com").is_some());
    assert!(writes(&server, "v1.late.example.com").is_empty());
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("v1.stale.example.com 6A delete"), "{log}");
}

#[test]
fn removed_file_deregisters_its_objects_but_an_unparseable_file_keeps_them() {
    let server = TestServer::start();
    let s = Scratch::new("files");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    s.write("b.yaml", &manifest("b.example.com", None, 20));
    let p = Proc::run(&server, &s, &["--workers", "1"]);
    assert!(wait_until(|| stored(&server, "v1.a.example.com").is_some()
        && stored(&server, "v1.b.example.com").is_some()));
    // Same reload: a.yaml breaks (line 3), b.yaml goes away.
    s.write(
        "a.yaml",
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: [unclosed\n",
    );
    std::fs::remove_file(s.manifests().join("b.yaml")).unwrap();
    assert!(
        wait_until(|| stored(&server, "v1.b.example.com").is_none()),
        "{}",
        p.log()
    );
    p.wait_log("a.yaml:");
    assert!(
        stored(&server, "v1.a.example.com").is_some(),
        "a typo must not deregister an API"
    );
    assert_eq!(writes(&server, "v1.a.example.com"), ["create 201"]);
    // Fixing the file with a new spec applies it.
    s.write("a.yaml", &manifest("a.example.com", None, 30));
    assert!(
        wait_until(|| priority(&server, "v1.a.example.com") == Some(30)),
        "{}",
        p.log()
    );
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
}

/// Chaos seed 3795: a manifest version that replaces every name used to be applied
/// removals first, so a worker could see an empty desired set, refuse the delete by the
/// empty-set guard, and keep the old object registered for good.
#[test]
fn a_manifest_version_replacing_every_name_deletes_the_old_ones() {
    let server = TestServer::start();
    let s = Scratch::new("replace-all");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    let p = Proc::run(&server, &s, &["--workers", "2"]);
    assert!(wait_until(|| stored(&server, "v1.a.example.com").is_some()));
    s.write("a.yaml", &manifest("b.example.com", None, 20));
    assert!(
        wait_until(|| stored(&server, "v1.a.example.com").is_none()
            && stored(&server, "v1.b.example.com").is_some()),
        "{}",
        p.log()
    );
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    assert!(!log.contains("desired set is empty"), "{log}");
}

#[test]
fn server_errors_are_retried_with_backoff_until_convergence() {
    let server = TestServer::start();
    server.faults().fail_next_verb(Some("create"), 3, 500);
    let s = Scratch::new("flaky");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    let (code, log) = Proc::run(&server, &s, &["--once", "--timeout", "20s"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        writes(&server, "v1.a.example.com"),
        ["create 500", "create 500", "create 500", "create 201"]
    );
}

#[test]
fn too_many_requests_is_retried_after_the_servers_delay() {
    let server = TestServer::start();
    server.faults().set_retry_after(1);
    server.faults().fail_next_verb(Some("create"), 1, 429);
    let s = Scratch::new("throttled");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    let (code, log) = Proc::run(&server, &s, &["--once", "--timeout", "20s"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    let creates: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create" && r.resource.as_deref() == Some("apiservices"))
        .collect();
    assert_eq!(
        creates.iter().map(|r| r.code).collect::<Vec<_>>(),
        [429, 201]
    );
    let gap = creates[1].time.duration_since(creates[0].time).unwrap();
    assert!(
        gap >= Duration::from_millis(900),
        "retried after {gap:?}, before Retry-After: 1"
    );
}

#[test]
fn once_against_a_dead_server_exits_1_naming_what_failed() {
    let s = Scratch::new("dead");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let manifests = s.manifests();
    let p = Proc::spawn(&[
        "run",
        "--manifests",
        manifests.to_str().unwrap(),
        "--server",
        &url,
        "--once",
        "--timeout",
        "2s",
    ]);
    let (code, log) = p.wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("did not converge"), "{log}");
    assert!(
        log.contains("v1.a.example.com"),
        "names the failed object:\n{log}"
    );
}

#[test]
fn object_deleted_behind_the_controllers_back_is_recreated() {
    let server = TestServer::start();
    let s = Scratch::new("recreate");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    let p = Proc::run(&server, &s, &[]);
    assert!(wait_until(|| stored(&server, "v1.a.example.com").is_some()));
    let first_uid = stored(&server, "v1.a.example.com").unwrap()["metadata"]["uid"].clone();
    server
        .delete_object("apiservices", None, "v1.a.example.com")
        .unwrap();
    assert!(
        wait_until(|| stored(&server, "v1.a.example.com")
            .is_some_and(|o| o["metadata"]["uid"] != first_uid)),
        "{}",
        p.log()
    );
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn invalid_object_is_reported_with_its_field_and_the_others_still_converge() {
    let server = TestServer::start();
    let s = Scratch::new("invalid");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    s.write("bad.yaml", &manifest("bad.example.com", None, 0)); // versionPriority must be 1..=1000
    let (code, log) = Proc::run(&server, &s, &["--once", "--timeout", "3s"]).wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(stored(&server, "v1.a.example.com").is_some(), "{log}");
    assert!(stored(&server, "v1.bad.example.com").is_none());
    assert!(
        log.contains("v1.bad.example.com") && log.contains("spec.versionPriority"),
        "{log}"
    );
    assert!(log.contains("Invalid"), "{log}");
}

#[test]
fn plan_prints_cells_and_actions_and_writes_nothing() {
    let server = TestServer::start();
    server.seed(
        "apiservices",
        None,
        object("stale.example.com", Some("true"), 5),
    );
    server.seed(
        "apiservices",
        None,
        object("b.example.com", Some("true"), 5),
    );
    server.seed("apiservices", None, object("mine.example.com", None, 5));
    let s = Scratch::new("plan");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    s.write("b.yaml", &manifest("b.example.com", None, 20));
    let kc = s.kubeconfig(&server);
    let manifests = s.manifests();
    server.clear_requests();
    let (code, out) = Proc::spawn(&[
        "plan",
        "--manifests",
        manifests.to_str().unwrap(),
        "--kubeconfig",
        kc.to_str().unwrap(),
    ])
    .wait_exit(WAIT);
    assert_eq!(code, 0, "{out}");
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no line for {name}:\n{out}"))
            .to_string()
    };
    let words = |name: &str| {
        line(name)
            .split_whitespace()
            .take(3)
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        words("v1.a.example.com"),
        ["v1.a.example.com", "2C", "create"]
    );
    assert_eq!(
        words("v1.b.example.com"),
        ["v1.b.example.com", "6C", "update"]
    );
    assert_eq!(
        words("v1.stale.example.com"),
        ["v1.stale.example.com", "6A", "delete"]
    );
    assert_eq!(
        words("v1.mine.example.com"),
        ["v1.mine.example.com", "3A", "none"]
    );
    assert!(out.contains("plan: "), "{out}");
    let verbs: Vec<String> = server.requests().into_iter().map(|r| r.verb).collect();
    assert!(
        verbs
            .iter()
            .all(|v| v == "list" || v == "get" || v == "discovery"),
        "plan wrote: {verbs:?}"
    );
}

#[test]
fn sigterm_stops_promptly_while_the_watch_is_idle() {
    let server = TestServer::start();
    let s = Scratch::new("sigterm");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    let p = Proc::run(&server, &s, &[]);
    assert!(wait_until(|| stored(&server, "v1.a.example.com").is_some()));
    p.wait_log("v1.a.example.com 2C create");
    let started = Instant::now();
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    // Generous bound for a loaded CI machine; the log shows the real figure.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}:\n{log}",
        started.elapsed()
    );
    assert!(log.contains("stopped"), "{log}");
}

#[test]
fn bad_manifest_or_kubeconfig_exits_2_naming_the_file() {
    let s = Scratch::new("bad");
    s.write(
        "broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
    );
    let manifests = s.manifests();
    let (code, log) = Proc::spawn(&[
        "run",
        "--manifests",
        manifests.to_str().unwrap(),
        "--server",
        "http://127.0.0.1:1",
    ])
    .wait_exit(WAIT);
    assert_eq!(code, 2, "{log}");
    assert!(log.contains("broken.yaml:1"), "{log}");

    std::fs::remove_file(manifests.join("broken.yaml")).unwrap();
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    let kc: &Path = &s.0.join("kubeconfig");
    std::fs::write(kc, "clusters: [unclosed\n").unwrap();
    let (code, log) = Proc::spawn(&[
        "run",
        "--manifests",
        manifests.to_str().unwrap(),
        "--kubeconfig",
        kc.to_str().unwrap(),
    ])
    .wait_exit(WAIT);
    assert_eq!(code, 2, "{log}");
    assert!(log.contains(kc.to_str().unwrap()), "{log}");

    let (code, log) = Proc::spawn(&["run", "--bogus"]).wait_exit(WAIT);
    assert_eq!(code, 2, "{log}");
}

/// A plain HTTP GET; returns status code and body.
fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

#[test]
fn health_addr_serves_health_readiness_and_metrics() {
    let server = TestServer::start();
    let s = Scratch::new("ops");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    let p = Proc::run(&server, &s, &["--health-addr", "127.0.0.1:0"]);
    p.wait_log("operations endpoint on http://");
    let log = p.log();
    assert_eq!(
        log.matches("operations endpoint on").count(),
        1,
        "announced once:\n{log}"
    );
    let addr = log
        .split("operations endpoint on http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_string();
    assert!(wait_until(|| stored(&server, "v1.a.example.com").is_some()));
    assert_eq!(http_get(&addr, "/healthz").0, 200);
    assert!(wait_until(|| http_get(&addr, "/readyz").0 == 200));
    let (code, body) = http_get(&addr, "/metrics");
    assert_eq!(code, 200);
    let metrics =
        promtext::parse(&body).unwrap_or_else(|e| panic!("invalid exposition: {e}\n{body}"));
    let adds = metrics
        .value("workqueue_adds_total", &[("name", "autoregister")])
        .unwrap_or(0.0);
    assert!(adds >= 1.0, "{body}");
    let created = metrics
        .all("rest_client_requests_total")
        .iter()
        .filter(|s| {
            s.labels.get("method").map(String::as_str) == Some("POST")
                && s.labels.get("code").map(String::as_str) == Some("201")
        })
        .map(|s| s.value)
        .sum::<f64>();
    assert_eq!(created, 1.0, "{body}");
    assert_eq!(http_get(&addr, "/nope").0, 404);
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn leader_election_lets_one_replica_write_and_hands_over_on_sigterm() {
    let server = TestServer::start();
    let s = Scratch::new("leader");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    let args = [
        "--leader-elect",
        "--lease-namespace",
        "default",
        "--lease-name",
        "ar",
    ];
    let first = Proc::run(&server, &s, &args);
    first.wait_log("leader election: leading as");
    assert!(wait_until(|| stored(&server, "v1.a.example.com").is_some()));
    let second = Proc::run(&server, &s, &args);
    second.wait_log("leader election: waiting for lease");
    // The standby must not act: an edit is restored by the leader alone.
    edit_priority(&server, "v1.a.example.com", 5);
    assert!(wait_until(
        || priority(&server, "v1.a.example.com") == Some(10)
    ));
    assert!(!second.log().contains("leading as"), "{}", second.log());
    let holder = server.get_object("leases", Some("default"), "ar").unwrap();
    let (code, log) = first.terminate();
    assert_eq!(code, 0, "{log}");
    // Released on the way out (empty holder), so the standby takes over without waiting out the lease.
    second.wait_log("leader election: leading as");
    let lease = server.get_object("leases", Some("default"), "ar").unwrap();
    assert_ne!(
        lease["spec"]["holderIdentity"],
        holder["spec"]["holderIdentity"]
    );
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    server
        .delete_object("apiservices", None, "v1.a.example.com")
        .unwrap();
    assert!(
        wait_until(|| stored(&server, "v1.a.example.com").is_some()),
        "{}",
        second.log()
    );
    let (code, log) = second.terminate();
    assert_eq!(code, 0, "{log}");
}
