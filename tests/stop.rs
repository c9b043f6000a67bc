//! Stops when told, never hangs: signals, lost leadership, hung exec plugins, FIFOs in the
//! manifest folder, waits with bounds, and probes under load, through the real binary
//! against the in-process test API server.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/plugin.rs"]
mod plugin;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant, SystemTime};

use autoregister::api::{APIService, APIServiceSpec};
use autoregister::client::{Api, Client};
use autoregister::controller::{Controller, ControllerOptions};
use autoregister::runtime::leader::{LeaderCallbacks, LeaderConfig, LeaderElector};
use autoregister::testserver::TestServer;
use binary::{wait_until, Proc, Scratch, WAIT};
use plugin::{assert_plugin_gone, exec_kubeconfig, have_proc, plugin_pid};
use serde_json::json;

/// The ownership label these tests own (the CLI's default).
const LABEL: &str = autoregister::api::DEFAULT_LABEL_KEY;

/// The promise under test: exit within 2 s of SIGTERM.
const STOP_BOUND: Duration = Duration::from_secs(2);

/// Fast leader election so losing and taking over happen in about a second.
const FAST_LEASE: &[&str] = &[
    "--leader-elect",
    "--leader-elect-lease-duration",
    "2s",
    "--leader-elect-renew-deadline",
    "1200ms",
    "--leader-elect-retry-period",
    "200ms",
];

/// `n` APIService manifests in one multi-document file (no ownership label: the default
/// mode, so the test does not depend on which label key is ours).
fn many(scratch: &Scratch, n: usize) {
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "---\napiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.g{i}.example.com\n\
             spec:\n  group: g{i}.example.com\n  version: v1\n  groupPriorityMinimum: 100\n  versionPriority: 10\n"
        ));
    }
    scratch.write("many.yaml", &text);
}

/// APIService writes the server received after `t`.
fn writes_after(server: &TestServer, t: SystemTime) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| {
            r.resource.as_deref() == Some("apiservices")
                && matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete")
                && r.time > t
        })
        .map(|r| format!("{} {:?}", r.verb, r.name))
        .collect()
}

fn apiservice_writes(server: &TestServer) -> usize {
    ["create", "update", "delete"]
        .iter()
        .map(|v| server.count(v))
        .sum()
}

/// Waits for exit and returns the code and how long after `since` it came.
fn exit_within(p: &mut Proc, since: Instant, bound: Duration) -> (i32, Duration) {
    let code = p
        .wait_for_exit(bound + Duration::from_secs(10))
        .unwrap_or_else(|| panic!("still running 10 s past {bound:?}:\n{}", p.log()));
    let took = since.elapsed();
    p.drain();
    assert!(
        took <= bound,
        "exited after {took:?}, bound {bound:?}:\n{}",
        p.log()
    );
    (code, took)
}

