//! Recovery through the real binary: a 429 storm stays within the workqueue's budget, and
//! a server that comes back empty or with a new history is re-converged.
#![cfg(feature = "testing")]

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use autoregister::testserver::{RvChange, TestServer};

#[path = "support/binary.rs"]
mod binary;

use binary::{manifest, wait_until, Proc, Scratch};

/// Per-key backoff of the workqueue (client-go's): 5 ms, doubling.
const PER_KEY_BASE: Duration = Duration::from_millis(5);
/// The workqueue's overall bucket: 10 retries/s, burst 100.
const BUCKET_QPS: f64 = 10.0;
const BUCKET_BURST: f64 = 100.0;

/// Most attempts one key can make within `window` of its first: the first, then one per
/// per-key backoff step that still fits (5, 10, 20, ... ms after the previous).
fn per_key_budget(window: Duration) -> usize {
    let (mut attempts, mut at, mut wait) = (1, Duration::ZERO, PER_KEY_BASE);
    while at + wait <= window {
        at += wait;
        wait *= 2;
        attempts += 1;
    }
    attempts
}

#[test]
fn a_429_storm_with_retry_after_0_stays_within_the_rate_limiters_budget() {
    const KEYS: usize = 20;
    let window = Duration::from_secs(1);
    let server = TestServer::start();
    server.faults().set_retry_after(0);
    server
        .faults()
        .fail_next_verb(Some("create"), usize::MAX / 2, 429);
    let s = Scratch::new("storm");
    for i in 0..KEYS {
        s.write(
            &format!("g{i}.yaml"),
            &manifest(&format!("g{i}.example.com"), &[], 10),
        );
    }
    // No client-side limit: the workqueue alone must pace the retries.
    let p = Proc::run(&server, &s, &["--qps", "0"]);
    let creates = || -> Vec<(String, SystemTime)> {
        server
            .requests()
            .into_iter()
            .filter(|r| r.verb == "create")
            .map(|r| (r.name.unwrap_or_default(), r.time))
            .collect()
    };
    assert!(wait_until(|| !creates().is_empty()), "{}", p.log());
    let first = creates()[0].1;
    // The measurement window itself: what the controller does in it is the result.
    let end = Instant::now() + window;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let in_window: Vec<(String, SystemTime)> = creates()
        .into_iter()
        .filter(|(_, t)| t.duration_since(first).unwrap_or_default() <= window)
        .collect();
    drop(p);

    let mut per_key: BTreeMap<String, usize> = BTreeMap::new();
    for (name, _) in &in_window {
        *per_key.entry(name.clone()).or_default() += 1;
    }
    assert_eq!(per_key.len(), KEYS, "every key was tried: {per_key:?}");
    let key_budget = per_key_budget(window);
    for (name, n) in &per_key {
        assert!(
            *n <= key_budget,
            "{name} tried {n} times in {window:?}; its exponential backoff allows {key_budget}"
        );
    }
    // First attempts are plain adds; every retry takes a token from the overall bucket.
    let bucket = (BUCKET_BURST + BUCKET_QPS * window.as_secs_f64()).ceil() as usize;
    let total = in_window.len();
    assert!(
        total <= KEYS + bucket,
        "{total} creates in {window:?}; the bucket allows {KEYS} + {bucket}"
    );
    assert!(total > KEYS, "retried at all: {total}");
}

/// Starts the binary on `N` manifests, applies `restart` once some but not all exist
/// (mid-sync), and waits until every one exists again.
fn reconverges_after_a_restart(tag: &str, restart: impl FnOnce(&TestServer)) {
    const N: usize = 60;
    let server = TestServer::start();
    // Slow answers so the restart lands while the controller is still creating.
    server.faults().set_latency(Duration::from_millis(10));
    let s = Scratch::new(tag);
    for i in 0..N {
        s.write(
            &format!("g{i}.yaml"),
            &manifest(&format!("g{i}.example.com"), &[], 10),
        );
    }
    let count = || server.list_objects("apiservices", None).len();
    // The periodic relist is pushed out of the way: recovery must not depend on it.
    let p = Proc::run(&server, &s, &["--relist", "1h"]);
    assert!(wait_until(|| count() >= N / 4), "{}", p.log());
    let before = count();
    restart(&server);
    let restarted = Instant::now();
    assert!(
        before < N,
        "the restart came after the sync ({before} of {N})"
    );
    assert!(
        wait_until(|| count() == N),
        "{} of {N} after {:?}:\n{}",
        count(),
        restarted.elapsed(),
        p.log()
    );
    // Bounded by the reflector's backoff (0.8–1.6 s for the first retry), not minutes.
    let took = restarted.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "re-converged after {took:?}"
    );
    assert!(
        p.log().contains("relist at resourceVersion"),
        "the relist that found the loss says so:\n{}",
        p.log()
    );
}

