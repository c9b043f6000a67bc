//! Field ownership through the binary: server-side apply of the declared fields beside an
//! injector, migration from `update`, adoption, `plan`'s kept fields. The shared bodies
//! (tests/support/field_ownership.rs) run against the test server playing kube-apiserver
//! and against the real kube-apiserver, whose `managedFields` are the judge; what only
//! the test server can stage (faults, objects stored as given) follows.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/field_ownership.rs"]
mod field_ownership;
#[path = "support/kube.rs"]
mod kube;
#[path = "support/tls_backend.rs"]
mod tls_backend;

use std::time::{Duration, Instant};

use autoregister::testserver::TestServer;
use binary::{wait_until, Proc, Scratch};
use cluster::Cluster;
use field_ownership::{manifest, Names};
use serde_json::json;

/// How long an injected bundle must stay with no write of ours: the 60 s on the
/// real server, a few seconds on the test server.
fn quiet(c: &Cluster) -> Duration {
    if c.is_real() {
        Duration::from_secs(60)
    } else {
        Duration::from_secs(3)
    }
}

fn an_injected_ca_bundle_is_kept_with_no_write_of_ours(c: &Cluster) {
    field_ownership::an_injected_ca_bundle_is_kept_with_no_write_of_ours(c, quiet(c));
}

fn an_applied_ca_bundle_is_kept_with_no_write_of_ours(c: &Cluster) {
    field_ownership::an_applied_ca_bundle_is_kept_with_no_write_of_ours(c, quiet(c));
}

fn a_declared_ca_bundle_beside_an_injector_is_one_reported_paced_fight(c: &Cluster) {
    field_ownership::a_declared_ca_bundle_beside_an_injector_is_one_reported_paced_fight(
        c,
        Duration::from_secs(2),
    );
}

use field_ownership::{
    a_field_dropped_from_the_manifest_is_removed,
    an_adopted_object_releases_a_field_its_manifest_drops,
    an_object_written_by_update_migrates_and_drops_a_field,
    plan_shows_a_kept_field_and_its_manager,
};

on_both!(
    an_injected_ca_bundle_is_kept_with_no_write_of_ours,
    an_applied_ca_bundle_is_kept_with_no_write_of_ours,
    a_declared_ca_bundle_beside_an_injector_is_one_reported_paced_fight,
    a_field_dropped_from_the_manifest_is_removed,
    an_object_written_by_update_migrates_and_drops_a_field,
    an_adopted_object_releases_a_field_its_manifest_drops,
    plan_shows_a_kept_field_and_its_manager,
);

// ---------- what only the test server can stage or show ----------

/// A plain test server (no kube-apiserver mode: no status writes) and a handle on it.
fn plain() -> (Cluster, Scratch) {
    (
        Cluster::Test(TestServer::start()),
        Scratch::new("fields-plain"),
    )
}

fn server(c: &Cluster) -> &TestServer {
    match c {
        Cluster::Test(s) => s,
        Cluster::Real(_) => unreachable!("test server only"),
    }
}

/// The request log shows what the managedFields imply: one create of ours, then nothing
/// of ours while the injector's bundle stays.
#[test]
fn beside_an_injector_our_only_write_is_the_create() {
    let c = Cluster::Test(TestServer::start());
    field_ownership::an_injected_ca_bundle_is_kept_with_no_write_of_ours(
        &c,
        Duration::from_secs(2),
    );
    let ours: Vec<String> = server(&c)
        .requests()
        .into_iter()
        .filter(|r| {
            binary::is_write(r)
                && r.resource.as_deref() == Some("apiservices")
                && r.field_manager.as_deref() == Some("autoregister")
        })
        .map(|r| format!("{} {}", r.verb, r.code))
        .collect();
    assert_eq!(ours, ["create 201"]);
}

/// The migration of an object written by update is one JSON patch of managedFields,
/// guarded by the resourceVersion, before the apply.
#[test]
fn a_migration_is_one_json_patch_guarded_by_the_resource_version() {
    let c = Cluster::Test(TestServer::start());
    field_ownership::an_object_written_by_update_migrates_and_drops_a_field(&c);
    let patches: Vec<_> = server(&c)
        .requests()
        .into_iter()
        .filter(|r| r.content_type.as_deref() == Some("application/json-patch+json"))
        .collect();
    assert_eq!(patches.len(), 1, "{patches:?}");
    let ops = patches[0].body.clone().unwrap();
    assert_eq!(ops[0]["path"], "/metadata/managedFields");
    assert_eq!(ops[1]["path"], "/metadata/resourceVersion");
}

