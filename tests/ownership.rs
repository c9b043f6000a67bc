//! Safe on a shared cluster, through the real binary: our own ownership label, objects of
//! others never written, adoption, no mass deregistration, two instances side by side,
//! field managers and fights.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;

use std::time::{Duration, Instant};

use autoregister::api::{AUTO_MANAGED_LABEL, DEFAULT_LABEL_KEY as KEY};
use autoregister::testserver::TestServer;
use binary::{
    is_dry_run, is_write, manifest, object, stored, uid, wait_until, writes, Proc, Scratch, WAIT,
};

fn label(server: &TestServer, name: &str, key: &str) -> Option<String> {
    stored(server, name).and_then(|o| o["metadata"]["labels"][key].as_str().map(str::to_string))
}

#[test]
fn objects_labelled_by_kube_aggregator_are_never_written_and_ours_carry_our_key_only() {
    let server = TestServer::start();
    // kube-apiserver's: a built-in (onstart) and a CRD group (true); neither is desired.
    server.seed(
        "apiservices",
        None,
        object("apps", &[(AUTO_MANAGED_LABEL, "onstart")], 15),
    );
    server.seed(
        "apiservices",
        None,
        object("crd.example.com", &[(AUTO_MANAGED_LABEL, "true")], 15),
    );
    let s = Scratch::new("kube-aggregator-label");
    // A manifest written for upstream: its label states the mode, it is not copied.
    s.write(
        "a.yaml",
        &manifest("a.example.com", &[(AUTO_MANAGED_LABEL, "onstart")], 10),
    );
    let (code, log) = Proc::run(&server, &s, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    for name in ["v1.apps", "v1.crd.example.com"] {
        assert!(writes(&server, name).is_empty(), "{name}: {log}");
    }
    assert_eq!(
        label(&server, "v1.a.example.com", KEY).as_deref(),
        Some("onstart")
    );
    assert_eq!(
        label(&server, "v1.a.example.com", AUTO_MANAGED_LABEL),
        None,
        "{log}"
    );
}

#[test]
fn every_write_names_our_field_manager() {
    let server = TestServer::start();
    server.seed(
        "apiservices",
        None,
        object("b.example.com", &[(KEY, "true")], 1),
    );
    server.seed(
        "apiservices",
        None,
        object("gone.example.com", &[(KEY, "true")], 1),
    );
    let s = Scratch::new("field-manager");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    s.write("b.yaml", &manifest("b.example.com", &[], 10));
    let (code, log) = Proc::run(&server, &s, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    let writes: Vec<_> = server.requests().into_iter().filter(is_write).collect();
    let verbs: Vec<&str> = writes.iter().map(|r| r.verb.as_str()).collect();
    assert!(
        verbs.contains(&"create") && verbs.contains(&"patch") && verbs.contains(&"delete"),
        "{verbs:?}"
    );
    for r in writes.iter().filter(|r| r.verb != "delete") {
        assert!(
            r.query.contains("fieldManager=autoregister"),
            "{} {}?{}",
            r.verb,
            r.path,
            r.query
        );
    }
}

#[test]
fn adopt_takes_an_unlabelled_object_over_in_place() {
    let server = TestServer::start();
    let mut seeded = object("a.example.com", &[("team", "x")], 99);
    seeded["metadata"]["annotations"] = serde_json::json!({"note": "kept"});
    server.seed("apiservices", None, seeded);
    let before = uid(&server, "v1.a.example.com");
    let s = Scratch::new("adopt");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let (code, log) = Proc::run(&server, &s, &["--once", "--adopt"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    let obj = stored(&server, "v1.a.example.com").unwrap();
    assert_eq!(
        uid(&server, "v1.a.example.com"),
        before,
        "same object, not recreated"
    );
    assert_eq!(obj["spec"]["versionPriority"], 10);
    assert_eq!(obj["metadata"]["labels"][KEY], "true");
    assert_eq!(obj["metadata"]["labels"]["team"], "x");
    assert_eq!(obj["metadata"]["annotations"]["note"], "kept");
    assert_eq!(writes(&server, "v1.a.example.com"), ["patch 200"], "{log}");
    assert!(log.contains("3C adopt"), "{log}");
}

#[test]
fn adopt_never_takes_kube_apiservers_or_another_controllers_object() {
    let server = TestServer::start();
    server.seed(
        "apiservices",
        None,
        object("apps", &[(AUTO_MANAGED_LABEL, "onstart")], 15),
    );
    server.seed(
        "apiservices",
        None,
        object(
            "b.example.com",
            &[("team-b.example.com/automanaged", "true")],
            15,
        ),
    );
    let s = Scratch::new("adopt-refused");
    s.write("a.yaml", &manifest("apps", &[], 10));
    s.write("b.yaml", &manifest("b.example.com", &[], 10));
    let (code, log) = Proc::run(&server, &s, &["--once", "--adopt"]).wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("v1.apps: held by kube-apiserver"), "{log}");
    assert!(log.contains("v1.b.example.com: held by another controller (label team-b.example.com/automanaged=true)"), "{log}");
    assert!(
        writes(&server, "v1.apps").is_empty() && writes(&server, "v1.b.example.com").is_empty()
    );
}

#[test]
fn plan_names_the_owner_and_what_adopt_would_do_and_writes_nothing() {
    let server = TestServer::start();
    server.seed(
        "apiservices",
        None,
        object("apps", &[(AUTO_MANAGED_LABEL, "onstart")], 15),
    );
    server.seed("apiservices", None, object("a.example.com", &[], 99));
    let apps_uid = uid(&server, "v1.apps");
    let s = Scratch::new("plan-owner");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let (code, out) = Proc::command("plan", &server, &s, &["--all"]).wait_exit_stdout_first(WAIT);
    assert_eq!(code, 0, "{out}");
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default()
            .to_string()
    };
    let apps = line("v1.apps ");
    assert!(
        apps.contains("3A") && apps.contains("none") && apps.contains("not ours"),
        "{out}"
    );
    let a = line("v1.a.example.com ");
    assert!(
        a.contains("3C")
            && a.contains("blocked")
            && a.contains("without ownership label")
            && a.contains("--adopt would take it over"),
        "{out}"
    );
    let (code, out) = Proc::command("plan", &server, &s, &["--adopt"]).wait_exit_stdout_first(WAIT);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("v1.a.example.com ") && l.contains("adopt")),
        "{out}"
    );
    // With kube-apiserver's own key the built-in would be ours to delete: plan warns.
    let (code, out) = Proc::command("plan", &server, &s, &["--label-key", AUTO_MANAGED_LABEL])
        .wait_exit_stdout_first(WAIT);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("warning: --label-key kube-aggregator.kubernetes.io/automanaged is kube-apiserver's own label"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("v1.apps ") && l.contains("5A") && l.contains("delete")),
        "{out}"
    );
    // Its writes were dry runs only: nothing stored.
    assert!(
        server
            .requests()
            .iter()
            .all(|r| !is_write(r) || is_dry_run(r)),
        "plan wrote"
    );
    assert_eq!(uid(&server, "v1.apps"), apps_uid);
}

