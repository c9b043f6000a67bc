//! The end-to-end cases written once and run against both servers: the test server playing
//! kube-apiserver, and the real kube-apiserver (`make kube`). Each test drives the real
//! binary; each uses its own label key and names, as the real server is shared.
#![cfg(feature = "testing")]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

#[path = "support/binary.rs"]
mod binary;
#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/kube.rs"]
mod kube;
#[path = "support/tls_backend.rs"]
mod tls_backend;

use autoregister::client::{Api, DeleteParams, ListParams};
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

/// Serialises the tests that register sample-apiserver: its group is cluster-wide.
static WARDLE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes the sample-apiserver's turn on the real server: the lock, and no registration
/// left by the test before (its label key is not ours, so we would leave it alone).
fn wardle_turn(k: &kube::Kube) -> std::sync::MutexGuard<'static, ()> {
    let turn = WARDLE.lock().unwrap_or_else(|e| e.into_inner());
    let (ok, out, err) = k.kubectl(&[
        "delete",
        "apiservice",
        "v1alpha1.wardle.example.com",
        "--ignore-not-found",
        "--wait",
    ]);
    assert!(ok, "{out}{err}");
    turn
}

/// The manifest registering `b` (kubernetes' sample-apiserver) under our label, trusting
/// `ca`: a `caBundle` (PEM) or a CA source annotation (`key: value`).
fn wardle_manifest(n: &Names, b: &kube::Backend, ca: WardleCa) -> String {
    use base64::Engine as _;
    let mut lines = vec![
        "apiVersion: apiregistration.k8s.io/v1".to_string(),
        "kind: APIService".into(),
        "metadata:".into(),
        "  name: v1alpha1.wardle.example.com".into(),
        "  labels:".into(),
        format!("    {}: \"true\"", n.label),
    ];
    if let WardleCa::Annotation(k, v) = &ca {
        lines.push("  annotations:".into());
        lines.push(format!("    {k}: {v}"));
    }
    lines.extend([
        "spec:".into(),
        "  group: wardle.example.com".into(),
        "  version: v1alpha1".into(),
        "  groupPriorityMinimum: 1000".into(),
        "  versionPriority: 15".into(),
        "  service:".into(),
        format!("    namespace: {}", b.svc.namespace),
        format!("    name: {}", b.svc.service),
        format!("    port: {}", b.svc.port),
    ]);
    if let WardleCa::Bundle(pem) = &ca {
        let ca = base64::engine::general_purpose::STANDARD.encode(pem);
        lines.push(format!("  caBundle: {ca}"));
    }
    lines.join("\n")
}

