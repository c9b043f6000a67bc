//! Through the binary: Events on and off and failing, usage errors, and log lines a
//! person can read (targets at debug, "left alone" explained once).
//!
//! A module of `tests/deploy.rs` so its binary runs share one test process (in parallel).

use std::process::Command;

use autoregister::api::DEFAULT_LABEL_KEY;
use autoregister::testserver::TestServer;
use serde_json::{json, Value};

use super::binary::{self, http_get, wait_until, Proc, Scratch, WAIT};
use super::promtext;

/// One APIService manifest; `onstart` adds the (compatibility) onstart label.
fn manifest(group: &str, priority: i64, onstart: bool) -> String {
    let labels = if onstart {
        "  labels:\n    kube-aggregator.kubernetes.io/automanaged: onstart\n"
    } else {
        ""
    };
    format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.{group}\n{labels}spec:\n  \
         group: {group}\n  version: v1\n  groupPriorityMinimum: 100\n  versionPriority: {priority}\n  \
         service:\n    namespace: ns\n    name: svc\n    port: 443\n  insecureSkipTLSVerify: true\n"
    )
}

struct Setup {
    server: TestServer,
    scratch: Scratch,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        let scratch = Scratch::new(tag);
        Setup {
            server: TestServer::start(),
            scratch,
        }
    }

    fn write(&self, file: &str, text: &str) {
        self.scratch.write(file, text);
    }

    fn run(&self, extra: &[&str], rust_log: &str) -> Proc {
        let kc = self.scratch.kubeconfig(&self.server);
        let manifests = self.scratch.manifests();
        let mut args = vec![
            "run",
            "--manifests",
            manifests.to_str().unwrap(),
            "--kubeconfig",
            kc.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        Proc::spawn_env(&args, &[("RUST_LOG", rust_log)])
    }

    /// Event creates the server answered (failed ones included).
    fn event_creates(&self) -> usize {
        self.server
            .requests()
            .iter()
            .filter(|r| r.resource.as_deref() == Some("events") && r.verb == "create")
            .count()
    }

    fn event_requests(&self) -> usize {
        self.server
            .requests()
            .iter()
            .filter(|r| r.resource.as_deref() == Some("events"))
            .count()
    }
}

#[test]
fn once_records_its_events_but_events_false_sends_none() {
    let on = Setup::new("events-on");
    on.write("a.yaml", &manifest("a.example.com", 10, false));
    let (code, log) = on.run(&["--once"], "info").wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    let events = on.server.list_objects("events", Some("default"));
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["reason"], "Registered");
    assert_eq!(events[0]["regarding"]["name"], "v1.a.example.com");

    let off = Setup::new("events-off");
    off.write("a.yaml", &manifest("a.example.com", 10, false));
    let (code, log) = off
        .run(&["--once", "--events=false"], "info")
        .wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    assert!(off
        .server
        .get_object("apiservices", None, "v1.a.example.com")
        .is_some());
    assert_eq!(off.event_requests(), 0);
}

#[test]
fn a_failing_event_write_never_fails_or_holds_up_a_sync() {
    let s = Setup::new("events-fail");
    s.write("a.yaml", &manifest("a.example.com", 10, false));
    let p = s.run(&[], "info");
    assert!(wait_until(|| s
        .server
        .list_objects("events", Some("default"))
        .len()
        == 1));
    // From now on every create fails: only Events are created in the rest of this test.
    s.server.faults().fail_next_verb(Some("create"), 1000, 500);
    s.write("a.yaml", &manifest("a.example.com", 20, false));
    let updated = || {
        s.server
            .get_object("apiservices", None, "v1.a.example.com")
            .and_then(|o| o["spec"]["versionPriority"].as_i64())
            == Some(20)
    };
    assert!(wait_until(updated), "{}", p.log());
    p.wait_log("cannot record Event Updated for v1.a.example.com");
    // Someone else changes the spec: the controller puts it back, and that Event fails too.
    let api = autoregister::client::Api::<autoregister::api::APIService>::all(
        autoregister::client::Client::new(s.server.client_config()).unwrap(),
    );
    let mut obj = api.get("v1.a.example.com").unwrap();
    obj.spec.version_priority = 99;
    api.update(&obj).unwrap();
    assert!(
        wait_until(|| s.event_creates() >= 2 && updated()),
        "{}",
        p.log()
    );
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        log.matches("cannot record Event").count(),
        1,
        "one warning, the rest at debug:\n{log}"
    );
    assert!(
        !log.lines()
            .any(|l| l.contains("v1.a.example.com 6C update") && l.contains("failed")),
        "{log}"
    );
}

