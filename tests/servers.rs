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

on_both!(
    plan_in_every_form_stores_nothing,
    once_writes_only_what_is_ours,
    builtins_and_the_empty_set_are_safe,
);
