//! End to end: the real `autoregister` binary against the in-process test API server on loopback.
#![cfg(feature = "testing")]

use std::path::Path;
use std::sync::Arc;
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

/// An admission policy refusing any APIService whose versionPriority is 13, as a
/// ValidatingAdmissionPolicy would: a refusal the manifest checks cannot foresee.
fn refuse_priority_13(server: &TestServer) {
    server.set_admission(Some(Arc::new(|plural: &str, obj: &Value| {
        (plural == "apiservices" && obj["spec"]["versionPriority"] == 13)
            .then(|| "versionPriority 13 is reserved".to_string())
    })));
}

/// Events in `default` about `name` with `reason`.
fn events(server: &TestServer, name: &str, reason: &str) -> Vec<Value> {
    server
        .list_objects("events", Some("default"))
        .into_iter()
        .filter(|e| e["regarding"]["name"] == name && e["reason"] == reason)
        .collect()
}

#[test]
fn once_leaves_its_events_behind_but_does_not_wait_for_those_the_event_rate_holds_back() {
    let registered = |server: &TestServer, n: usize| {
        (0..n)
            .filter(|i| !events(server, &format!("v1.g{i}.example.com"), "Registered").is_empty())
            .count()
    };
    let run = |n: usize| {
        let server = TestServer::start();
        let s = Scratch::new("once-events");
        let docs: Vec<String> = (0..n)
            .map(|i| manifest(&format!("g{i}.example.com"), None, 10))
            .collect();
        s.write("all.yaml", &docs.join("---\n"));
        let p = Proc::run_env(
            &server,
            &s,
            &["--once", "--timeout", "60s"],
            &[("RUST_LOG", "debug")],
        );
        let (code, log) = p.wait_exit(WAIT);
        assert_eq!(code, 0, "{log}");
        (server, log)
    };
    // A few: the run waits until each has its Event.
    let (server, log) = run(3);
    assert_eq!(registered(&server, 3), 3, "{log}");
    assert!(!log.contains("not written"), "{log}");
    // 100 at 5 Events/s after a burst of 25 would take 15 s: the run writes what the rate
    // allows while converging and leaves without waiting out the rest.
    let (server, log) = run(100);
    let written = registered(&server, 100);
    assert!((25..100).contains(&written), "{written} written\n{log}");
    assert!(log.contains("not waiting for the queued Events"), "{log}");
    let left = format!("{} Events not written: stopped first", 100 - written);
    assert!(log.contains(&left), "log says {left:?}:\n{log}");
}

#[test]
fn a_spec_the_server_refuses_is_sent_once_reported_and_the_others_still_converge() {
    let server = TestServer::start();
    refuse_priority_13(&server);
    let s = Scratch::new("invalid");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    s.write("bad.yaml", &manifest("bad.example.com", None, 13));
    let started = Instant::now();
    let (code, log) = Proc::run(&server, &s, &["--once", "--timeout", "60s"]).wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    // Waiting would not help: --once ends as soon as only the refused name is left.
    assert!(started.elapsed() < Duration::from_secs(20), "{log}");
    assert!(stored(&server, "v1.a.example.com").is_some(), "{log}");
    assert!(stored(&server, "v1.bad.example.com").is_none());
    // Sent once, refused once, said once (the warning) and in the summary.
    assert_eq!(
        writes(&server, "v1.bad.example.com"),
        ["create 422"],
        "{log}"
    );
    let warned = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("versionPriority 13 is reserved"))
        .count();
    assert_eq!(warned, 1, "{log}");
    assert!(
        log.lines().any(|l| l.contains("ERROR")
            && l.contains("v1.bad.example.com: create: ")
            && l.contains("versionPriority 13 is reserved")),
        "{log}"
    );
    assert_eq!(
        events(&server, "v1.bad.example.com", "Rejected").len(),
        1,
        "{log}"
    );
    // Every write asked for strict field validation.
    assert!(server
        .requests()
        .iter()
        .filter(|r| binary::is_write(r))
        .all(|r| r.query.contains("fieldValidation=Strict")));
}