#[test]
fn usage_errors_exit_2_and_help_gives_every_flag_with_its_default_or_range() {
    for bad in [
        &["--burst", "0"][..],
        &["--resync", "500ms"],
        &["--health-addr", "8080"],
        &["--health-addr", "localhost"],
        &["--events=maybe"],
        &["--workers", "257"],
    ] {
        let out = Command::new(binary::exe())
            .args(["run", "--manifests", "/nonexistent"])
            .args(bad)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert!(
            err.contains(bad[0].split('=').next().unwrap()),
            "{bad:?}: {err}"
        );
    }
    // `run --help` lists every flag of `run` (`--help` alone lists the commands).
    let out = Command::new(binary::exe())
        .args(["run", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--manifests",
        "--kubeconfig",
        "--context",
        "--server",
        "--qps",
        "--burst",
        "--once",
        "--timeout",
        "--workers",
        "--resync",
        "--relist",
        "--health-addr",
        "--leader-elect",
        "--lease-namespace",
        "--lease-name",
        "--events",
        "--label-key",
        "--adopt",
        "--allow-empty",
        "--leader-elect-lease-duration",
        "--leader-elect-renew-deadline",
        "--leader-elect-retry-period",
    ] {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(flag) && l.contains("  "))
            .unwrap_or_else(|| panic!("--help has no line for {flag}:\n{help}"));
        assert!(
            line.trim().len() > flag.len() + 10,
            "{flag} is not described: {line}"
        );
    }
    for fact in [
        "1..=256 (default 2)",
        "default 60s",
        ">= 1 (default 100)",
        ">= 1s",
        "default true",
    ] {
        assert!(help.contains(fact), "--help lacks {fact:?}:\n{help}");
    }
}

#[test]
fn debug_lines_name_their_target_and_info_lines_do_not() {
    let s = Setup::new("targets");
    s.write("a.yaml", &manifest("a.example.com", 10, false));
    let (code, log) = s
        .run(&["--once", "--events=false"], "debug")
        .wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.lines().any(
            |l| l.contains(" INFO  autoregister::controller::sync: v1.a.example.com 2C create")
        ),
        "{log}"
    );
    // Every line says whose it is, so ours stand apart from rustls/ureq.
    for line in log.lines() {
        let target = line.split_whitespace().nth(2).unwrap_or("");
        assert!(
            target.ends_with(':') && target.len() > 1,
            "no target: {line}"
        );
    }
    let (code, log) = s.run(&["--once", "--events=false"], "info").wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    assert!(!log.contains("autoregister::"), "{log}");
}

