//! The log as people and pipelines read it, through the real binary: `--log-format json`
//! lines parsed as JSON with their fields, each fact said once, the Lease named
//! `NAMESPACE/NAME`, and a `RUST_LOG` that does not parse warned about.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;

use autoregister::testserver::TestServer;
use binary::{manifest, Proc, Scratch, WAIT};
use serde_json::Value;

fn once(server: &TestServer, s: &Scratch, extra: &[&str], env: &[(&str, &str)]) -> String {
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let kc = s.kubeconfig(server);
    let m = s.manifests();
    let mut args = vec![
        "run",
        "--manifests",
        m.to_str().unwrap(),
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--once",
    ];
    args.extend(extra);
    let (code, log) = Proc::spawn_env(&args, env).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    log
}

#[test]
fn json_lines_parse_and_carry_name_cell_and_action() {
    let server = TestServer::start();
    let s = Scratch::new("logs-json");
    let log = once(
        &server,
        &s,
        &["--log-format", "json", "--leader-elect"],
        &[],
    );
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines.len() >= 4, "{log}");
    for l in &lines {
        for key in ["time", "level", "target", "message"] {
            assert!(l[key].is_string(), "{key} missing: {l}");
        }
    }
    let create = lines
        .iter()
        .find(|l| l["action"] == "create")
        .unwrap_or_else(|| panic!("no create line: {log}"));
    assert_eq!(create["name"], "v1.a.example.com");
    assert_eq!(create["cell"], "2C");
    assert_eq!(create["level"], "INFO");
    assert_eq!(create["target"], "autoregister::controller::sync");
    // Each fact once: the cell's meaning, not the rule repeating it.
    assert_eq!(
        create["message"],
        "v1.a.example.com 2C create (absent, desired always): ok"
    );
    let raw = log
        .lines()
        .find(|l| l.contains("\"action\":\"create\""))
        .unwrap_or_default();
    // As written: time, level, target, message first, then the fields.
    assert!(raw.starts_with("{\"time\":"), "{raw}");
    eprintln!("a JSON log line: {raw}");
}

#[test]
fn each_fact_is_logged_once_and_the_lease_is_namespace_slash_name() {
    let server = TestServer::start();
    let s = Scratch::new("logs-once");
    let log = once(&server, &s, &["--leader-elect"], &[]);
    let count = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
    // The Events client keeps its rate-limit choice to itself.
    assert_eq!(count("client-side rate limit"), 1, "{log}");
    // A new leader says so once, and never calls itself "held by".
    assert_eq!(count("leading as "), 1, "{log}");
    let identity = log
        .split("leading as ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap();
    assert_eq!(count(&format!("held by {identity}")), 0, "{log}");
    for l in log.lines().filter(|l| l.contains("lease ")) {
        assert!(l.contains("lease kube-system/autoregister"), "{l}");
    }
    assert!(
        log.contains("converged: 1 APIService\n") || log.ends_with("converged: 1 APIService"),
        "{log}"
    );
}

#[test]
fn a_rust_log_that_names_nothing_is_warned_about() {
    let server = TestServer::start();
    let s = Scratch::new("logs-rust-log");
    let log = once(&server, &s, &[], &[("RUST_LOG", "verbose")]);
    assert_eq!(log.lines().count(), 1, "only the warning: {log}");
    assert!(
        log.contains("WARN") && log.contains("RUST_LOG=\"verbose\": verbose is no level"),
        "{log}"
    );
}

/// The case `autoregister_unowned_desired_apiservices` counts (the README says to alert on
/// it): a desired name held by an unlabelled object whose spec already matches. Nothing is
/// written, and it is said once at WARN and as a `NotOwned` Warning Event on the object.
#[test]
fn an_unowned_desired_object_that_already_matches_gets_a_warning_and_an_event() {
    let server = TestServer::start();
    server.seed(
        "apiservices",
        None,
        binary::object("a.example.com", &[], 10),
    );
    let s = Scratch::new("logs-unowned");
    let log = once(&server, &s, &[], &[]);
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("v1.a.example.com 3C: not managed"))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(
        warnings[0].contains("held by an object without ownership label")
            && warnings[0].contains("--adopt would take it over"),
        "{log}"
    );
    assert!(
        binary::writes(&server, "v1.a.example.com").is_empty(),
        "{log}"
    );
    let events: Vec<Value> = server
        .list_objects("events", Some("default"))
        .into_iter()
        .filter(|e| e["regarding"]["name"] == "v1.a.example.com")
        .collect();
    assert_eq!(events.len(), 1, "{events:#?}\n{log}");
    assert_eq!(events[0]["reason"], "NotOwned");
    assert_eq!(events[0]["type"], "Warning");
    assert!(
        events[0]["note"]
            .as_str()
            .is_some_and(|n| n.contains("its spec already matches")),
        "{events:#?}"
    );
}
