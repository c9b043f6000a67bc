//! The end-to-end cases written once and run against both servers: the test server playing
//! kube-apiserver, and the real kube-apiserver (`make kube`). Each test drives the real
//! binary; each uses its own label key and names, as the real server is shared.
#![cfg(feature = "testing")]

use std::collections::BTreeMap;

use serde_json::Value;

#[path = "support/binary.rs"]
mod binary;
#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/kube.rs"]
mod kube;
#[path = "support/tls_backend.rs"]
mod tls_backend;

use autoregister::client::DeleteParams;
use binary::{manifest, Proc, Scratch, WAIT};
use cluster::{tag, Cluster};

/// One test's names and label key: `v1.<x>.<tag>.example.com`, `<tag>.autoregister.test/owner`.
struct Names {
    tag: String,
    label: String,
}

impl Names {
    fn new(test: &str) -> Names {
        let tag = tag(test);
        Names {
            label: format!("{tag}.autoregister.test/owner"),
            tag,
        }
    }

    /// The group `<x>.<tag>.example.com`.
    fn group(&self, x: &str) -> String {
        format!("{x}.{}.example.com", self.tag)
    }

    /// The APIService name `v1.<group>`.
    fn name(&self, x: &str) -> String {
        format!("v1.{}", self.group(x))
    }

    /// The suffix every one of this test's names ends with.
    fn suffix(&self) -> String {
        format!(".{}.example.com", self.tag)
    }

    /// A manifest for `x` with `priority`, continuously synced.
    fn manifest(&self, x: &str, priority: i64) -> String {
        manifest(&self.group(x), &[], priority)
    }

    /// `--label-key <label>`.
    fn flags(&self) -> [&str; 2] {
        ["--label-key", &self.label]
    }
}

fn run_once(c: &Cluster, s: &Scratch, n: &Names, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["--once"];
    args.extend_from_slice(&n.flags());
    args.extend_from_slice(extra);
    Proc::run(c.target(), s, &args).wait_exit_stdout_first(WAIT)
}

fn plan(c: &Cluster, s: &Scratch, n: &Names, extra: &[&str]) -> (i32, String) {
    let mut args = n.flags().to_vec();
    args.extend_from_slice(extra);
    Proc::command("plan", c.target(), s, &args).wait_exit_stdout_first(WAIT)
}

/// The first line of `name`'s entry in a text plan, split into words.
fn entry_words(out: &str, name: &str) -> Vec<String> {
    out.lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no entry for {name}:\n{out}"))
        .split_whitespace()
        .take(3)
        .map(String::from)
        .collect()
}

fn priority(obj: &Option<Value>) -> Option<i64> {
    obj.as_ref()?["spec"]["versionPriority"].as_i64()
}