fn lease_holder(server: &TestServer) -> Option<String> {
    let v = server.get_object("leases", Some("kube-system"), "autoregister")?;
    Some(
        v["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

#[test]
fn sigterm_with_5000_queued_names_sends_no_write_after_it_releases_the_lease_and_exits_within_2s() {
    let server = TestServer::start();
    let s = Scratch::new("sigterm-queue");
    many(&s, 5_000);
    // 5 writes/s: the queue stays long, and a controller that kept working would show.
    let mut args = vec!["--qps", "5", "--burst", "1"];
    args.extend_from_slice(FAST_LEASE);
    let mut p = Proc::run(&server, &s, &args);
    assert!(
        wait_until(|| server.count("create") >= 2),
        "never started writing:\n{}",
        p.log()
    );
    let holder = lease_holder(&server).expect("a lease");
    assert!(!holder.is_empty(), "held while leading");
    // A request already on the wire when the signal is sent may arrive a moment later.
    let signalled = SystemTime::now();
    let t0 = Instant::now();
    p.signal("TERM");
    let (code, took) = exit_within(&mut p, t0, STOP_BOUND);
    eprintln!("exited {took:?} after SIGTERM");
    assert_eq!(code, 0, "{}", p.log());
    let late = writes_after(&server, signalled + Duration::from_millis(100));
    assert!(
        late.is_empty(),
        "writes after the signal: {late:?}\n{}",
        p.log()
    );
    assert!(
        server.count("create") < 100,
        "the queue was dropped, not drained"
    );
    assert_eq!(
        lease_holder(&server).as_deref(),
        Some(""),
        "the lease is released on the way out"
    );
}

#[test]
fn sigterm_while_the_server_stalls_exits_within_2s_and_a_second_signal_at_once_with_1() {
    let server = TestServer::start();
    let s = Scratch::new("sigterm-stall");
    many(&s, 200);
    let mut p = Proc::run(&server, &s, &["--qps", "20", "--burst", "1"]);
    assert!(wait_until(|| server.count("create") >= 1), "{}", p.log());
    // Requests in flight now hang: only cancelling them lets the process go.
    server.faults().pause();
    let t0 = Instant::now();
    p.signal("TERM");
    let (code, took) = exit_within(&mut p, t0, STOP_BOUND);
    eprintln!("exited {took:?} after SIGTERM with the server stalled");
    assert_eq!(code, 0, "{}", p.log());
    server.faults().resume();

    // A second signal does not wait for anything: exit 1 at once.
    let s2 = Scratch::new("sigterm-twice");
    many(&s2, 10);
    server.faults().pause();
    let mut p = Proc::run(&server, &s2, &[]);
    p.wait_log("started:");
    // Frozen, the process gets both signals pending at once: the second is there before a
    // clean stop could finish (a second TERM would merge with the first, so an INT).
    p.signal("STOP");
    p.signal("TERM");
    p.signal("INT");
    let t0 = Instant::now();
    p.signal("CONT");
    let (code, _) = exit_within(&mut p, t0, Duration::from_secs(1));
    assert_eq!(code, 1, "{}", p.log());
    assert!(p.log().contains("second signal"), "{}", p.log());
    server.faults().resume();
}

#[test]
fn sigterm_before_convergence_under_once_exits_1() {
    let server = TestServer::start();
    server.faults().pause();
    let s = Scratch::new("once-sigterm");
    many(&s, 3);
    let mut p = Proc::run(&server, &s, &["--once", "--timeout", "60s"]);
    p.wait_log("started:");
    let t0 = Instant::now();
    p.signal("TERM");
    let (code, _) = exit_within(&mut p, t0, STOP_BOUND);
    server.faults().resume();
    assert_eq!(code, 1, "a Job must not read this as success:\n{}", p.log());
    assert!(
        p.log().contains("stopped by a signal before converging"),
        "{}",
        p.log()
    );
}

#[test]
fn a_leader_frozen_past_its_renew_deadline_writes_nothing_after_it_resumes_and_exits_1() {
    let server = TestServer::start();
    let s = Scratch::new("sigstop");
    many(&s, 5_000);
    let mut p = Proc::run(
        &server,
        &s,
        &[
            "--qps",
            "10",
            "--burst",
            "1",
            "--leader-elect",
            "--leader-elect-lease-duration",
            "1s",
            "--leader-elect-renew-deadline",
            "600ms",
            "--leader-elect-retry-period",
            "100ms",
        ],
    );
    assert!(wait_until(|| server.count("create") >= 2), "{}", p.log());
    p.signal("STOP");
    // Frozen well past the 600 ms renew deadline (and the 1 s lease): leadership is gone.
    let frozen = Instant::now();
    while frozen.elapsed() < Duration::from_millis(1_300) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let resumed = SystemTime::now();
    p.signal("CONT");
    let code = p
        .wait_for_exit(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("a leader that lost its lease must exit:\n{}", p.log()));
    p.drain();
    assert_eq!(code, 1, "{}", p.log());
    let late = writes_after(&server, resumed);
    assert!(
        late.is_empty(),
        "writes after leadership was lost: {late:?}\n{}",
        p.log()
    );
    assert!(p.log().contains("lost lease"), "{}", p.log());
}

#[test]
fn a_leader_that_cannot_renew_stops_and_exits_1_by_its_renew_deadline() {
    let server = TestServer::start();
    let s = Scratch::new("cannot-renew");
    many(&s, 5_000);
    let mut p = Proc::run(
        &server,
        &s,
        &[
            "--qps",
            "10",
            "--burst",
            "1",
            "--leader-elect",
            "--leader-elect-lease-duration",
            "2s",
            "--leader-elect-renew-deadline",
            "1s",
            "--leader-elect-retry-period",
            "200ms",
        ],
    );
    assert!(wait_until(|| server.count("create") >= 2), "{}", p.log());
    // Nothing answers from now on: renewals hang like every write.
    server.faults().pause();
    let paused = SystemTime::now();
    let t0 = Instant::now();
    // The renew deadline (1 s) after the last renewal, and a little for the way out; well
    // before the 2 s lease could expire for the others plus their own wait.
    let (code, took) = exit_within(&mut p, t0, Duration::from_millis(2_000));
    server.faults().resume();
    assert_eq!(code, 1, "{}", p.log());
    assert!(
        p.log()
            .contains("could not renew the lease within the renew deadline"),
        "{}",
        p.log()
    );
    eprintln!("exited {took:?} after the server stopped answering");
    // Leadership ended at most the renew deadline after the pause (the last renewal came
    // before it); a write sent at that instant may arrive a moment later.
    let late = writes_after(&server, paused + Duration::from_millis(1_050));
    assert!(
        late.is_empty(),
        "writes after the renew deadline: {late:?}\n{}",
        p.log()
    );
}

#[test]
fn once_leader_elect_times_out_while_another_holds_the_lease() {
    let server = TestServer::start();
    server.seed(
        "leases",
        Some("kube-system"),
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "autoregister", "namespace": "kube-system"},
            "spec": {
                "holderIdentity": "other-replica", "leaseDurationSeconds": 3600,
                "renewTime": autoregister::api::time::format_rfc3339_micro(SystemTime::now()),
            }
        }),
    );
    let s = Scratch::new("once-lease");
    many(&s, 1);
    let t0 = Instant::now();
    let mut p = Proc::run(
        &server,
        &s,
        &["--once", "--leader-elect", "--timeout", "1s"],
    );
    let (code, _) = exit_within(&mut p, t0, Duration::from_secs(6));
    assert_eq!(code, 1, "{}", p.log());
    assert!(
        p.log()
            .contains("still waiting for the lease kube-system/autoregister held by other-replica"),
        "{}",
        p.log()
    );
    assert_eq!(apiservice_writes(&server), 0, "a standby writes nothing");
}