#[test]
fn an_emptied_or_deleted_folder_deregisters_nothing() {
    let server = TestServer::start();
    let s = Scratch::new("empty-guard");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    s.write("b.yaml", &manifest("b.example.com", &[], 10));
    let p = Proc::run(&server, &s, &[]);
    assert!(
        wait_until(|| uid(&server, "v1.a.example.com").is_some()
            && uid(&server, "v1.b.example.com").is_some()),
        "{}",
        p.log()
    );
    // A truncated folder first (one file left) is a legitimate change...
    s.remove("b.yaml");
    assert!(
        wait_until(|| stored(&server, "v1.b.example.com").is_none()),
        "{}",
        p.log()
    );
    // ...but emptying it is held.
    s.remove("a.yaml");
    p.wait_log("declares no APIServices any more; keeping the 1 registered ones");
    // Then the folder goes away altogether: an error, the last good set stays.
    std::fs::remove_dir_all(s.manifests()).unwrap();
    p.wait_log("No such file or directory");
    // And comes back, the held object with a new one: applied, the held one never deleted.
    std::fs::create_dir(s.manifests()).unwrap();
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    s.write("c.yaml", &manifest("c.example.com", &[], 10));
    assert!(
        wait_until(|| uid(&server, "v1.c.example.com").is_some()),
        "{}",
        p.log()
    );
    assert_eq!(
        writes(&server, "v1.a.example.com"),
        ["create 201"],
        "never deleted"
    );
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn allow_empty_lets_an_empty_folder_deregister_what_we_manage() {
    let server = TestServer::start();
    server.seed("apiservices", None, object("other.example.com", &[], 1));
    let s = Scratch::new("allow-empty");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let p = Proc::run(&server, &s, &["--allow-empty"]);
    assert!(
        wait_until(|| uid(&server, "v1.a.example.com").is_some()),
        "{}",
        p.log()
    );
    s.remove("a.yaml");
    assert!(
        wait_until(|| stored(&server, "v1.a.example.com").is_none()),
        "{}",
        p.log()
    );
    assert!(
        stored(&server, "v1.other.example.com").is_some(),
        "not ours: kept"
    );
    p.terminate();
}

#[test]
fn once_with_an_empty_folder_deletes_nothing_and_says_why() {
    let server = TestServer::start();
    server.seed(
        "apiservices",
        None,
        object("a.example.com", &[(KEY, "true")], 10),
    );
    let s = Scratch::new("once-empty");
    let (code, log) = Proc::run(&server, &s, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains(
            "v1.a.example.com: the desired set is empty: not deregistering without --allow-empty"
        ),
        "{log}"
    );
    assert!(writes(&server, "v1.a.example.com").is_empty());
    let (code, log) = Proc::run(&server, &s, &["--once", "--allow-empty"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    assert!(stored(&server, "v1.a.example.com").is_none(), "{log}");
}

/// Two instances with keys `team-a…` and `team-b…`, managing `v1.x…` and `v1.y…`,
/// once both objects exist: (their folders, their processes).
fn two_keyed_instances(server: &TestServer, tag: &str) -> (Scratch, Scratch, Proc, Proc) {
    let (sa, sb) = (
        Scratch::new(&format!("{tag}-a")),
        Scratch::new(&format!("{tag}-b")),
    );
    sa.write("x.yaml", &manifest("x.example.com", &[], 10));
    sb.write("y.yaml", &manifest("y.example.com", &[], 10));
    let a = Proc::run(
        server,
        &sa,
        &["--label-key", "team-a.example.com/automanaged"],
    );
    let b = Proc::run(
        server,
        &sb,
        &["--label-key", "team-b.example.com/automanaged"],
    );
    assert!(wait_until(
        || uid(server, "v1.x.example.com").is_some() && uid(server, "v1.y.example.com").is_some()
    ));
    (sa, sb, a, b)
}

#[test]
fn two_instances_with_two_keys_leave_each_other_alone() {
    let server = TestServer::start();
    let (sa, sb, a, b) = two_keyed_instances(&server, "key");
    let (x, y) = (
        uid(&server, "v1.x.example.com"),
        uid(&server, "v1.y.example.com"),
    );
    // Each instance reacts to changes afterwards (the other's objects included, via the
    // watch): add one to each and see both applied, nothing else touched.
    sa.write("z.yaml", &manifest("z.example.com", &[], 10));
    sb.write("w.yaml", &manifest("w.example.com", &[], 10));
    assert!(wait_until(
        || uid(&server, "v1.z.example.com").is_some() && uid(&server, "v1.w.example.com").is_some()
    ));
    assert_eq!(
        (
            uid(&server, "v1.x.example.com"),
            uid(&server, "v1.y.example.com")
        ),
        (x, y)
    );
    for name in [
        "v1.x.example.com",
        "v1.y.example.com",
        "v1.z.example.com",
        "v1.w.example.com",
    ] {
        assert_eq!(
            writes(&server, name),
            ["create 201"],
            "{name}:\n{}\n{}",
            a.log(),
            b.log()
        );
    }
    assert_eq!(
        label(
            &server,
            "v1.x.example.com",
            "team-a.example.com/automanaged"
        )
        .as_deref(),
        Some("true")
    );
    assert_eq!(
        label(
            &server,
            "v1.y.example.com",
            "team-b.example.com/automanaged"
        )
        .as_deref(),
        Some("true")
    );
    let (ca, la) = a.terminate();
    let (cb, lb) = b.terminate();
    assert_eq!((ca, cb), (0, 0), "{la}\n{lb}");
}

#[test]
fn two_instances_fighting_over_one_key_are_reported() {
    let server = TestServer::start();
    let (sa, sb) = (Scratch::new("fight-a"), Scratch::new("fight-b"));
    sa.write("x.yaml", &manifest("x.example.com", &[], 10));
    sb.write("y.yaml", &manifest("y.example.com", &[], 10));
    // Same key, different manifests: each deletes what the other creates.
    let a = Proc::run(&server, &sa, &[]);
    let b = Proc::run(&server, &sb, &[]);
    let reported = |p: &Proc| p.log().contains("undoing another writer's changes");
    assert!(
        wait_until(|| reported(&a) || reported(&b)),
        "no fight reported:\n{}\n{}",
        a.log(),
        b.log()
    );
    let log = if reported(&a) { a.log() } else { b.log() };
    assert!(
        log.contains("Run one instance (or one leader-elected group) per label key"),
        "{log}"
    );
    // Each side's creates and deletes are paced like put-backs (5 ms doubling): after the
    // five that make a fight, a few more per name and side (2 names, 2 sides here: ~20 in
    // 2 s), where an unpaced pair trades them as fast as the watch brings them (~2,000).
    let count = || {
        server
            .requests()
            .iter()
            .filter(|r| is_write(r) && r.resource.as_deref() == Some("apiservices"))
            .count()
    };
    let before = count();
    std::thread::sleep(Duration::from_secs(2));
    let during = count() - before;
    assert!(
        during <= 40,
        "{during} writes in 2 s:\n{}\n{}",
        a.log(),
        b.log()
    );
}

#[test]
fn once_does_not_count_a_conflict_as_converged() {
    let server = TestServer::start();
    server.seed(
        "apiservices",
        None,
        object("a.example.com", &[(KEY, "true")], 1),
    );
    server.faults().fail_next_verb(Some("patch"), 10_000, 409);
    let s = Scratch::new("once-conflict");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let started = Instant::now();
    let (code, log) = Proc::run(&server, &s, &["--once", "--timeout", "2s"]).wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "waited out the timeout"
    );
    assert!(log.contains("v1.a.example.com: update:"), "{log}");
    assert_eq!(
        stored(&server, "v1.a.example.com").unwrap()["spec"]["versionPriority"],
        1
    );
    // A few conflicts, then the server lets it through: retried with backoff, then converged.
    server.faults().clear();
    server.faults().fail_next_verb(Some("patch"), 3, 409);
    let (code, log) = Proc::run(&server, &s, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        stored(&server, "v1.a.example.com").unwrap()["spec"]["versionPriority"],
        10
    );
}

#[test]
fn a_standby_reads_the_manifests_when_it_becomes_leader() {
    let server = TestServer::start();
    let s = Scratch::new("standby-manifests");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let lease = ["--leader-elect", "--lease-namespace", "default"];
    let leader = Proc::run(&server, &s, &lease);
    leader.wait_log("leading as");
    let standby = Proc::run(&server, &s, &lease);
    standby.wait_log("waiting for lease");
    // Added while the second instance stands by: the leader registers it.
    s.write("b.yaml", &manifest("b.example.com", &[], 10));
    assert!(
        wait_until(|| uid(&server, "v1.b.example.com").is_some()),
        "{}",
        leader.log()
    );
    let (code, log) = leader.terminate();
    assert_eq!(code, 0, "{log}");
    standby.wait_log("leading as");
    // A later change shows the new leader has synced; b was never deleted.
    s.write("c.yaml", &manifest("c.example.com", &[], 10));
    assert!(
        wait_until(|| uid(&server, "v1.c.example.com").is_some()),
        "{}",
        standby.log()
    );
    assert_eq!(
        writes(&server, "v1.b.example.com"),
        ["create 201"],
        "{}",
        standby.log()
    );
    standby.terminate();
}

// ---- Against the test server playing kube-apiserver: its built-ins and its own rules. ----

fn kube_apiserver() -> TestServer {
    TestServer::builder()
        .kube_apiserver(true)
        .kube_apiserver_crd_group("stable.example.com", "v1")
        .start()
        .unwrap()
}

/// kube-apiserver's objects as they stand: (name, uid, resourceVersion).
fn kube_apiservers_objects(server: &TestServer) -> Vec<(String, String, String)> {
    let mut names = autoregister::testserver::builtin_apiservices();
    names.push("v1.stable.example.com".into());
    names
        .into_iter()
        .map(|n| {
            let o = stored(server, &n).unwrap_or_else(|| panic!("{n} is gone"));
            let meta = &o["metadata"];
            (
                n,
                meta["uid"].to_string(),
                meta["resourceVersion"].to_string(),
            )
        })
        .collect()
}

/// Our requests that wrote to one of kube-apiserver's objects.
fn writes_to_kube_apiservers_objects(server: &TestServer) -> Vec<String> {
    let theirs = kube_apiservers_objects(server);
    server
        .requests()
        .into_iter()
        .filter(|r| is_write(r) && theirs.iter().any(|(n, ..)| r.name.as_deref() == Some(n)))
        .map(|r| format!("{} {} {}", r.verb, r.path, r.code))
        .collect()
}

#[test]
fn against_kube_apiserver_plan_once_and_run_leave_its_objects_alone_and_ours_stay() {
    let server = kube_apiserver();
    let before = kube_apiservers_objects(&server);
    assert!(before.len() > 20, "{before:?}");
    let s = Scratch::new("kas");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    // Written for upstream: with kube-aggregator's label this would be deleted at once.
    s.write(
        "b.yaml",
        &manifest("b.example.com", &[(AUTO_MANAGED_LABEL, "true")], 10),
    );

    let (code, out) = Proc::command("plan", &server, &s, &["--all"]).wait_exit_stdout_first(WAIT);
    assert_eq!(code, 0, "{out}");
    for (name, ..) in &before {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_default();
        assert!(
            line.contains("3A") && line.contains("none"),
            "{name}: {out}"
        );
    }
    assert!(out.contains("plan: 2 create,"), "{out}");

    let (code, log) = Proc::run(&server, &s, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    let ours = (
        uid(&server, "v1.a.example.com"),
        uid(&server, "v1.b.example.com"),
    );
    assert!(ours.0.is_some() && ours.1.is_some(), "{log}");

    let p = Proc::run(&server, &s, &[]);
    p.wait_log("cache synced");
    // kube-apiserver handles events in order: once it has seen a new CRD group, it has
    // seen our objects too, and would have deleted them by its 6A if they bore its label.
    server.add_crd_group("later.example.com", "v1");
    // And they stay over a few seconds of both controllers running.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let now = (
            uid(&server, "v1.a.example.com"),
            uid(&server, "v1.b.example.com"),
        );
        assert_eq!(now, ours, "our objects were replaced:\n{}", p.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    assert!(
        server
            .kube_apiserver_writes()
            .iter()
            .all(|w| !w.name.contains("a.example.com") && !w.name.contains("b.example.com")),
        "kube-apiserver wrote ours: {:?}",
        server.kube_apiserver_writes()
    );
    assert_eq!(
        writes_to_kube_apiservers_objects(&server),
        Vec::<String>::new()
    );
    assert_eq!(
        kube_apiservers_objects(&server),
        before,
        "built-ins changed"
    );
}

#[test]
fn against_kube_apiserver_adopting_its_object_is_refused_and_emptying_deletes_only_ours() {
    let server = kube_apiserver();
    let before = kube_apiservers_objects(&server);
    let s = Scratch::new("kas-adopt");
    // A manifest for a built-in name with another spec: never adopted, --once fails naming it.
    s.write("apps.yaml", &manifest("apps", &[], 10));
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let (code, log) = Proc::run(&server, &s, &["--once", "--adopt"]).wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("v1.apps: held by kube-apiserver"), "{log}");
    // Emptied folder: nothing deleted without --allow-empty, only ours with it.
    s.remove("apps.yaml");
    s.remove("a.yaml");
    let (code, log) = Proc::run(&server, &s, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(uid(&server, "v1.a.example.com").is_some(), "{log}");
    let (code, log) = Proc::run(&server, &s, &["--once", "--allow-empty"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    assert!(stored(&server, "v1.a.example.com").is_none(), "{log}");
    assert_eq!(
        writes_to_kube_apiservers_objects(&server),
        Vec::<String>::new()
    );
    assert_eq!(
        kube_apiservers_objects(&server),
        before,
        "built-ins changed"
    );
}

#[test]
fn against_kube_apiserver_two_keys_coexist() {
    let server = kube_apiserver();
    let before = kube_apiservers_objects(&server);
    let (sa, _sb, a, b) = two_keyed_instances(&server, "kas");
    server.add_crd_group("later.example.com", "v1");
    sa.write("z.yaml", &manifest("z.example.com", &[], 10));
    assert!(
        wait_until(|| uid(&server, "v1.z.example.com").is_some()),
        "{}",
        a.log()
    );
    for name in ["v1.x.example.com", "v1.y.example.com", "v1.z.example.com"] {
        assert_eq!(
            writes(&server, name),
            ["create 201"],
            "{name}:\n{}\n{}",
            a.log(),
            b.log()
        );
    }
    a.terminate();
    b.terminate();
    assert_eq!(
        writes_to_kube_apiservers_objects(&server),
        Vec::<String>::new()
    );
    assert_eq!(kube_apiservers_objects(&server), before);
}

#[test]
fn a_fight_names_the_other_writer_from_the_trimmed_cache() {
    use autoregister::api::APIService;
    use autoregister::client::{Api, Client};
    let server = TestServer::start();
    let s = Scratch::new("fight-helm");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let ctl = Proc::run(&server, &s, &[]);
    let name = "v1.a.example.com";
    let priority = || stored(&server, name).and_then(|o| o["spec"]["versionPriority"].as_i64());
    let helm: Api<APIService> =
        Api::all(Client::new(server.client_config()).unwrap()).with_field_manager("helm");
    let warned = || {
        let log = ctl.log();
        log.contains("FieldFight: spec.versionPriority is also written by helm")
    };
    // helm sets its own spec, the controller puts ours back: each restore is contested;
    // five within the window are a fight. The cache has no managedFields left, so this
    // reads the writer from the field ownership the trimming kept.
    for round in 0..20 {
        if warned() {
            break;
        }
        assert!(
            wait_until(|| priority() == Some(10)),
            "round {round}: ours is not restored\n{}",
            ctl.log()
        );
        let mut obj = helm.get(name).unwrap();
        obj.spec.version_priority = 99;
        // helm also owns a field we never write, so its managedFields entry outlives our
        // restores (an entry left owning nothing is dropped, as kube-apiserver does).
        obj.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("helm.sh/chart".into(), "a".into());
        // A 409 means the controller wrote in between: the next round tries again.
        let _ = helm.update(&obj);
    }
    assert!(wait_until(warned), "no fight naming helm:\n{}", ctl.log());
}