/// The issue that started this suite: `plan` with a planned delete deleted for real on
/// kube-apiserver. Every form of `plan` must leave every object as it was.
fn plan_in_every_form_stores_nothing(c: &Cluster) {
    let n = Names::new("plan");
    let s = Scratch::new("servers-plan");
    s.write("keep.yaml", &n.manifest("keep", 10));
    s.write("gone.yaml", &n.manifest("gone", 10));
    let (code, out) = run_once(c, &s, &n, &[]);
    assert_eq!(code, 0, "{out}");
    s.remove("gone.yaml");
    s.write("keep.yaml", &n.manifest("keep", 77));
    s.write("new.yaml", &n.manifest("new", 5));

    let before = c.snapshot(&n.suffix());
    assert_eq!(before.len(), 2, "{before:#?}");
    let check = |form: &str, (code, out): (i32, String)| {
        assert_eq!(code, 0, "plan {form}:\n{out}");
        assert_eq!(
            c.snapshot(&n.suffix()),
            before,
            "plan {form} changed the server:\n{out}"
        );
        out
    };
    let out = check("(text)", plan(c, &s, &n, &[]));
    assert_eq!(
        entry_words(&out, &n.name("gone"))[1..],
        ["6A", "delete"],
        "{out}"
    );
    assert_eq!(
        entry_words(&out, &n.name("keep"))[1..],
        ["6C", "update"],
        "{out}"
    );
    assert_eq!(
        entry_words(&out, &n.name("new"))[1..],
        ["2C", "create"],
        "{out}"
    );
    assert!(
        out.contains(
            "dry run (--dry-run=server): 3 writes sent with dryRun=All, 3 accepted, 0 refused"
        ),
        "{out}"
    );
    check("--all", plan(c, &s, &n, &["--all"]));
    check("--dry-run=server", plan(c, &s, &n, &["--dry-run=server"]));
    check("--dry-run=none", plan(c, &s, &n, &["--dry-run=none"]));
    let out = check("-o json", plan(c, &s, &n, &["-o", "json"]));
    // stdout (the document) comes first, stderr's log lines after it.
    let json: Value = serde_json::Deserializer::from_str(&out)
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    let actions: BTreeMap<String, String> = json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["action"].as_str().unwrap().to_string(),
            )
        })
        .filter(|(name, _)| name.ends_with(&n.suffix()))
        .collect();
    assert_eq!(actions[&n.name("gone")], "delete", "{out}");
    assert_eq!(actions[&n.name("keep")], "update", "{out}");
    assert_eq!(actions[&n.name("new")], "create", "{out}");

    // What `plan` showed is what `run` then does.
    let (code, out) = run_once(c, &s, &n, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(c.get(&n.name("gone")).is_none());
    assert_eq!(priority(&c.get(&n.name("keep"))), Some(77));
    assert_eq!(priority(&c.get(&n.name("new"))), Some(5));
}

/// The decision table as a real server shows it, through `run --once`: ours created,
/// updated and deleted; a desired name held by an object that is not ours left alone
/// (and not converged) until `--adopt` takes it over in place.
fn once_writes_only_what_is_ours(c: &Cluster) {
    let n = Names::new("table");
    let s = Scratch::new("servers-table");
    // Someone else's object under a name we want, and one that is simply not ours.
    let theirs = c.create(binary::object(&n.group("theirs"), &[], 1));
    let other = c.create(binary::object(&n.group("other"), &[], 1));
    s.write("mine.yaml", &n.manifest("mine", 10));
    s.write("theirs.yaml", &n.manifest("theirs", 10));
    let (code, out) = run_once(c, &s, &n, &["--timeout", "10s"]);
    assert_eq!(
        code, 1,
        "a desired name held by another owner is not converged:\n{out}"
    );
    assert!(out.contains(&n.name("theirs")), "{out}");
    let mine = c.get(&n.name("mine")).expect("created");
    assert_eq!(mine["metadata"]["labels"][&n.label], "true", "{mine}");
    assert_eq!(
        priority(&c.get(&n.name("theirs"))),
        Some(1),
        "not ours: untouched"
    );

    // --adopt: the same object (UID), now ours with the manifest's spec.
    let (code, out) = run_once(c, &s, &n, &["--adopt"]);
    assert_eq!(code, 0, "{out}");
    let adopted = c.get(&n.name("theirs")).unwrap();
    assert_eq!(
        adopted["metadata"]["uid"].as_str(),
        theirs.metadata.uid.as_deref()
    );
    assert_eq!(adopted["metadata"]["labels"][&n.label], "true");
    assert_eq!(priority(&Some(adopted)), Some(10));

    // Removed from the manifests: ours are deleted, the other one stays.
    s.remove("mine.yaml");
    s.write("theirs.yaml", &n.manifest("theirs", 20));
    let (code, out) = run_once(c, &s, &n, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        c.get(&n.name("mine")).is_none(),
        "ours and undesired: deleted"
    );
    assert_eq!(priority(&c.get(&n.name("theirs"))), Some(20), "updated");
    let kept = c.get(&n.name("other")).unwrap();
    assert_eq!(
        kept["metadata"]["uid"].as_str(),
        other.metadata.uid.as_deref()
    );
}