#[test]
fn a_refused_spec_is_not_retried_until_its_manifest_changes() {
    let server = TestServer::start();
    server.seed(
        "apiservices",
        None,
        object("a.example.com", Some("true"), 5),
    );
    refuse_priority_13(&server);
    let s = Scratch::new("refused-retry");
    s.write("a.yaml", &manifest("a.example.com", None, 13));
    // A resync every second delivers the name again and again.
    let p = Proc::run(&server, &s, &["--workers", "1", "--resync", "1s"]);
    p.wait_log("refused by the server");
    let quiet_until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < quiet_until {
        assert_eq!(
            writes(&server, "v1.a.example.com"),
            ["patch 422"],
            "resent without a change:\n{}",
            p.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    s.write("a.yaml", &manifest("a.example.com", None, 14));
    assert!(
        wait_until(|| priority(&server, "v1.a.example.com") == Some(14)),
        "{}",
        p.log()
    );
    // The changed spec is sent once and accepted. A resync that delivers the name between
    // that answer and its watch event finds the cache still at the version the apply was
    // decided on, and waits for the event instead of applying again.
    let w = writes(&server, "v1.a.example.com");
    assert_eq!(w, ["patch 422", "patch 200"], "{}", p.log());
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        log.matches("refused by the server, not retried").count(),
        1,
        "{log}"
    );
}

#[test]
fn an_update_the_server_refuses_is_retried_when_the_object_changes() {
    let server = TestServer::start();
    server.seed(
        "apiservices",
        None,
        object("a.example.com", Some("true"), 5),
    );
    refuse_priority_13(&server);
    let s = Scratch::new("refused-update");
    s.write("a.yaml", &manifest("a.example.com", None, 13));
    let p = Proc::run(&server, &s, &["--workers", "1"]);
    assert!(
        wait_until(|| writes(&server, "v1.a.example.com") == ["patch 422"]),
        "{}",
        p.log()
    );
    // Someone else edits the object: a new version, so the write is tried once more.
    edit_priority(&server, "v1.a.example.com", 6);
    assert!(
        wait_until(
            || writes(&server, "v1.a.example.com") == ["patch 422", "update 200", "patch 422"]
        ),
        "{:?}\n{}",
        writes(&server, "v1.a.example.com"),
        p.log()
    );
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
}

/// `plan` as a user runs it against `server`, with `extra` flags.
fn plan(server: &TestServer, s: &Scratch, extra: &[&str]) -> (i32, String) {
    Proc::command("plan", server, s, extra).wait_exit_stdout_first(WAIT)
}

/// The line of `out` starting with `name` and a blank, and the indented lines under it.
fn plan_entry(out: &str, name: &str) -> Vec<String> {
    let mut lines = out
        .lines()
        .skip_while(|l| !l.starts_with(&format!("{name} ")));
    let Some(first) = lines.next() else {
        panic!("no line for {name}:\n{out}")
    };
    std::iter::once(first.to_string())
        .chain(
            lines
                .take_while(|l| l.starts_with("    "))
                .map(|l| l.trim().to_string()),
        )
        .collect()
}

#[test]
fn plan_lists_what_involves_us_with_the_changes_and_proves_them_by_a_dry_run() {
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
    server.clear_requests();
    let rv = server.resource_version();
    let (code, out) = plan(&server, &s, &[]);
    assert_eq!(code, 0, "{out}");
    let words = |name: &str| -> Vec<String> {
        plan_entry(&out, name)[0]
            .split_whitespace()
            .take(3)
            .map(String::from)
            .collect()
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
    // An update shows each differing field, old -> new; a create its object; a delete why.
    let b = plan_entry(&out, "v1.b.example.com");
    assert_eq!(
        b[1..],
        [
            "spec.versionPriority: 5 → 20",
            "dry run: accepted by the server"
        ],
        "{out}"
    );
    let a = plan_entry(&out, "v1.a.example.com");
    assert!(
        a.contains(&"spec.group: a.example.com".to_string()),
        "{out}"
    );
    assert!(a.contains(&"spec.versionPriority: 10".to_string()), "{out}");
    assert!(
        a.contains(&format!("metadata.labels[\"{LABEL}\"]: true")),
        "{out}"
    );
    let stale = plan_entry(&out, "v1.stale.example.com");
    assert!(
        stale.contains(&format!("why: ours ({LABEL}=true) and in no manifest")),
        "{out}"
    );
    // Not ours and not desired: one line for all of them.
    assert!(
        !out.lines().any(|l| l.starts_with("v1.mine.example.com")),
        "{out}"
    );
    assert!(
        out.contains("1 APIServices not ours, left alone; --all lists them"),
        "{out}"
    );
    assert!(
        out.contains(
            "dry run (--dry-run=server): 3 writes sent with dryRun=All, 3 accepted, 0 refused"
        ),
        "{out}"
    );
    assert!(
        out.contains("plan: 1 create, 1 delete, 1 none, 1 update"),
        "{out}"
    );
    // The writes were dry runs, which store nothing: no new version, nothing changed.
    let sent: Vec<_> = server
        .requests()
        .into_iter()
        .filter(binary::is_write)
        .collect();
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(sent.iter().all(binary::is_dry_run), "{sent:?}");
    assert_eq!(server.resource_version(), rv);
    assert!(stored(&server, "v1.a.example.com").is_none());
    assert_eq!(priority(&server, "v1.b.example.com"), Some(5));
    assert!(stored(&server, "v1.stale.example.com").is_some());

    let (code, out) = plan(&server, &s, &["--all"]);
    assert_eq!(code, 0, "{out}");
    let mine = &plan_entry(&out, "v1.mine.example.com")[0];
    assert!(
        mine.contains("3A") && mine.contains("none") && mine.contains("not ours"),
        "{out}"
    );
    assert!(!out.contains("--all lists them"), "{out}");

    server.clear_requests();
    let (code, out) = plan(&server, &s, &["--dry-run=none"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("dry run: none (--dry-run=none)"), "{out}");
    assert!(!out.contains("accepted by the server"), "{out}");
    assert!(
        !server.requests().iter().any(binary::is_write),
        "plan wrote"
    );
}

#[test]
fn plan_json_is_one_document_with_the_same_plan() {
    let server = TestServer::start();
    server.seed(
        "apiservices",
        None,
        object("b.example.com", Some("true"), 15),
    );
    server.seed("apiservices", None, object("mine.example.com", None, 5));
    let s = Scratch::new("plan-json");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    s.write("b.yaml", &manifest("b.example.com", None, 77));
    // stdout alone (the harness merges it with the log on stderr).
    let kc = s.kubeconfig(&server);
    let out = std::process::Command::new(binary::exe())
        .args(["plan", "-o", "json", "--manifests"])
        .arg(s.manifests())
        .arg("--kubeconfig")
        .arg(&kc)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["dryRun"], "server");
    assert_eq!(doc["notOursHidden"], 1);
    assert_eq!(doc["refused"], 0);
    assert_eq!(
        doc["summary"],
        serde_json::json!({"create": 1, "none": 1, "update": 1})
    );
    let items = doc["items"].as_array().unwrap();
    let names: Vec<&str> = items.iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["v1.a.example.com", "v1.b.example.com"]);
    let (a, b) = (&items[0], &items[1]);
    assert_eq!(
        (a["cell"].as_str(), a["action"].as_str()),
        (Some("2C"), Some("create"))
    );
    assert_eq!(a["object"]["spec"]["versionPriority"], 10);
    assert_eq!(a["object"]["metadata"]["labels"][LABEL], "true");
    assert_eq!(a["dryRun"]["result"], "accepted");
    assert_eq!(
        (b["cell"].as_str(), b["action"].as_str()),
        (Some("6C"), Some("update"))
    );
    assert_eq!(
        b["changes"],
        serde_json::json!([{"field": "spec.versionPriority", "old": 15, "new": 77}])
    );
    assert_eq!(b["dryRun"]["result"], "accepted");
}

#[test]
fn plan_reports_what_the_server_refuses_in_the_dry_run() {
    let server = TestServer::start();
    refuse_priority_13(&server);
    server.seed(
        "apiservices",
        None,
        object("b.example.com", Some("true"), 5),
    );
    let s = Scratch::new("plan-refused");
    s.write("a.yaml", &manifest("a.example.com", None, 13));
    s.write("b.yaml", &manifest("b.example.com", None, 13));
    s.write("c.yaml", &manifest("c.example.com", None, 10));
    let (code, out) = plan(&server, &s, &[]);
    assert_eq!(code, 1, "a refused write fails the plan:\n{out}");
    for name in ["v1.a.example.com", "v1.b.example.com"] {
        let e = plan_entry(&out, name);
        assert!(
            e.iter()
                .any(|l| l.starts_with("dry run: REFUSED by the server: ")
                    && l.contains("versionPriority 13 is reserved")),
            "{out}"
        );
    }
    assert!(plan_entry(&out, "v1.c.example.com")
        .contains(&"dry run: accepted by the server".to_string()));
    assert!(
        out.contains("3 writes sent with dryRun=All, 1 accepted, 2 refused"),
        "{out}"
    );
    assert!(
        out.contains("the server refused 2 of the planned writes"),
        "{out}"
    );
    assert!(stored(&server, "v1.a.example.com").is_none());
    assert!(stored(&server, "v1.c.example.com").is_none());
    assert_eq!(priority(&server, "v1.b.example.com"), Some(5));
}

#[test]
fn plan_and_run_agree_on_the_once_rule_for_onstart_objects() {
    let server = TestServer::start();
    server.seed(
        "apiservices",
        None,
        object("a.example.com", Some("onstart"), 5),
    );
    let s = Scratch::new("plan-once");
    s.write("a.yaml", &manifest("a.example.com", Some("onstart"), 20));
    let (code, out) = plan(&server, &s, &[]);
    assert_eq!(code, 0, "{out}");
    let a = plan_entry(&out, "v1.a.example.com");
    assert!(a[0].contains("5B") && a[0].contains("update"), "{out}");
    assert!(
        a.iter().any(|l| l.starts_with(
            "onstart: run writes this once, at its start; a running instance that has already \
             synced this name leaves later changes alone until it restarts"
        )),
        "{out}"
    );
    // run does what plan said at its start, then leaves a later manifest change, saying why once.
    let p = Proc::run(&server, &s, &["--workers", "1", "--resync", "1s"]);
    assert!(
        wait_until(|| priority(&server, "v1.a.example.com") == Some(20)),
        "{}",
        p.log()
    );
    s.write("a.yaml", &manifest("a.example.com", Some("onstart"), 30));
    p.wait_log("its manifest changed after this process synced it");
    // Resyncs every second decide again meanwhile; the explanation is not repeated.
    let resynced = Instant::now() + Duration::from_secs(2);
    while Instant::now() < resynced {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(priority(&server, "v1.a.example.com"), Some(20));
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    let explained: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("its manifest changed after this process synced it"))
        .collect();
    assert_eq!(explained.len(), 1, "{log}");
    assert!(
        explained[0].contains("INFO")
            && explained[0].contains("label it \"true\" to sync it continuously"),
        "{log}"
    );
}

#[test]
fn an_unreachable_or_refusing_server_is_one_message_with_its_count() {
    let s = Scratch::new("one-cause");
    for g in ["a", "b", "c", "d", "e", "f"] {
        s.write(
            &format!("{g}.yaml"),
            &manifest(&format!("{g}.example.com"), None, 10),
        );
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let m = s.manifests();
    let m = m.to_str().unwrap();
    let (code, out) = Proc::spawn(&["plan", "--manifests", m, "--server", &url]).wait_exit(WAIT);
    assert_eq!(code, 1, "{out}");
    assert_eq!(out.matches("cannot list APIServices").count(), 1, "{out}");
    assert!(
        out.contains("no plan for the 6 desired APIServices"),
        "{out}"
    );
    let (code, log) = Proc::spawn(&[
        "run",
        "--manifests",
        m,
        "--server",
        &url,
        "--once",
        "--timeout",
        "2s",
    ])
    .wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    let causes: Vec<&str> = log.lines().filter(|l| l.contains("never synced")).collect();
    assert_eq!(causes.len(), 1, "{log}");
    assert!(
        causes[0].contains("6 APIServices: the APIService cache never synced"),
        "{log}"
    );
    assert!(
        !log.lines().any(|l| l.contains("ERROR   v1.")),
        "no line per name:\n{log}"
    );
    // Before the summary, the refused connection is one WARN line (the cause), not one
    // from the reachability gate and another from the list that found it.
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("refused"))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(
        warnings[0].contains("the API server cannot be reached"),
        "{log}"
    );

    // 401 on the list: the same, once, and the token never shown.
    let server = TestServer::builder()
        .tls(true)
        .token("secret-token")
        .start()
        .unwrap();
    let kc = s.path("kubeconfig-no-token");
    std::fs::write(&kc, server.kubeconfig_with_token(Some("wrong-token"))).unwrap();
    let kc = kc.to_str().unwrap();
    let (code, out) = Proc::spawn(&["plan", "--manifests", m, "--kubeconfig", kc]).wait_exit(WAIT);
    assert_eq!(code, 1, "{out}");
    assert_eq!(out.matches("cannot list APIServices").count(), 1, "{out}");
    assert!(
        out.contains("no plan for the 6 desired APIServices"),
        "{out}"
    );
    assert!(!out.contains("wrong-token"), "{out}");
    let (code, log) = Proc::spawn(&[
        "run",
        "--manifests",
        m,
        "--kubeconfig",
        kc,
        "--once",
        "--timeout",
        "2s",
    ])
    .wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    let causes: Vec<&str> = log.lines().filter(|l| l.contains("never synced")).collect();
    assert_eq!(causes.len(), 1, "{log}");
    assert!(causes[0].contains("6 APIServices: "), "{log}");
}

/// A PEM CA certificate, base64-encoded as a manifest's caBundle carries it.
fn ca_bundle() -> String {
    use base64::Engine as _;
    let ca = rcgen::generate_simple_self_signed(vec!["ca.example.com".to_string()]).unwrap();
    base64::engine::general_purpose::STANDARD.encode(ca.cert.pem())
}

#[test]
fn typos_wrong_types_and_every_server_rule_fail_plan_and_once_with_exit_2_at_their_line() {
    // Lines of binary::manifest: 4 name, 6 group, 7 version, 8 groupPriorityMinimum,
    // 9 versionPriority, 10 service, 11 namespace, 12 name, 13 port, 14 insecureSkipTLSVerify.
    let base = manifest("a.example.com", None, 10);
    let local = base
        .replace(
            "  service:\n    namespace: ns\n    name: svc\n    port: 443\n",
            "",
        )
        .replace("  insecureSkipTLSVerify: true\n", "");
    let secure = base.replace("  insecureSkipTLSVerify: true\n", "");
    let ca = ca_bundle();
    let with_group = |version: &str, group: &str| {
        base.replace(
            "name: v1.a.example.com",
            &format!("name: {version}.{group}"),
        )
        .replace("group: a.example.com", &format!("group: \"{group}\""))
        .replace("version: v1\n", &format!("version: \"{version}\"\n"))
    };
    #[rustfmt::skip]
    let cases: Vec<(&str, String, &str)> = vec![
        // Strict decoding: unknown fields everywhere, with a suggestion when one is close.
        ("typo in spec", base.replace("  service:", "  servce:"), ":10:3: document 1: spec.servce: unknown field, did you mean spec.service?"),
        ("typo of a priority", base.replace("  versionPriority:", "  versionPriorty:"), ":9:3: document 1: spec.versionPriorty: unknown field, did you mean spec.versionPriority?"),
        ("typo in metadata", base.replace("  name: v1.a.example.com\n", "  name: v1.a.example.com\n  lables:\n    a: b\n"), ":5:3: document 1: metadata.lables: unknown field, did you mean metadata.labels?"),
        ("typo in service", base.replace("    port:", "    prot:"), ":13:5: document 1: spec.service.prot: unknown field, did you mean spec.service.port?"),
        ("typo at the top", format!("{base}stauts: {{}}\n"), ":15:1: document 1: stauts: unknown field, did you mean status?"),
        ("unknown field", base.replace("  group:", "  colour: red\n  group:"), ":6:3: document 1: spec.colour: unknown field\n"),
        // Wrong types, in Kubernetes terms, at the field's own line.
        ("string for integer", base.replace("groupPriorityMinimum: 100", "groupPriorityMinimum: high"), ":8:25: document 1: spec.groupPriorityMinimum: invalid type: expected integer, found string \"high\""),
        ("string for boolean", base.replace("insecureSkipTLSVerify: true", "insecureSkipTLSVerify: yes please"), ":14:26: document 1: spec.insecureSkipTLSVerify: invalid type: expected boolean, found string \"yes please\""),
        ("string for object", base.replace("  service:\n    namespace: ns\n    name: svc\n    port: 443\n", "  service: svc\n"), ":10:12: document 1: spec.service: invalid type: expected object, found string \"svc\""),
        ("list for string", base.replace("group: a.example.com", "group: [a]"), ":6:10: document 1: spec.group: invalid type: expected string, found array"),
        // kube-apiserver's ValidateAPIService, rule by rule.
        ("name not version.group", base.replace("name: v1.a.example.com", "name: x"), ":4:9: document 1: metadata.name: Invalid value: \"x\": must be `spec.version+\".\"+spec.group`: \"v1.a.example.com\""),
        ("name not a path segment", base.replace("name: v1.a.example.com", "name: v1/a"), "metadata.name: Invalid value: \"v1/a\": may not contain '/'"),
        ("group syntax", with_group("v1", "A_b.example.com"), "spec.group: Invalid value: \"A_b.example.com\": a lowercase RFC 1123 subdomain"),
        ("empty group not v1", with_group("v2", ""), "spec.group: Required value: only v1 may have an empty group and it better be legacy kube"),
        ("version syntax", with_group("1v", "a.example.com"), "spec.version: Invalid value: \"1v\": a DNS-1035 label"),
        ("groupPriorityMinimum 0", base.replace("groupPriorityMinimum: 100", "groupPriorityMinimum: 0"), ":8:25: document 1: spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000"),
        ("groupPriorityMinimum 20001", base.replace("groupPriorityMinimum: 100", "groupPriorityMinimum: 20001"), "spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000"),
        ("versionPriority 0", base.replace("versionPriority: 10", "versionPriority: 0"), ":9:20: document 1: spec.versionPriority: Invalid value: 0: must be positive and less than 1000"),
        ("versionPriority 1001", base.replace("versionPriority: 10", "versionPriority: 1001"), "spec.versionPriority: Invalid value: 1001: must be positive and less than 1000"),
        ("service namespace missing", base.replace("    namespace: ns\n", ""), "spec.service.namespace: Required value"),
        ("service name missing", base.replace("    name: svc\n", ""), "spec.service.name: Required value"),
        ("port 0", base.replace("port: 443", "port: 0"), ":13:11: document 1: spec.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive"),
        ("port 70000", base.replace("port: 443", "port: 70000"), "spec.service.port: Invalid value: 70000: port is not valid"),
        ("insecure with caBundle", format!("{base}  caBundle: {ca}\n"), "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present"),
        ("local with caBundle", format!("{local}  caBundle: {ca}\n"), "spec.caBundle: Invalid value: \""),
        ("local with insecureSkipTLSVerify", format!("{local}  insecureSkipTLSVerify: true\n"), "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify"),
        ("labels", base.replace("  name: v1.a.example.com\n", "  name: v1.a.example.com\n  labels:\n    team: \"-x\"\n"), "metadata.labels: Invalid value: \"-x\""),
        // What the server would store but a controller should not send.
        ("caBundle not PEM", format!("{secure}  caBundle: QUFBQQ==\n"), "spec.caBundle: Invalid value: \"4 bytes\": must be PEM certificates"),
        ("service name syntax", base.replace("name: svc", "name: Svc_1"), "spec.service.name: Invalid value: \"Svc_1\": a DNS-1035 label"),
        ("service namespace syntax", base.replace("namespace: ns", "namespace: NS"), "spec.service.namespace: Invalid value: \"NS\": a lowercase RFC 1123 label"),
    ];
    for (case, text, want) in &cases {
        let s = Scratch::new(&format!("strict-{}", case.replace(' ', "-")));
        s.write("a.yaml", text);
        let m = s.manifests();
        // Nothing listens on port 9: a manifest error ends plan before it connects.
        let (code, out) = Proc::spawn(&[
            "plan",
            "--manifests",
            m.to_str().unwrap(),
            "--server",
            "http://127.0.0.1:9",
        ])
        .wait_exit(WAIT);
        assert_eq!(code, 2, "{case}:\n{out}");
        let file = m.join("a.yaml");
        let prefix = format!("{}:", file.display());
        let line = out
            .lines()
            .find(|l| l.contains(want.trim_end()))
            .unwrap_or_else(|| panic!("{case}: no line with {want:?}:\n{out}"));
        assert!(line.contains(&prefix), "{case}: names the file:\n{out}");
        if want.ends_with('\n') {
            assert!(
                line.ends_with(want.trim_end()),
                "{case}: no suggestion expected:\n{out}"
            );
        }
    }
    // The same for run --once, and the good version of the file converges.
    let server = TestServer::start();
    let s = Scratch::new("strict-once");
    s.write("a.yaml", &base.replace("  service:", "  servce:"));
    let (code, log) = Proc::run(&server, &s, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 2, "{log}");
    assert!(
        log.contains("spec.servce: unknown field, did you mean spec.service?"),
        "{log}"
    );
    assert!(
        server.requests().iter().all(|r| !binary::is_write(r)),
        "{log}"
    );
    s.write("a.yaml", &format!("{secure}  caBundle: {ca}\n"));
    let (code, log) = Proc::run(&server, &s, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 0, "a valid PEM caBundle is accepted:\n{log}");
}

#[test]
fn a_typo_on_reload_keeps_the_last_good_version_registered() {
    let server = TestServer::start();
    let s = Scratch::new("strict-reload");
    s.write("a.yaml", &manifest("a.example.com", None, 10));
    let p = Proc::run(&server, &s, &[]);
    assert!(wait_until(
        || priority(&server, "v1.a.example.com") == Some(10)
    ));
    s.write(
        "a.yaml",
        &manifest("a.example.com", None, 20).replace("  versionPriority:", "  versionPriorty:"),
    );
    p.wait_log("spec.versionPriorty: unknown field, did you mean spec.versionPriority?");
    assert_eq!(priority(&server, "v1.a.example.com"), Some(10));
    s.write("a.yaml", &manifest("a.example.com", None, 20));
    assert!(
        wait_until(|| priority(&server, "v1.a.example.com") == Some(20)),
        "{}",
        p.log()
    );
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    assert!(
        !writes(&server, "v1.a.example.com")
            .iter()
            .any(|w| w.starts_with("delete")),
        "{log}"
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
