//! Field ownership through the binary against the test server: server-side apply of the
//! declared fields beside an injector, migration from `update`, adoption, `plan`'s kept
//! fields. The bodies (tests/support/field_ownership.rs) take the cluster as a parameter:
//! the same ones run against the real kube-apiserver.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/field_ownership.rs"]
mod field_ownership;

use std::time::{Duration, Instant};

use autoregister::testserver::TestServer;
use binary::{wait_until, Proc, Scratch};
use field_ownership::{manifest, Cluster, Names};
use serde_json::json;

/// A test server and a cluster handle on it (the server must outlive the handle's use).
fn test_server(tag: &str) -> (TestServer, Scratch, Cluster) {
    let server = TestServer::start();
    let s = Scratch::new(&format!("{tag}-kubeconfig"));
    let kubeconfig = s.kubeconfig(&server);
    let c = Cluster::new(&kubeconfig);
    (server, s, c)
}

#[test]
fn an_injected_ca_bundle_is_kept_with_no_write_of_ours() {
    let (server, _s, c) = test_server("kept");
    field_ownership::an_injected_ca_bundle_is_kept_with_no_write_of_ours(
        &c,
        "kept",
        Duration::from_secs(3),
    );
    // Here the request log shows it too: one create of ours, then only the injector.
    let name = Names::new("kept").name;
    let ours: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| {
            r.name.as_deref() == Some(name.as_str())
                && binary::is_write(r)
                && r.field_manager.as_deref() == Some("autoregister")
                && r.verb != "delete"
        })
        .map(|r| format!("{} {}", r.verb, r.code))
        .collect();
    assert_eq!(ours, ["create 201"]);
}

#[test]
fn a_declared_ca_bundle_beside_an_injector_is_one_reported_paced_fight() {
    let (_server, _s, c) = test_server("fight");
    field_ownership::a_declared_ca_bundle_beside_an_injector_is_one_reported_paced_fight(
        &c,
        "fight",
        Duration::from_secs(2),
    );
}

#[test]
fn a_field_dropped_from_the_manifest_is_removed() {
    let (_server, _s, c) = test_server("dropped");
    field_ownership::a_field_dropped_from_the_manifest_is_removed(&c, "dropped");
}

#[test]
fn an_object_written_by_update_migrates_and_drops_a_field() {
    let (server, _s, c) = test_server("migrated");
    field_ownership::an_object_written_by_update_migrates_and_drops_a_field(&c, "migrated");
    // The migration was one JSON patch of managedFields, guarded by the resourceVersion.
    let patches: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.content_type.as_deref() == Some("application/json-patch+json"))
        .collect();
    assert_eq!(patches.len(), 1, "{patches:?}");
    let ops = patches[0].body.clone().unwrap();
    assert_eq!(ops[0]["path"], "/metadata/managedFields");
    assert_eq!(ops[1]["path"], "/metadata/resourceVersion");
}

#[test]
fn an_adopted_object_releases_a_field_its_manifest_drops() {
    let (_server, _s, c) = test_server("adopted");
    field_ownership::an_adopted_object_releases_a_field_its_manifest_drops(&c, "adopted");
}

#[test]
fn plan_shows_a_kept_field_and_its_manager() {
    let (server, _s, c) = test_server("plan");
    field_ownership::plan_shows_a_kept_field_and_its_manager(&c, "plan");
    // Its dry run is the apply `run` sends, with dryRun=All.
    assert!(server.requests().iter().any(|r| r.content_type.as_deref()
        == Some("application/apply-patch+yaml")
        && binary::is_dry_run(r)
        && r.query.contains("force=true")));
}

// ---------- what only the test server can stage ----------

/// An apply the server refuses as a media type it does not take (415) is logged with the
/// server's message once and not sent again until the object or the manifest changes.
#[test]
fn an_apply_answered_415_is_reported_once_and_not_retried_hot() {
    let (server, s, c) = test_server("refused");
    let n = Names::new("refused");
    s.write("a.yaml", &manifest(&n, "", ""));
    let p = Proc::run_with_kubeconfig(&c.kubeconfig, &s, &n.args(&["--resync", "1s"]));
    assert!(wait_until(|| c.get(&n.name).is_some()), "{}", p.log());
    server.faults().fail_next_verb(Some("patch"), 1_000, 415);
    s.write(
        "a.yaml",
        &manifest(&n, "", "").replace("versionPriority: 10", "versionPriority: 11"),
    );
    p.wait_log("refused by the server");
    // Resyncs every second bring the name back; none may resend the refused apply.
    let quiet = Instant::now() + Duration::from_secs(3);
    while Instant::now() < quiet {
        assert_eq!(
            binary::writes(&server, &n.name),
            ["create 201", "patch 415"],
            "{}",
            p.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    assert_eq!(log.matches("refused by the server").count(), 1, "{log}");
    assert!(log.contains("(415)"), "the server's answer: {log}");
}

/// A managedFields entry the controller cannot read is ignored, never a panic: the object
/// is still decided on its other entries and its declared fields.
#[test]
fn a_managed_fields_entry_that_cannot_be_read_is_ignored() {
    let (server, s, c) = test_server("unreadable");
    let n = Names::new("unreadable");
    let mut obj = json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": n.name, "labels": {n.key.as_str(): "true"},
            "managedFields": [
                {"manager": "odd", "operation": "Replace", "fieldsV1": {"f:spec": 7}},
                {"manager": "worse", "fieldsV1": "not a set"},
                42
            ]},
        "spec": {"group": n.group, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 5,
                 "service": {"namespace": "default", "name": "unreadable-backend"}},
    });
    server.seed("apiservices", None, obj.take());
    s.write("a.yaml", &manifest(&n, "", ""));
    let (code, log) =
        Proc::run_with_kubeconfig(&c.kubeconfig, &s, &n.args(&["--once"])).wait_exit(binary::WAIT);
    assert_eq!(code, 0, "{log}");
    assert_eq!(c.get(&n.name).unwrap().spec.version_priority, 10);
}

/// Only put-backs wait for a fight's pace: a manifest change is written at once, even while
/// the next put-back is seconds away.
#[test]
fn a_manifest_change_during_a_paced_fight_is_written_at_once() {
    let (_server, s, c) = test_server("paced");
    let n = Names::new("paced");
    let declared = manifest(
        &n,
        "",
        &field_ownership::ca_bundle_line(field_ownership::declared()),
    );
    s.write("a.yaml", &declared);
    let p = Proc::run_with_kubeconfig(&c.kubeconfig, &s, &n.args(&[]));
    assert!(wait_until(|| c.get(&n.name).is_some()), "{}", p.log());
    let injector = field_ownership::Injector::start(&c, &n.name, field_ownership::injected());
    let put_backs = || {
        p.log()
            .lines()
            .filter(|l| l.contains(&format!("{} 6C update", n.name)) && l.ends_with(": ok"))
            .count()
    };
    // After the 10th put-back the next one waits 5 ms · 2^9 = 2.56 s.
    assert!(
        field_ownership::wait_for(Duration::from_secs(30), || put_backs() >= 10),
        "{}",
        p.log()
    );
    let changed = Instant::now();
    s.write(
        "a.yaml",
        &declared.replace("versionPriority: 10", "versionPriority: 11"),
    );
    assert!(
        field_ownership::wait_for(Duration::from_secs(2), || c
            .get(&n.name)
            .is_some_and(|o| o.spec.version_priority == 11)),
        "the change waited for the fight's pace\n{}",
        p.log()
    );
    let took = changed.elapsed();
    assert!(took < Duration::from_millis(2000), "{took:?}");
    injector.stop();
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
}