/// kube-apiserver's own APIServices (label `kube-aggregator.kubernetes.io/automanaged`)
/// are never written, even when a manifest names one; an empty folder deletes nothing
/// without `--allow-empty`.
fn builtins_and_the_empty_set_are_safe(c: &Cluster) {
    let n = Names::new("builtin");
    let s = Scratch::new("servers-builtin");
    let builtin = c.get("v1.apps").expect("the built-in v1.apps");
    s.write(
        "apps.yaml",
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.apps\nspec:\n  group: apps\n  version: v1\n  groupPriorityMinimum: 100\n  versionPriority: 1\n  service:\n    namespace: ns\n    name: svc\n    port: 443\n  insecureSkipTLSVerify: true\n",
    );
    s.write("mine.yaml", &n.manifest("mine", 10));
    let (code, out) = run_once(c, &s, &n, &["--adopt", "--timeout", "10s"]);
    assert_eq!(
        code, 1,
        "v1.apps is kube-apiserver's, never converged:\n{out}"
    );
    let after = c.get("v1.apps").unwrap();
    assert_eq!(
        after["metadata"]["resourceVersion"], builtin["metadata"]["resourceVersion"],
        "the built-in was written: {after}"
    );
    assert!(c.get(&n.name("mine")).is_some());

    // An empty folder: nothing deleted, and `--once` says why.
    s.remove("apps.yaml");
    s.remove("mine.yaml");
    let (code, out) = run_once(c, &s, &n, &["--timeout", "10s"]);
    assert_ne!(code, 0, "{out}");
    assert!(
        c.get(&n.name("mine")).is_some(),
        "deleted without --allow-empty:\n{out}"
    );
    let (code, out) = run_once(c, &s, &n, &["--allow-empty"]);
    assert_eq!(code, 0, "{out}");
    assert!(c.get(&n.name("mine")).is_none(), "{out}");
}

/// The library's `with_dry_run()` on each verb: answered as a real write, nothing stored.
fn with_dry_run_stores_nothing_on_any_verb(c: &Cluster) {
    let n = Names::new("dry");
    let real = c.create(binary::object(&n.group("a"), &[], 5));
    let before = c.snapshot(&n.suffix());
    let dry = c.api().with_dry_run();

    let would = dry
        .create(&serde_json::from_value(binary::object(&n.group("b"), &[], 5)).unwrap())
        .unwrap();
    assert_eq!(would.metadata.name.as_deref(), Some(n.name("b").as_str()));
    // The object as it is now (the availability controller wrote its status since).
    let mut changed = c.api().get(&n.name("a")).unwrap();
    changed.spec.version_priority = 99;
    assert_eq!(dry.update(&changed).unwrap().spec.version_priority, 99);
    let p = DeleteParams {
        uid: real.metadata.uid.as_deref().map(str::to_string),
        resource_version: None,
    };
    dry.delete(&n.name("a"), &p).unwrap();
    // A dry run still checks preconditions.
    let wrong = DeleteParams {
        uid: Some("not-the-uid".into()),
        resource_version: None,
    };
    let e = dry.delete(&n.name("a"), &wrong).unwrap_err();
    assert!(e.is_conflict(), "{e}");

    assert_eq!(c.snapshot(&n.suffix()), before);
    assert!(c.get(&n.name("b")).is_none());
}

/// `plan` as an identity that may only read APIServices: its dry runs are refused, it
/// says so, and nothing is stored.
fn plan_as_a_reader_stores_nothing(c: &Cluster) {
    let n = Names::new("reader");
    let s = Scratch::new("servers-reader");
    s.write("keep.yaml", &n.manifest("keep", 10));
    s.write("gone.yaml", &n.manifest("gone", 10));
    let (code, out) = run_once(c, &s, &n, &[]);
    assert_eq!(code, 0, "{out}");
    s.remove("gone.yaml");
    s.write("keep.yaml", &n.manifest("keep", 77));
    let before = c.snapshot(&n.suffix());

    let reader = c.reader(&n.tag);
    let mut args = n.flags().to_vec();
    args.push("--dry-run=server");
    let (code, out) = Proc::command("plan", &reader, &s, &args).wait_exit_stdout_first(WAIT);
    assert_eq!(code, 1, "refused dry runs fail the plan:\n{out}");
    assert!(out.contains("forbidden"), "{out}");
    assert!(out.contains("2 refused"), "{out}");
    assert_eq!(c.snapshot(&n.suffix()), before, "{out}");
}