#[test]
fn onstart_objects_left_alone_deleted_or_created_after_start_are_explained_once_at_info() {
    let s = Setup::new("left-alone");
    s.write("a.yaml", &manifest("a.example.com", 10, true));
    let p = s.run(&["--events=false", "--health-addr", "127.0.0.1:0"], "info");
    let addr = p.ops_addr();
    let name = "v1.a.example.com";
    assert!(wait_until(|| s
        .server
        .get_object("apiservices", None, name)
        .is_some()));
    let skipped = || {
        let body = http_get(&addr, "/metrics").1;
        promtext::parse(&body)
            .ok()
            .and_then(|m| {
                m.value(
                    "autoregister_syncs_total",
                    &[("cell", "2B"), ("result", "skipped")],
                )
            })
            .unwrap_or(0.0)
    };
    // Twice gone after its first sync: 2B twice, explained once.
    for round in 1..=2 {
        s.server.delete_object("apiservices", None, name);
        assert!(
            wait_until(|| skipped() >= f64::from(round)),
            "round {round}:\n{}",
            p.log()
        );
        // Someone else puts an unlabelled one back (3B, left alone), so it can go again.
        s.server.seed(
            "apiservices",
            None,
            json!({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": name},
                "spec": {"group": "a.example.com", "version": "v1", "groupPriorityMinimum": 100,
                         "versionPriority": 10, "service": {"namespace": "ns", "name": "svc", "port": 443}}
            }),
        );
        let seen = |v: &Value| v["metadata"]["labels"].is_null();
        assert!(wait_until(|| s
            .server
            .get_object("apiservices", None, name)
            .is_some_and(|o| seen(&o))));
    }
    // Someone creates an onstart object of ours after start, not desired (4A), and edits it.
    let late = "v1.late.example.com";
    for priority in [1, 2] {
        s.server.seed(
            "apiservices",
            None,
            json!({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": late, "labels": {DEFAULT_LABEL_KEY: "onstart"}},
                "spec": {"group": "late.example.com", "version": "v1", "groupPriorityMinimum": 100,
                         "versionPriority": priority,
                         "service": {"namespace": "ns", "name": "svc", "port": 443}}
            }),
        );
        assert!(wait_until(|| {
            let body = http_get(&addr, "/metrics").1;
            promtext::parse(&body)
                .ok()
                .and_then(|m| {
                    m.value(
                        "autoregister_syncs_total",
                        &[("cell", "4A"), ("result", "skipped")],
                    )
                })
                .unwrap_or(0.0)
                >= f64::from(priority)
        }));
    }
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    let explained = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(explained(&format!("{name} 2B left alone")), 1, "{log}");
    assert!(log.contains("not recreated until restart"), "{log}");
    assert_eq!(explained(&format!("{late} 4A left alone")), 1, "{log}");
    // The onstart object the controller created itself (4B by the "already synced" rule)
    // is nothing to wonder about.
    assert_eq!(explained("4B left alone"), 0, "{log}");
}

#[test]
fn refusals_and_adoption_are_recorded_as_events() {
    let s = Setup::new("refusals");
    // Someone else's APIService with a desired name and another spec.
    s.server.seed(
        "apiservices",
        None,
        json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1.a.example.com"},
            "spec": {"group": "a.example.com", "version": "v1", "groupPriorityMinimum": 100,
                     "versionPriority": 99, "service": {"namespace": "ns", "name": "svc", "port": 443}}
        }),
    );
    s.write("a.yaml", &manifest("a.example.com", 10, false));
    let by_reason = |reason: &str| -> Vec<Value> {
        s.server
            .list_objects("events", Some("default"))
            .into_iter()
            .filter(|e| e["reason"] == reason && e["regarding"]["name"] == "v1.a.example.com")
            .collect()
    };
    let (code, log) = s
        .run(&["--once", "--timeout", "5s"], "info")
        .wait_exit(WAIT);
    assert_eq!(code, 1, "not ours: not converged\n{log}");
    assert!(wait_until(|| by_reason("NotOwned").len() == 1), "{log}");
    let refused = &by_reason("NotOwned")[0];
    assert_eq!(
        (&refused["type"], &refused["action"]),
        (&json!("Warning"), &json!("Skip"))
    );
    assert!(
        refused["note"].as_str().unwrap().contains("--adopt"),
        "{refused}"
    );

    let (code, log) = s.run(&["--once", "--adopt"], "info").wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    let adopted = by_reason("Adopted");
    assert_eq!(adopted.len(), 1, "{log}");
    let uid = s
        .server
        .get_object("apiservices", None, "v1.a.example.com")
        .unwrap()["metadata"]["uid"]
        .clone();
    assert_eq!(adopted[0]["regarding"]["uid"], uid, "in place: same object");

    // Ours now; an emptied folder deregisters nothing and says so on the APIService.
    let p = s.run(&[], "info");
    p.wait_log("cache synced");
    std::fs::remove_file(s.scratch.manifests().join("a.yaml")).unwrap();
    assert!(
        wait_until(|| by_reason("EmptySetRefused").len() == 1),
        "{}",
        p.log()
    );
    assert!(s
        .server
        .get_object("apiservices", None, "v1.a.example.com")
        .is_some());
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
}