#[test]
fn plan_timeout_bounds_a_server_that_never_answers() {
    let server = TestServer::start();
    server.faults().pause();
    let s = Scratch::new("plan-stall");
    many(&s, 1);
    let t0 = Instant::now();
    let mut p = Proc::command("plan", &server, &s, &["--timeout", "1s"]);
    let (code, _) = exit_within(&mut p, t0, Duration::from_secs(4));
    server.faults().resume();
    assert_eq!(code, 1, "{}", p.log());
    assert!(p.log().contains("cannot list APIServices"), "{}", p.log());
}

#[test]
fn empty_lease_names_are_usage_errors() {
    for flag in ["--lease-namespace=", "--lease-name="] {
        let p = Proc::spawn(&["run", "--manifests", "m", "--leader-elect", flag]);
        let (code, log) = p.wait_exit(WAIT);
        assert_eq!(code, 2, "{log}");
        assert!(log.contains("must not be empty"), "{log}");
    }
}

#[test]
fn timeout_summary_states_one_cause_once_with_its_count_instead_of_a_line_per_name() {
    let server = TestServer::start();
    server.faults().fail_fraction(1.0, 500);
    let s = Scratch::new("summary");
    many(&s, 30);
    let (code, log) =
        Proc::run(&server, &s, &["--once", "--timeout", "1s", "--qps", "0"]).wait_exit(WAIT);
    server.faults().clear();
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("did not converge within 1s: 0 of 30 APIServices converged, 30 failed, 0 not synced yet"),
        "{log}"
    );
    // The server failing every list is one cause: said once, with the names it holds up.
    let causes: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("the APIService cache never synced"))
        .collect();
    assert_eq!(causes.len(), 1, "{log}");
    assert!(
        causes[0].contains("30 APIServices: the APIService cache never synced")
            && causes[0].contains("and 25 more"),
        "{log}"
    );
    let named = log.lines().filter(|l| l.contains("ERROR   v1.g")).count();
    assert_eq!(named, 0, "no line per name:\n{log}");
}

// ---- exec plugins ----

#[test]
fn a_plugin_that_never_answers_bounds_plan_timeout_and_is_killed() {
    if !have_proc() {
        return;
    }
    // TLS: exec plugins run only for TLS servers (credentials go only over TLS).
    let server = TestServer::builder().tls(true).start().unwrap();
    let s = Scratch::new("exec-plan");
    let (kc, pidfile) = exec_kubeconfig(&s.0, &server);
    many(&s, 1);
    let t0 = Instant::now();
    let mut p = Proc::spawn(&[
        "plan",
        "--manifests",
        s.manifests().to_str().unwrap(),
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--timeout",
        "1s",
    ]);
    let pid = plugin_pid(&pidfile);
    let (code, _) = exit_within(&mut p, t0, Duration::from_secs(5));
    assert_eq!(code, 1, "{}", p.log());
    assert!(
        p.log().contains("exec plugin"),
        "says what hung:\n{}",
        p.log()
    );
    assert_plugin_gone(pid, &p.log());
}

#[test]
fn a_plugin_that_never_answers_bounds_once_timeout_and_is_killed() {
    if !have_proc() {
        return;
    }
    // TLS: exec plugins run only for TLS servers (credentials go only over TLS).
    let server = TestServer::builder().tls(true).start().unwrap();
    let s = Scratch::new("exec-once");
    let (kc, pidfile) = exec_kubeconfig(&s.0, &server);
    many(&s, 1);
    let t0 = Instant::now();
    let mut p = Proc::run_with_kubeconfig(&kc, &s, &["--once", "--timeout", "1s"]);
    let pid = plugin_pid(&pidfile);
    let (code, _) = exit_within(&mut p, t0, Duration::from_secs(5));
    assert_eq!(code, 1, "{}", p.log());
    assert!(
        p.log().contains("did not converge within 1s"),
        "{}",
        p.log()
    );
    assert_plugin_gone(pid, &p.log());
}