on_both!(
    plan_in_every_form_stores_nothing,
    once_writes_only_what_is_ours,
    builtins_and_the_empty_set_are_safe,
    with_dry_run_stores_nothing_on_any_verb,
    plan_as_a_reader_stores_nothing,
);

/// The manifest registering `b` (kubernetes' sample-apiserver) under our label.
fn wardle_manifest(n: &Names, b: &kube::Backend) -> String {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(&b.ca_pem);
    [
        "apiVersion: apiregistration.k8s.io/v1".to_string(),
        "kind: APIService".into(),
        "metadata:".into(),
        "  name: v1alpha1.wardle.example.com".into(),
        "  labels:".into(),
        format!("    {}: \"true\"", n.label),
        "spec:".into(),
        "  group: wardle.example.com".into(),
        "  version: v1alpha1".into(),
        "  groupPriorityMinimum: 1000".into(),
        "  versionPriority: 15".into(),
        "  service:".into(),
        format!("    namespace: {}", b.namespace),
        format!("    name: {}", b.service),
        format!("    port: {}", b.port),
        format!("  caBundle: {ca}"),
    ]
    .join("\n")
}

/// The condition `Available` of `name` on the real server: (status, reason).
fn available(k: &kube::Kube, name: &str) -> (String, String) {
    let (_, out, _) = k.kubectl(&[
        "get", "apiservice", name, "-o",
        r#"jsonpath={.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].reason}"#,
    ]);
    let mut w = out.split_whitespace().map(String::from);
    (w.next().unwrap_or_default(), w.next().unwrap_or_default())
}

/// Registered means served: the binary registers kubernetes' sample-apiserver (TLS,
/// `caBundle` from its CA) and kube-apiserver's own aggregator serves it; when the
/// backend dies the API turns unavailable, is withdrawn with `--withdraw-unavailable`
/// (discovery is whole again), and is registered and served again when it returns.
#[test]
fn registered_means_served_through_the_real_aggregator() {
    let k = kube::kube();
    let n = Names::new("served");
    let mut backend = k.sample_apiserver(&format!("wardle-{}", n.tag), "api");
    let s = Scratch::new("servers-served");
    s.write("wardle.yaml", &wardle_manifest(&n, &backend));
    let name = "v1alpha1.wardle.example.com";
    let kube_target = Cluster::kube();

    let mut args = n.flags().to_vec();
    args.extend_from_slice(&["--withdraw-unavailable", "2s"]);
    let run = Proc::run(kube_target.target(), &s, &args);
    let served = || {
        k.kubectl(&[
            "get",
            "--raw",
            "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders",
        ])
        .0
    };
    assert!(
        binary::wait_until(|| available(k, name).0 == "True"),
        "{:?}\n{}",
        available(k, name),
        run.log()
    );
    assert!(served(), "GET through kube-apiserver");
    let (ok, resources, err) = k.kubectl(&["api-resources", "--api-group=wardle.example.com"]);
    assert!(ok && resources.contains("flunders"), "{resources}{err}");

    // The backend dies: unavailable, then withdrawn, and discovery is whole again.
    backend.stop();
    assert!(
        binary::wait_until(|| k.get_apiservice(name).is_none()),
        "not withdrawn: {:?}\n{}",
        available(k, name),
        run.log()
    );
    let (ok, _, err) = k.kubectl(&["api-resources"]);
    assert!(ok, "discovery still broken after the withdrawal: {err}");

    // It comes back: registered and served again.
    backend.start();
    assert!(
        binary::wait_until(|| available(k, name).0 == "True" && served()),
        "not restored: {:?}\n{}",
        available(k, name),
        run.log()
    );
    let (code, log) = run.terminate();
    assert_eq!(code, 0, "{log}");
}
