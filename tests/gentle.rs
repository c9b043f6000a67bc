//! Gentle with a server that is down or throttling, through the real binary: a stopped
//! server gets the reflector's attempts and nothing else, a server's `Retry-After` holds a
//! name on every path that queues it, and a 429 holds every write of the client.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant, SystemTime};

use autoregister::testserver::{RequestRecord, TestServer};
use serde_json::json;

#[path = "support/binary.rs"]
mod binary;

use binary::{http_get, is_write, manifest, stored, wait_until, wait_until_for, Proc, Scratch};

/// Writes `n` manifests `g0.example.com` .. with `priority`.
fn write_manifests(s: &Scratch, n: usize, priority: i64) {
    for i in 0..n {
        s.write(
            &format!("g{i}.yaml"),
            &manifest(&format!("g{i}.example.com"), &[], priority),
        );
    }
}

#[test]
fn a_stopped_server_gets_only_the_reflectors_attempts_and_every_name_converges_when_back() {
    const N: usize = 500;
    const WINDOW: Duration = Duration::from_secs(10);
    let server = TestServer::start();
    // Slow answers, so the server stops while most names are still to be created.
    server.faults().set_latency(Duration::from_millis(4));
    let s = Scratch::new("down");
    write_manifests(&s, N, 10);
    let count = || server.list_objects("apiservices", None).len();
    let p = Proc::run(&server, &s, &["--health-addr", "127.0.0.1:0"]);
    let ops = p.ops_addr();
    assert!(wait_until(|| count() >= N / 5), "{}", p.log());
    server.go_down();
    let down = Instant::now();
    let before = count();
    assert!(before < N, "the server stopped mid-sync ({before} of {N})");

    p.wait_log("writes paused");
    let (code, body) = http_get(&ops, "/readyz");
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("[-]apiserver-reachable failed: the API server has not answered"),
        "{body}"
    );
    let (code, body) = http_get(&ops, "/healthz");
    assert_eq!(code, 200, "the process itself is fine: {body}");

    // The measurement window itself: what the controller sends in it is the result.
    while down.elapsed() < WINDOW {
        std::thread::sleep(Duration::from_millis(50));
    }
    let attempts = server.refused_connections();
    let log = p.log();
    assert!(
        attempts < 10,
        "{attempts} connection attempts in {WINDOW:?} to a stopped server, {} names to go:\n{log}",
        N - before
    );
    assert_eq!(
        log.matches("writes paused").count(),
        1,
        "one line for the pause, not one per name:\n{log}"
    );
    assert!(
        !log.lines()
            .any(|l| l.contains(".example.com") && l.contains("failed")),
        "no per-name failure lines:\n{log}"
    );

    let back = SystemTime::now();
    server.come_back();
    // The reflector's next attempt is up to twice its grown backoff away (about 6–13 s
    // after three or four failures); from then on, convergence is what is judged.
    assert!(
        wait_until_for(Duration::from_secs(45), || count() == N),
        "{} of {N}:\n{}",
        count(),
        p.log()
    );
    let converged = SystemTime::now();
    let first = server
        .requests()
        .iter()
        .filter(|r| r.time >= back)
        .map(|r| r.time)
        .min()
        .unwrap();
    let reached = first.duration_since(back).unwrap_or_default();
    let took = converged.duration_since(first).unwrap_or_default();
    assert!(
        took < Duration::from_secs(5),
        "{N} names converged {took:?} after the returned server's first request \
         ({reached:?} after its return)"
    );
    eprintln!(
        "stopped server: {attempts} connection attempts in {WINDOW:?}; {N} names converged \
         {took:?} after the first request the returned server saw, {reached:?} after its return"
    );
    let log = p.log();
    assert_eq!(log.matches("writes resume").count(), 1, "{log}");
    assert!(
        wait_until(|| http_get(&ops, "/readyz").0 == 200),
        "{}",
        http_get(&ops, "/readyz").1
    );
}

/// Our updates (server-side applies) the server logged for `name`, oldest first.
fn updates(server: &TestServer, name: &str) -> Vec<RequestRecord> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "patch" && r.name.as_deref() == Some(name))
        .collect()
}