#[test]
fn a_server_restarted_empty_mid_sync_is_re_converged() {
    reconverges_after_a_restart("empty", |s| s.restart_empty(RvChange::Keep));
}

#[test]
fn a_server_restarted_empty_with_a_rewound_history_is_re_converged() {
    reconverges_after_a_restart("rewind", |s| s.restart_empty(RvChange::Rewind(1)));
}

#[test]
fn a_server_restarted_empty_with_a_jumped_history_is_re_converged() {
    reconverges_after_a_restart("jump", |s| s.restart_empty(RvChange::Jump(10_000)));
}

#[test]
fn once_with_no_time_to_sync_says_so_instead_of_blaming_the_server() {
    let server = TestServer::start();
    let s = Scratch::new("no-time");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let (code, log) =
        Proc::run(&server, &s, &["--once", "--timeout", "0s"]).wait_exit(binary::WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("v1.a.example.com"), "{log}");
    assert!(log.contains("had not synced yet"), "{log}");
    assert!(
        !log.contains("reachable"),
        "the server did nothing wrong:\n{log}"
    );
}

#[test]
fn once_against_a_dead_server_names_the_list_failure() {
    let s = Scratch::new("dead-list");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let m = s.manifests();
    let (code, log) = Proc::spawn(&[
        "run",
        "--manifests",
        m.to_str().unwrap(),
        "--server",
        &url,
        "--once",
        "--timeout",
        "500ms",
    ])
    .wait_exit(binary::WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("never synced: list failing: connect failed"),
        "{log}"
    );
}

#[test]
fn the_periodic_relist_repairs_a_loss_no_watch_showed() {
    const N: usize = 10;
    let server = TestServer::start();
    let s = Scratch::new("relist");
    for i in 0..N {
        s.write(
            &format!("g{i}.yaml"),
            &manifest(&format!("g{i}.example.com"), &[], 10),
        );
    }
    let count = || server.list_objects("apiservices", None).len();
    let p = Proc::run(&server, &s, &["--relist", "1s"]);
    assert!(wait_until(|| count() == N), "{}", p.log());
    let lists = server.count("list");
    // No event, no dropped connection: the open watch has nothing to say.
    server.wipe_silently();
    assert_eq!(count(), 0);
    assert!(
        wait_until(|| count() == N),
        "{} of {N}:\n{}",
        count(),
        p.log()
    );
    assert!(server.count("list") > lists, "repaired by a list");
}

#[test]
fn retries_held_back_during_an_outage_go_at_once_when_the_server_is_back() {
    const N: usize = 150;
    let server = TestServer::start();
    // Every create fails: each failure takes a token of the workqueue's bucket (10/s after
    // a burst of 100), so the retries of 150 names are booked well into the future.
    server
        .faults()
        .fail_next_verb(Some("create"), usize::MAX / 2, 500);
    let s = Scratch::new("outage");
    for i in 0..N {
        s.write(
            &format!("g{i}.yaml"),
            &manifest(&format!("g{i}.example.com"), &[], 10),
        );
    }
    let count = || server.list_objects("apiservices", None).len();
    let p = Proc::run(&server, &s, &["--qps", "0", "--relist", "1h"]);
    assert!(
        wait_until(|| server.count("create") >= N + 100),
        "{}",
        p.log()
    );
    // The server comes back (connections drop, writes work again).
    server.faults().clear();
    server.restart(RvChange::Keep);
    let back = Instant::now();
    assert!(
        wait_until(|| count() == N),
        "{} of {N}:\n{}",
        count(),
        p.log()
    );
    // Bounded by the reflector's backoff before its relist, not by the booked retries
    // (the last of them ~(2·150 − 100)/10 = 20 s away).
    let took = back.elapsed();
    assert!(took < Duration::from_secs(8), "all back after {took:?}");
}
