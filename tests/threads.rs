//! An idle `run` stays within its thread budget, `--workers` + 6, whatever flags are on:
//! what only waits (the queue's delays, the resync, the CA sources' polling, pacing Events)
//! shares one timer thread, and nothing waits for the cache on a thread of its own.
//! Through the real binary.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;

use autoregister::testserver::TestServer;
use binary::{wait_until, Proc, Scratch};

/// The names (`comm`, at most 15 bytes) of the process's threads, sorted.
fn threads(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|c| c.trim_end().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Runs with `flags` and an empty manifest folder until the watch is open and `ready` shows
/// in the log; answers the threads then.
fn idle_threads(flags: &[&str], ready: &str) -> Vec<String> {
    let server = TestServer::start();
    let scratch = Scratch::new("threads");
    let proc = Proc::run(&server, &scratch, flags);
    proc.wait_log(ready);
    assert!(wait_until(|| server.count("watch") >= 1), "{}", proc.log());
    // Worker 0 starts the others once the cache has synced.
    proc.wait_log("cache synced");
    let workers = |t: &Vec<String>| {
        t.iter()
            .filter(|n| n.starts_with("autoregister-wo"))
            .count()
    };
    let want: usize = flags
        .iter()
        .position(|f| *f == "--workers")
        .and_then(|i| flags.get(i + 1))
        .map_or(2, |w| w.parse().unwrap());
    assert!(
        wait_until(|| workers(&threads(proc.pid())) == want),
        "{:?}",
        threads(proc.pid())
    );
    let names = threads(proc.pid());
    let (code, log) = proc.terminate();
    assert_eq!(code, 0, "{log}");
    names
}

#[test]
fn every_flag_on_stays_within_workers_plus_six() {
    let names = idle_threads(
        &[
            "--workers",
            "3",
            "--health-addr",
            "127.0.0.1:0",
            "--leader-elect",
            "--resync",
            "1h",
            "--withdraw-unavailable",
            "1m",
            "--events",
            "--ca-expiry-warning",
            "1h",
            "--log-format",
            "json",
        ],
        "leading as",
    );
    assert!(names.len() <= 3 + 6, "{} threads: {names:?}", names.len());
    assert_eq!(
        names,
        [
            "autoregister", // main: manifests, signals' answer, exit
            "autoregister-ti",
            "autoregister-wo",
            "autoregister-wo",
            "autoregister-wo",
            "leader-election",
            "ops-accept",
            "reflector-apise",
            "signals",
        ]
    );
}

#[test]
fn default_flags_take_four_beside_the_workers() {
    let names = idle_threads(&[], "started:");
    assert_eq!(
        names,
        [
            "autoregister",
            "autoregister-ti",
            "autoregister-wo",
            "autoregister-wo",
            "reflector-apise",
            "signals",
        ]
    );
}