#[test]
fn a_watch_event_inside_retry_after_does_not_bring_the_name_back_early() {
    let server = TestServer::start();
    let s = Scratch::new("ra-event");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let name = "v1.a.example.com";
    // Without the client-wide hold every write meets its own answer: what holds the name
    // back here is its own "not before".
    let p = Proc::run_env(&server, &s, &[], &[("AUTOREGISTER_THROTTLE_WRITES", "off")]);
    assert!(
        wait_until(|| stored(&server, name).is_some()),
        "{}",
        p.log()
    );
    server.faults().set_retry_after(2);
    server.faults().fail_next_verb(Some("patch"), 1, 429);
    s.write("a.yaml", &manifest("a.example.com", &[], 20));
    assert!(
        binary::wait_until_within(binary::WAIT, || !updates(&server, name).is_empty()),
        "{}",
        p.log()
    );
    let refused = updates(&server, name)[0].clone();
    assert_eq!(refused.code, 429);
    // Another writer changes the object: a watch event for the name, right after the 429.
    server
        .update_object_as("someone-else", "apiservices", None, name, |o| {
            o["metadata"]["annotations"] = json!({"example.com/touched": "yes"});
        })
        .unwrap();
    let touched = SystemTime::now().duration_since(refused.time).unwrap();
    assert!(
        touched < Duration::from_millis(500),
        "the event came {touched:?} after the 429"
    );
    assert!(
        wait_until(|| updates(&server, name).iter().any(|r| r.code == 200)),
        "{}",
        p.log()
    );
    let next = &updates(&server, name)[1];
    let gap = next.time.duration_since(refused.time).unwrap();
    assert!(
        gap >= Duration::from_secs(2),
        "the update came {gap:?} after a 429 with Retry-After: 2"
    );
}

#[test]
fn a_429_with_retry_after_holds_every_write_of_the_client() {
    const N: usize = 5;
    let server = TestServer::start();
    server.faults().set_retry_after(2);
    server.faults().fail_next_verb(Some("create"), 1, 429);
    let s = Scratch::new("ra-client");
    write_manifests(&s, N, 10);
    let count = || server.list_objects("apiservices", None).len();
    // One worker: without the hold it would go on to the next name at once.
    let p = Proc::run(&server, &s, &["--workers", "1"]);
    assert!(wait_until(|| count() == N), "{}", p.log());
    let writes: Vec<RequestRecord> = server
        .requests()
        .into_iter()
        .filter(|r| is_write(r) && r.resource.as_deref() == Some("apiservices"))
        .collect();
    let refused = writes.iter().find(|r| r.code == 429).unwrap();
    for w in writes.iter().filter(|w| w.time > refused.time) {
        let gap = w.time.duration_since(refused.time).unwrap();
        assert!(
            gap >= Duration::from_secs(2),
            "{} {:?} sent {gap:?} after a 429 with Retry-After: 2",
            w.verb,
            w.name
        );
    }
    assert_eq!(
        writes.len(),
        N + 1,
        "one 429, then each name once: {writes:?}"
    );
}

#[test]
fn a_stop_while_paused_for_a_stopped_server_is_immediate() {
    const N: usize = 20;
    let server = TestServer::start();
    let s = Scratch::new("down-stop");
    write_manifests(&s, N, 10);
    let count = || server.list_objects("apiservices", None).len();
    let p = Proc::run(&server, &s, &[]);
    assert!(wait_until(|| count() == N), "{}", p.log());
    server.go_down();
    p.wait_log("writes paused");
    // Every name wants an update now; the workers wait for the server.
    write_manifests(&s, N, 20);
    p.wait_log("v1.g0.example.com: changed in the manifests");
    let (code, log) = p.terminate_within(Duration::from_secs(3));
    assert_eq!(code, Some(0), "exits at once while paused:\n{log}");
    server.come_back();
    let written = server
        .requests()
        .into_iter()
        .filter(|r| is_write(r) && r.resource.as_deref() == Some("apiservices"))
        .count();
    assert_eq!(written, N, "only the first creates were written:\n{log}");
}

#[test]
fn a_write_cut_short_on_a_healthy_server_pauses_only_until_the_watch_is_checked() {
    let server = TestServer::start();
    let s = Scratch::new("cut");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    // The sync decisions at debug: "nothing to do" says b was decided again.
    let p = Proc::run_env(
        &server,
        &s,
        &["--events=false"],
        &[("RUST_LOG", "info,autoregister::controller::sync=debug")],
    );
    assert!(
        wait_until(|| stored(&server, "v1.a.example.com").is_some()),
        "{}",
        p.log()
    );
    let (lists, watches) = (server.count("list"), server.count("watch"));
    // The next answer, the create of b, is cut mid-body: no answer, as from a server
    // that went away, while the watch keeps flowing.
    server.faults().cut_next_response();
    s.write("b.yaml", &manifest("b.example.com", &[], 10));
    let changed = Instant::now();
    p.wait_log("writes paused");
    p.wait_log("writes resume");
    // The cut create was applied; deciding b again finds it done (or creates it).
    assert!(
        wait_until(|| {
            let log = p.log();
            log.contains("v1.b.example.com 6C: nothing to do")
                || log.contains(
                    "v1.b.example.com 2C create (absent, desired always; desired, absent): ok",
                )
        }),
        "{}",
        p.log()
    );
    let took = changed.elapsed();
    // Checked by re-opening the watch at once, not by waiting for its timeout (minutes) or
    // the reflector's backoff, and without a relist.
    assert!(took < Duration::from_secs(5), "b settled after {took:?}");
    assert_eq!(server.count("list"), lists, "no relist:\n{}", p.log());
    assert!(server.count("watch") > watches, "{}", p.log());
}
