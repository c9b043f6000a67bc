//! The client-side rate limit through the real binary: off against a server that does API
//! Priority and Fairness, 50/100 against one that does not, and explicit flags always win.
#![cfg(feature = "testing")]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, SystemTime};

use autoregister::testserver::TestServer;

/// A manifest file of `n` APIServices in a fresh directory (removed on drop).
struct Manifests(PathBuf);

impl Manifests {
    fn new(tag: &str, n: usize) -> Manifests {
        let dir = std::env::temp_dir().join(format!(
            "autoregister-ratelimit-{}-{tag}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = String::new();
        for i in 0..n {
            text.push_str(&format!(
                "---\napiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.g{i}.rl.example.com\n\
                 spec:\n  group: g{i}.rl.example.com\n  version: v1\n  groupPriorityMinimum: 100\n  versionPriority: 10\n  \
                 service: {{namespace: rl, name: api, port: 443}}\n"
            ));
        }
        std::fs::write(dir.join("apiservices.yaml"), text).unwrap();
        Manifests(dir)
    }
}

impl Drop for Manifests {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `run --once` with `extra` flags; returns the exit code and stderr.
fn run_once(server: &TestServer, manifests: &Manifests, extra: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_autoregister"))
        .args(["run", "--once", "--timeout", "60s", "--manifests"])
        .arg(&manifests.0)
        .args(["--server", server.url()])
        .args(extra)
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Time from the first to the last create the server answered.
fn create_span(server: &TestServer) -> Duration {
    let times: Vec<SystemTime> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create")
        .map(|r| r.time)
        .collect();
    let first = times.iter().min().unwrap();
    let last = times.iter().max().unwrap();
    last.duration_since(*first).unwrap_or_default()
}

fn choices(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("client-side rate limit"))
        .collect()
}

#[test]
fn default_limit_is_off_when_the_server_does_flow_control() {
    let server = TestServer::start();
    let m = Manifests::new("apf", 150);
    let (code, log) = run_once(&server, &m, &[]);
    assert_eq!(code, 0, "{log}");
    assert_eq!(server.count("create"), 150);
    let lines = choices(&log);
    assert_eq!(lines.len(), 1, "the choice is logged once:\n{log}");
    assert!(
        lines[0].contains("off (the server does API Priority and Fairness)"),
        "{log}"
    );
}

#[test]
fn default_limit_is_50_qps_burst_100_without_flow_control_headers() {
    let server = TestServer::builder().flow_control(false).start().unwrap();
    let m = Manifests::new("noapf", 160);
    let (code, log) = run_once(&server, &m, &[]);
    assert_eq!(code, 0, "{log}");
    let lines = choices(&log);
    assert_eq!(lines.len(), 1, "the choice is logged once:\n{log}");
    assert!(lines[0].contains("50 QPS, burst 100"), "{log}");
    // 160 creates plus a list: 61 requests beyond the burst of 100 wait 1/50 s each, so the
    // creates cannot span less than ~1.2 s (minus what the bucket refilled before the first).
    let span = create_span(&server);
    assert!(span >= Duration::from_millis(900), "creates took {span:?}");
}

#[test]
fn explicit_qps_wins_over_flow_control() {
    let server = TestServer::start();
    let m = Manifests::new("explicit", 30);
    let (code, log) = run_once(&server, &m, &["--qps", "40", "--burst", "1"]);
    assert_eq!(code, 0, "{log}");
    let lines = choices(&log);
    assert_eq!(lines.len(), 1, "the choice is logged once:\n{log}");
    assert!(
        lines[0].contains("40 QPS, burst 1 (set explicitly)"),
        "{log}"
    );
    // 30 creates after a list at 40/s with no burst: at least 29/40 s between first and last.
    let span = create_span(&server);
    assert!(span >= Duration::from_millis(600), "creates took {span:?}");
}

#[test]
fn testserver_process_with_no_flow_control_flag_keeps_the_default_limit() {
    use std::io::BufRead;
    let mut server = Command::new(env!("CARGO_BIN_EXE_autoregister-testserver"))
        .args(["--addr", "127.0.0.1:0", "--no-flow-control"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let m = Manifests::new("process", 3);
    let out = Command::new(env!("CARGO_BIN_EXE_autoregister"))
        .args(["run", "--once", "--timeout", "30s", "--manifests"])
        .arg(&m.0)
        .args(["--server", url.trim()])
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{log}");
    let lines = choices(&log);
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("50 QPS, burst 100"), "{log}");
}