/// Where a wardle manifest's CA comes from.
enum WardleCa {
    Bundle(String),
    Annotation(&'static str, String),
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
    let _turn = wardle_turn(k);
    let n = Names::new("served");
    let mut backend = k.sample_apiserver(&format!("wardle-{}", n.tag), "api");
    let s = Scratch::new("servers-served");
    s.write(
        "wardle.yaml",
        &wardle_manifest(&n, &backend, WardleCa::Bundle(backend.ca.pem())),
    );
    let name = "v1alpha1.wardle.example.com";
    let kube_target = Cluster::kube();

    let mut args = n.flags().to_vec();
    // Long enough to see the broken discovery before the withdrawal mends it: the delay
    // runs from the aggregator's transition, and the checks between (kubectl, each up to a
    // second with three test binaries and their servers on 2 cores) took over 5 s once.
    args.extend_from_slice(&["--withdraw-unavailable", "15s"]);
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

    // The backend dies: unavailable, and discovery is broken for the clients of the
    // per-group discovery (namespace deletion, older clients): /apis still lists the group,
    // and its version answers 503.
    backend.stop();
    assert!(binary::wait_until(|| available(k, name).0 == "False"));
    let groups = || k.kubectl(&["get", "--raw", "/apis"]).1;
    let version = || k.kubectl(&["get", "--raw", "/apis/wardle.example.com/v1alpha1"]);
    assert!(groups().contains("\"wardle.example.com\""), "{}", groups());
    let (ok, _, err) = version();
    assert!(!ok && err.contains("unable to handle the request"), "{err}");
    // Withdrawn after the --withdraw-unavailable delay: the group leaves discovery, which
    // is whole again.
    assert!(
        binary::wait_until_for(Duration::from_secs(40), || k.get_apiservice(name).is_none()),
        "not withdrawn: {:?}\n{}",
        available(k, name),
        run.log()
    );
    assert!(!groups().contains("\"wardle.example.com\""), "{}", groups());
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

/// Requests through kube-apiserver's aggregator to sample-apiserver, paced, counted.
struct Traffic {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failed: Arc<Mutex<Vec<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Traffic {
    fn start(k: &'static kube::Kube) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(Mutex::new(Vec::new()));
        let (s, o, f) = (stop.clone(), ok.clone(), failed.clone());
        let thread = std::thread::spawn(move || {
            let api = Api::<kube::Flunder>::namespaced(k.client(), "default");
            while !s.load(Ordering::SeqCst) {
                match api.list(&ListParams::default()) {
                    Ok(_) => {
                        o.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => f.lock().unwrap().push(e.to_string()),
                }
                // A steady stream, not a flood: about 50 requests a second.
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Traffic {
            stop,
            ok,
            failed,
            thread: Some(thread),
        }
    }

    fn ok(&self) -> usize {
        self.ok.load(Ordering::SeqCst)
    }

    fn failed(&self) -> usize {
        self.failed.lock().unwrap().len()
    }

    /// Waits until `n` more requests have succeeded (or any has failed).
    fn pass(&self, n: usize) {
        let want = self.ok() + n;
        assert!(
            binary::wait_until(|| self.ok() >= want || self.failed() > 0),
            "traffic stalled at {} ok",
            self.ok()
        );
    }

    /// Stops; answers (succeeded, failed with their errors).
    fn stop(mut self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        (self.ok(), self.failed.lock().unwrap().clone())
    }
}

/// The `caBundle` of `name` on the real server, decoded.
fn ca_bundle(k: &kube::Kube, name: &str) -> String {
    use base64::Engine as _;
    let v = serde_json::to_value(k.get_apiservice(name).unwrap()).unwrap();
    let b = v["spec"]["caBundle"].as_str().unwrap_or_default();
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b).unwrap()).unwrap()
}

/// A CA rotated through a Secret source (old+new bundle, then the backend's new serving
/// certificate, then new only) under a steady stream of requests through kube-apiserver's
/// aggregator loses none of them; the negative control — the serving certificate changed
/// before the bundle has its CA — loses some, so the test can fail.
#[test]
fn a_ca_rotated_through_a_secret_loses_no_request() {
    let k = kube::kube();
    let _turn = wardle_turn(k);
    let n = Names::new("rotate");
    let backend = k.sample_apiserver(&format!("wardle-{}", n.tag), "api");
    let ns = backend.svc.namespace.clone();
    let ca1 = &backend.ca;
    let (ca2, ca3) = (
        kube::Ca::new("rotation-ca-2"),
        kube::Ca::new("rotation-ca-3"),
    );
    let secret = |pems: &[&kube::Ca]| {
        let bundle: String = pems.iter().map(|c| c.pem()).collect();
        let indented: String = bundle.lines().map(|l| format!("    {l}\n")).collect();
        k.apply(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: backend-ca\n  namespace: {ns}\nstringData:\n  ca.crt: |\n{indented}"
        ));
    };
    secret(&[ca1]);
    let s = Scratch::new("servers-rotate");
    s.write(
        "wardle.yaml",
        &wardle_manifest(
            &n,
            &backend,
            WardleCa::Annotation(
                "autoregister.dev/inject-ca-from-secret",
                format!("{ns}/backend-ca"),
            ),
        ),
    );
    let name = "v1alpha1.wardle.example.com";
    let target = Cluster::kube();
    let run = Proc::run(target.target(), &s, &n.flags());
    assert!(
        binary::wait_until(|| available(k, name).0 == "True"),
        "{:?}\n{}",
        available(k, name),
        run.log()
    );
    let bundle_is = |cas: &[&kube::Ca]| {
        let want: String = cas.iter().map(|c| c.pem()).collect();
        binary::wait_until(|| ca_bundle(k, name).trim() == want.trim())
    };
    assert!(bundle_is(&[ca1]), "{}", run.log());

    let traffic = Traffic::start(k);
    traffic.pass(20);
    // 1. Old and new CA in the bundle.
    secret(&[ca1, &ca2]);
    assert!(bundle_is(&[ca1, &ca2]), "{}", run.log());
    traffic.pass(30);
    // 2. The backend serves a certificate from the new CA.
    backend.serve_from(&ca2);
    traffic.pass(30);
    // 3. New CA only.
    secret(&[&ca2]);
    assert!(bundle_is(&[&ca2]), "{}", run.log());
    traffic.pass(30);
    let (ok, failed) = traffic.stop();
    eprintln!(
        "rotation: {ok} requests through the aggregator, {} failed",
        failed.len()
    );
    assert!(ok >= 100, "only {ok} requests");
    assert!(
        failed.is_empty(),
        "{} of {} failed: {:?}",
        failed.len(),
        ok + failed.len(),
        &failed[..failed.len().min(5)]
    );

    // Negative control: the serving certificate moves to a CA the bundle does not have;
    // the next bundle change (still without it) makes the aggregator dial anew and fail.
    let traffic = Traffic::start(k);
    traffic.pass(10);
    backend.serve_from(&ca3);
    secret(&[&ca2, ca1]);
    assert!(bundle_is(&[&ca2, ca1]), "{}", run.log());
    assert!(
        binary::wait_until(|| traffic.failed() > 0),
        "requests kept passing with a serving certificate the bundle does not trust"
    );
    // The bundle catches up: served again.
    secret(&[&ca3]);
    assert!(bundle_is(&[&ca3]), "{}", run.log());
    let recovered = traffic.ok();
    assert!(
        binary::wait_until(|| traffic.ok() > recovered + 10),
        "not served again"
    );
    let (ok, failed) = traffic.stop();
    eprintln!(
        "negative control: {ok} requests passed, {} failed",
        failed.len()
    );
    assert!(!failed.is_empty());
    let (code, log) = run.terminate();
    assert_eq!(code, 0, "{log}");
}

/// What kube-apiserver answers to writes it refuses — APIService validation, strict field
/// validation, bad options — the test server answers alike: code, reason and message. Each
/// case is sent to both; the real server is the judge.
#[test]
fn refusals_match_kube_apiserver_word_for_word() {
    let real = Cluster::kube();
    let test = Cluster::test_server();
    let n = Names::new("refuse");
    let base = |x: &str| binary::object(&n.group(x), &[], 10);
    let mut cases: Vec<(&str, Value)> = Vec::new();
    let mut v = base("prio");
    v["spec"]["versionPriority"] = 0.into();
    cases.push(("versionPriority 0", v));
    let mut v = base("gprio");
    v["spec"]["groupPriorityMinimum"] = 20001.into();
    cases.push(("groupPriorityMinimum too high", v));
    let mut v = base("name");
    v["metadata"]["name"] = format!("v2.{}", n.group("name")).into();
    cases.push(("name not version.group", v));
    let mut v = base("port");
    v["spec"]["service"]["port"] = 70000.into();
    cases.push(("port out of range", v));
    let mut v = base("ca");
    v["spec"]["caBundle"] = "Zm9v".into();
    cases.push(("insecure with a caBundle", v));
    let mut v = base("nosvc");
    v["spec"]["service"]["name"] = "".into();
    cases.push(("service without a name", v));
    let mut v = base("unknown");
    v["spec"]["servce"] = serde_json::json!({"name": "x"});
    cases.push(("unknown field (strict)", v));
    let mut v = base("group");
    v["spec"]["group"] = "Not_A.Group".into();
    v["metadata"]["name"] = "v1.Not_A.Group".into();
    cases.push(("bad group", v));

    let answer = |c: &Cluster, obj: &Value| -> String {
        let a: autoregister::api::APIService = serde_json::from_value(obj.clone()).unwrap();
        match c.api().create(&a) {
            Ok(_) => "created".to_string(),
            Err(autoregister::client::Error::Api(e)) => format!(
                "{} {} {}",
                e.code,
                e.status.reason.as_deref().unwrap_or(""),
                e.status.message.as_deref().unwrap_or("")
            ),
            Err(e) => format!("error: {e}"),
        }
    };
    let mut differ = Vec::new();
    for (what, obj) in &cases {
        let (r, t) = (answer(&real, obj), answer(&test, obj));
        assert_ne!(r, "created", "{what}: the real server accepted it");
        if r != t {
            differ.push(format!(
                "{what}:\n  kube-apiserver: {r}\n  test server:    {t}"
            ));
        }
    }
    // A JSON patch whose result has a field APIService lacks: refused on the field
    // `patch` with the patched object as its value. That object differs between the two
    // (uid, times, resourceVersion), so it is checked to be the patched object, then masked.
    let patched_answer = |c: &Cluster| -> String {
        let obj = c.create(base("patch"));
        let name = obj.metadata.name.clone().unwrap_or_default().to_string();
        let ops =
            serde_json::json!([{"op": "add", "path": "/spec/servce", "value": {"name": "x"}}]);
        let answer = match c.api().json_patch(&name, &ops) {
            Ok(_) => "patched".to_string(),
            Err(autoregister::client::Error::Api(e)) => {
                let cause = e.status.details.as_ref().and_then(|d| d.causes.first());
                format!(
                    "{} {} {} | cause {:?} on {:?}",
                    e.code,
                    e.status.reason.as_deref().unwrap_or(""),
                    e.status.message.as_deref().unwrap_or(""),
                    cause.and_then(|c| c.reason.as_deref()),
                    cause.and_then(|c| c.field.as_deref()),
                )
            }
            Err(e) => format!("error: {e}"),
        };
        c.api().delete(&name, &Default::default()).unwrap();
        let (head, rest) = answer
            .split_once("Invalid value: \"")
            .unwrap_or((&answer, ""));
        let Some((value, tail)) = rest.split_once("\": strict decoding error") else {
            return answer;
        };
        let value: String = serde_json::from_str(&format!("\"{value}\"")).unwrap();
        let patched: Value = serde_json::from_str(&value).unwrap();
        assert_eq!(patched["metadata"]["name"], name, "{answer}");
        assert_eq!(patched["spec"]["servce"]["name"], "x", "{answer}");
        format!("{head}Invalid value: <the patched object>: strict decoding error{tail}")
    };
    let (r, t) = (patched_answer(&real), patched_answer(&test));
    assert_ne!(r, "patched", "the real server took an unknown field");
    if r != t {
        differ.push(format!(
            "patch adding an unknown field:\n  kube-apiserver: {r}\n  test server:    {t}"
        ));
    }
    assert!(
        differ.is_empty(),
        "the test server answers differently:\n{}",
        differ.join("\n")
    );
}