/// `plan`'s dry run is the apply `run` sends, with `dryRun=All`.
#[test]
fn plan_dry_runs_the_apply_run_sends() {
    let c = Cluster::Test(TestServer::start());
    field_ownership::plan_shows_a_kept_field_and_its_manager(&c);
    assert!(server(&c)
        .requests()
        .iter()
        .any(
            |r| r.content_type.as_deref() == Some("application/apply-patch+yaml")
                && binary::is_dry_run(r)
                && r.query.contains("force=true")
        ));
}

/// An apply the server refuses as a media type it does not take (415) is logged with the
/// server's message once and not sent again until the object or the manifest changes.
#[test]
fn an_apply_answered_415_is_reported_once_and_not_retried_hot() {
    let (c, s) = plain();
    let n = Names::new("refused");
    s.write("a.yaml", &manifest(&n, "", ""));
    let p = Proc::run(c.target(), &s, &n.args(&["--resync", "1s"]));
    assert!(
        wait_until(|| field_ownership::get(&c, &n.name).is_some()),
        "{}",
        p.log()
    );
    server(&c)
        .faults()
        .fail_next_verb(Some("patch"), 1_000, 415);
    s.write(
        "a.yaml",
        &manifest(&n, "", "").replace("versionPriority: 10", "versionPriority: 11"),
    );
    p.wait_log("refused by the server");
    // Resyncs every second bring the name back; none may resend the refused apply.
    let quiet = Instant::now() + Duration::from_secs(3);
    while Instant::now() < quiet {
        assert_eq!(
            binary::writes(server(&c), &n.name),
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
    let (c, s) = plain();
    let n = Names::new("unreadable");
    let obj = json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": n.name, "labels": {n.key.as_str(): "true"},
            "managedFields": [
                {"manager": "odd", "operation": "Replace", "fieldsV1": {"f:spec": 7}},
                {"manager": "worse", "fieldsV1": "not a set"},
                42
            ]},
        "spec": {"group": n.group, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 5,
                 "service": {"namespace": "default", "name": n.backend()}},
    });
    server(&c).seed("apiservices", None, obj);
    s.write("a.yaml", &manifest(&n, "", ""));
    let (code, log) = Proc::run(c.target(), &s, &n.args(&["--once"])).wait_exit(binary::WAIT);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        field_ownership::get(&c, &n.name)
            .unwrap()
            .spec
            .version_priority,
        10
    );
}

/// Only put-backs wait for a fight's pace: a manifest change is written at once, even while
/// the next put-back is seconds away; so is the delete when the name leaves the manifests.
#[test]
fn a_manifest_change_during_a_paced_fight_is_written_at_once() {
    let (c, s) = plain();
    let n = Names::new("paced");
    let declared = manifest(
        &n,
        "",
        &field_ownership::ca_bundle_line(field_ownership::declared()),
    );
    s.write("a.yaml", &declared);
    // At debug, a write held by the pace says so ("… again in … (paced fight)").
    let p = Proc::run_env(
        c.target(),
        &s,
        &n.args(&["--allow-empty"]),
        &[("RUST_LOG", "debug")],
    );
    assert!(
        wait_until(|| field_ownership::get(&c, &n.name).is_some()),
        "{}",
        p.log()
    );
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
    s.write(
        "a.yaml",
        &declared.replace("versionPriority: 10", "versionPriority: 11"),
    );
    // The program's own line, not the store: the store shows the write before the answer
    // reaches the program and it logs it.
    assert!(
        field_ownership::wait_for(Duration::from_secs(10), || p
            .log()
            .contains("spec.versionPriority]: ok")),
        "not written\n{}",
        p.log()
    );
    assert_eq!(
        field_ownership::get(&c, &n.name).map(|o| o.spec.version_priority),
        Some(11)
    );
    // Written as soon as the program read the change, not at the next put-back's pace
    // (≥ 2.56 s away). Timed between its own log lines: the manifest poll and reload before
    // them are not what is judged, and a loaded machine stretches them.
    let log = p.log();
    let at = |from: usize, needle: &str| {
        let (i, line) = log
            .lines()
            .enumerate()
            .skip(from)
            .find(|(_, l)| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{log}"));
        (i, field_ownership::logged_at(line))
    };
    let (i, read) = at(0, &format!("{}: changed in the manifests", n.name));
    let (_, written) = at(i, "spec.versionPriority]: ok");
    let took = written.duration_since(read).unwrap_or_default();
    assert!(took < Duration::from_secs(1), "{took:?}\n{log}");
    // Removed from the manifests: deleted without waiting for the pace.
    s.remove("a.yaml");
    assert!(
        field_ownership::wait_for(Duration::from_secs(10), || field_ownership::get(
            &c, &n.name
        )
        .is_none()),
        "not deleted\n{}",
        p.log()
    );
    let paced_delete = format!("{} 6A: delete again in", n.name);
    assert!(!p.log().contains(&paced_delete), "{}", p.log());
    injector.stop();
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
}

// ---------- the test server's server-side apply against kube-apiserver's ----------

/// One server's view of an APIService after a step: its labels, spec and who owns which
/// field (times left out, `.` markers too: the test server's update entries do not write
/// them), and an answer's code, reason and message for a refusal.
fn view(c: &Cluster, name: &str) -> serde_json::Value {
    fn strip_dots(v: &mut serde_json::Value) {
        if let Some(m) = v.as_object_mut() {
            m.remove(".");
            for x in m.values_mut() {
                strip_dots(x);
            }
        }
    }
    let Some(o) = c.get(name) else {
        return json!(null);
    };
    let mut entries: Vec<serde_json::Value> = o["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e.get("subresource").is_none_or(serde_json::Value::is_null))
        .map(|e| {
            let mut f = e["fieldsV1"].clone();
            strip_dots(&mut f);
            json!({"manager": e["manager"], "operation": e["operation"], "apiVersion": e["apiVersion"], "fieldsV1": f})
        })
        .collect();
    entries.sort_by_key(|e| format!("{}{}", e["operation"], e["manager"]));
    json!({"labels": o["metadata"]["labels"], "spec": o["spec"], "managedFields": entries})
}

fn answer<T>(r: Result<T, autoregister::client::Error>) -> serde_json::Value {
    match r {
        Ok(_) => json!("ok"),
        Err(autoregister::client::Error::Api(e)) => json!({
            "code": e.code, "reason": e.status.reason, "message": e.status.message,
            "causes": e.status.details.as_ref().map(|d| d.causes.clone()).unwrap_or_default(),
        }),
        Err(e) => json!(format!("error: {e}")),
    }
}

/// A configuration for `name`: the given labels and spec.
fn config(
    name: &str,
    labels: serde_json::Value,
    spec: serde_json::Value,
) -> autoregister::api::APIService {
    serde_json::from_value(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name, "labels": labels}, "spec": spec,
    }))
    .unwrap()
}