#[test]
fn a_plugin_that_never_answers_is_logged_and_killed_on_sigterm() {
    if !have_proc() {
        return;
    }
    // TLS: exec plugins run only for TLS servers (credentials go only over TLS).
    let server = TestServer::builder().tls(true).start().unwrap();
    let s = Scratch::new("exec-sigterm");
    let (kc, pidfile) = exec_kubeconfig(&s.0, &server);
    many(&s, 1);
    let mut p = Proc::run_with_kubeconfig(&kc, &s, &[]);
    let pid = plugin_pid(&pidfile);
    p.wait_log("waiting for exec plugin");
    let t0 = Instant::now();
    p.signal("TERM");
    let (code, _) = exit_within(&mut p, t0, STOP_BOUND);
    assert_eq!(code, 0, "{}", p.log());
    assert_plugin_gone(pid, &p.log());
}

// ---- manifests ----

#[test]
fn a_fifo_in_the_manifest_folder_is_an_error_naming_it_and_reloads_and_sigterm_still_work() {
    let server = TestServer::start();
    let s = Scratch::new("fifo");
    many(&s, 1);
    let mut p = Proc::run(&server, &s, &[]);
    assert!(
        wait_until(|| server
            .get_object("apiservices", None, "v1.g0.example.com")
            .is_some()),
        "{}",
        p.log()
    );
    let fifo = s.manifests().join("d.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|st| st.success()) {
        eprintln!("no mkfifo here; skipped");
        return;
    }
    p.wait_log("d.yaml: a FIFO; only regular files are read");
    // The reload loop is not stuck in open(): an edit still applies.
    s.write(
        "b.yaml",
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.b.example.com\n\
         spec:\n  group: b.example.com\n  version: v1\n  groupPriorityMinimum: 100\n  versionPriority: 10\n",
    );
    assert!(
        wait_until(|| server
            .get_object("apiservices", None, "v1.b.example.com")
            .is_some()),
        "{}",
        p.log()
    );
    assert!(
        server
            .get_object("apiservices", None, "v1.g0.example.com")
            .is_some(),
        "the other objects stay"
    );
    let t0 = Instant::now();
    p.signal("TERM");
    let (code, _) = exit_within(&mut p, t0, STOP_BOUND);
    assert_eq!(code, 0, "{}", p.log());
}

// ---- operations endpoint ----

fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, out)
}

#[test]
fn healthz_is_answered_while_100_idle_connections_stall() {
    let server = TestServer::start();
    let s = Scratch::new("idle-conns");
    many(&s, 1);
    let p = Proc::run(&server, &s, &["--health-addr", "127.0.0.1:0"]);
    let addr = p.ops_addr();
    assert!(
        wait_until(|| server
            .get_object("apiservices", None, "v1.g0.example.com")
            .is_some()),
        "{}",
        p.log()
    );
    // Probe-storm clients that connect and send nothing.
    let idle: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let t0 = Instant::now();
    let (code, body) = http_get(&addr, "/healthz");
    assert_eq!(code, 200, "{body}");
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    drop(idle);
    let (code, _) = p.terminate();
    assert_eq!(code, 0);
}

// ---- library API ----

#[test]
fn duration_max_at_the_library_api_returns_without_panicking() {
    let server = TestServer::start();
    let client = Client::new(server.client_config()).unwrap();
    let c = Controller::new(client.clone(), ControllerOptions::new(LABEL));
    c.add_api_service_to_sync(APIService::new(
        "v1.max.example.com",
        APIServiceSpec {
            group: "max.example.com".into(),
            version: "v1".into(),
            group_priority_minimum: 100,
            version_priority: 10,
            ..Default::default()
        },
    ));
    c.start();
    assert!(c.wait_until_synced(Duration::MAX));
    assert_eq!(c.wait_converged(Duration::MAX), Ok(()));
    let lease = LeaderElector::start(
        Api::namespaced(client, "kube-system"),
        "max",
        "me".into(),
        LeaderConfig::default(),
        LeaderCallbacks::new(),
    )
    .unwrap();
    assert!(lease.wait_until_leader(Duration::MAX));
    lease.release_and_stop();
    c.shutdown();
    // After shutdown the waits end at once, however long they were asked to wait.
    let t0 = Instant::now();
    assert!(c.wait_until_synced(Duration::MAX));
    assert!(t0.elapsed() < Duration::from_secs(1));
}