/// One step on one server: its answer.
type Step<'a> = Box<dyn Fn(&Cluster) -> serde_json::Value + 'a>;

/// Server-side apply step by step on both servers — create by apply, an injector's update
/// taking a field, a refused apply without force (409 worded by apimachinery), a dropped
/// field released unless another manager owns it, shared ownership of an equal value, a
/// dry run, the UID rules, a managedFields upgrade by JSON patch: after each step the
/// object and who owns which field, or the refusal, are the same on both. The real server
/// is the judge.
#[test]
fn server_side_apply_matches_kube_apiserver_step_by_step() {
    let real = Cluster::kube();
    let test = Cluster::test_server();
    let n = Names::new("ssa");
    let name = n.name.as_str();
    let base = json!({"group": n.group, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
                      "service": {"namespace": "default", "name": n.backend()}});
    let with_ca = |ca: &str| {
        let mut s = base.clone();
        s["caBundle"] = json!(ca);
        s
    };
    let (a, b) = ("QUFB", "QkJC"); // base64 of "AAA" and "BBB"
    let steps: Vec<(&str, Step)> = vec![
        (
            "create by apply",
            Box::new(|c| {
                answer(field_ownership::api_as(c, "me").apply(
                    &config(name, json!({"owner": "me", "team": "x"}), with_ca(a)),
                    true,
                ))
            }),
        ),
        (
            "an injector's update takes caBundle",
            Box::new(|c| {
                let inj = field_ownership::api_as(c, "cainjector");
                let mut last = json!(null);
                for _ in 0..20 {
                    let mut o = inj.get(name).unwrap();
                    o.spec.ca_bundle = Some(b"BBB".to_vec().into_boxed_slice());
                    last = answer(inj.update(&o));
                    if last == json!("ok") {
                        break;
                    }
                }
                last
            }),
        ),
        (
            "apply without force: 409",
            Box::new(|c| {
                answer(field_ownership::api_as(c, "me").apply(
                    &config(name, json!({"owner": "me", "team": "x"}), with_ca(a)),
                    false,
                ))
            }),
        ),
        (
            "drop team and caBundle",
            Box::new(|c| {
                answer(
                    field_ownership::api_as(c, "me")
                        .apply(&config(name, json!({"owner": "me"}), base.clone()), true),
                )
            }),
        ),
        (
            "another applier, the same value",
            Box::new(|c| {
                let mut cfg = config(name, json!({}), with_ca(b));
                cfg.metadata.labels = None;
                // Only caBundle: the priorities a typed spec always carries are the same values.
                answer(field_ownership::api_as(c, "service-ca").apply(&cfg, false))
            }),
        ),
        (
            "we declare the same value, no force",
            Box::new(|c| {
                answer(
                    field_ownership::api_as(c, "me")
                        .apply(&config(name, json!({"owner": "me"}), with_ca(b)), false),
                )
            }),
        ),
        (
            "dry run changes nothing",
            Box::new(|c| {
                answer(
                    field_ownership::api_as(c, "me")
                        .with_dry_run()
                        .apply(&config(name, json!({"owner": "dry"}), base.clone()), true),
                )
            }),
        ),
        (
            "an editor changes two declared fields",
            Box::new(|c| {
                let editor = field_ownership::api_as(c, "editor");
                let mut last = json!(null);
                for _ in 0..20 {
                    let mut o = editor.get(name).unwrap();
                    o.spec.version_priority = 11;
                    o.spec.group_priority_minimum = 101;
                    last = answer(editor.update(&o));
                    if last == json!("ok") {
                        break;
                    }
                }
                last
            }),
        ),
        (
            "apply without force: 2 conflicts",
            Box::new(|c| {
                answer(
                    field_ownership::api_as(c, "me")
                        .apply(&config(name, json!({"owner": "me"}), with_ca(b)), false),
                )
            }),
        ),
        (
            "forced back",
            Box::new(|c| {
                answer(
                    field_ownership::api_as(c, "me")
                        .apply(&config(name, json!({"owner": "me"}), with_ca(b)), true),
                )
            }),
        ),
        (
            "another object's uid",
            Box::new(|c| {
                let mut cfg = config(name, json!({"owner": "me"}), with_ca(b));
                cfg.metadata.uid = Some("00000000-0000-4000-8000-000000000000".into());
                answer(field_ownership::api_as(c, "me").apply(&cfg, true))
            }),
        ),
        (
            "a uid for an absent object",
            Box::new(|c| {
                let mut cfg = config(&format!("v2.{}", n.group), json!({}), base.clone());
                cfg.spec.version = "v2".into();
                cfg.metadata.uid = Some("00000000-0000-4000-8000-000000000000".into());
                answer(field_ownership::api_as(c, "me").apply(&cfg, true))
            }),
        ),
    ];
    let mut differ = Vec::new();
    let mut real_answers = std::collections::BTreeMap::new();
    for (what, step) in &steps {
        let (r, t) = (step(&real), step(&test));
        real_answers.insert(*what, r.clone());
        let (rv, tv) = (view(&real, name), view(&test, name));
        if r != t {
            differ.push(format!(
                "{what}: answer\n  kube-apiserver: {r}\n  test server:    {t}"
            ));
        }
        if rv != tv {
            differ.push(format!(
                "{what}: object\n  kube-apiserver: {rv}\n  test server:    {tv}"
            ));
        }
    }
    // kubectl's managedFields upgrade (csaupgrade): an object created by update, its
    // entry renamed Apply by a JSON patch guarded by the resourceVersion.
    let up_group = format!("up.{}", n.group);
    let upgraded = format!("v1.{up_group}");
    let mut up_spec = base.clone();
    up_spec["group"] = json!(up_group);
    for c in [&real, &test] {
        let me = field_ownership::api_as(c, "me");
        me.create(&config(&upgraded, json!({"owner": "me"}), up_spec.clone()))
            .unwrap();
        // The aggregator writes the status meanwhile: each try starts from a fresh read.
        assert!(wait_until(|| {
            let fresh = serde_json::to_value(me.get(&upgraded).unwrap()).unwrap();
            let mut entries = fresh["metadata"]["managedFields"].clone();
            for e in entries.as_array_mut().unwrap() {
                if e["manager"] == "me" {
                    e["operation"] = json!("Apply");
                }
            }
            let ops = json!([
                {"op": "replace", "path": "/metadata/managedFields", "value": entries},
                {"op": "replace", "path": "/metadata/resourceVersion", "value": fresh["metadata"]["resourceVersion"]},
            ]);
            me.json_patch(&upgraded, &ops).is_ok()
        }));
    }
    let (rv, tv) = (view(&real, &upgraded), view(&test, &upgraded));
    if rv != tv {
        differ.push(format!(
            "csaupgrade: object\n  kube-apiserver: {rv}\n  test server:    {tv}"
        ));
    }
    field_ownership::delete(&real, &[name, &upgraded]);
    // The steps did what they are named for, on the judge.
    let code = |what: &str| real_answers[what]["code"].as_u64();
    assert_eq!(real_answers["create by apply"], json!("ok"));
    assert_eq!(code("apply without force: 409"), Some(409));
    assert_eq!(code("apply without force: 2 conflicts"), Some(409));
    assert_eq!(
        real_answers["apply without force: 2 conflicts"]["causes"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert_eq!(
        real_answers["we declare the same value, no force"],
        json!("ok")
    );
    assert_eq!(code("another object's uid"), Some(422));
    assert_eq!(code("a uid for an absent object"), Some(409));
    assert!(
        differ.is_empty(),
        "the test server answers differently:\n{}",
        differ.join("\n")
    );
}
