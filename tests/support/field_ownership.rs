//! Field ownership through the binary, as bodies that take the cluster under test
//! (`cluster::Cluster`): the test server playing kube-apiserver, and the real
//! kube-apiserver, whose `managedFields` are the oracle. Each body talks to the cluster
//! through the binary and a client (for what other writers do and what the object holds),
//! uses names and a label key of its own, and deletes what it created.
//!
//! Use with `mod binary;`, `mod kube;`, `mod cluster;` and this module from `support/`.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use autoregister::api::{APIService, Event};
use autoregister::client::{Api, DeleteParams, ListParams};
use serde_json::{json, Value};

use crate::binary::{wait_until, wait_until_for, Proc, Scratch, WAIT};
use crate::cluster::{tag, Cluster};

/// The manager cert-manager's cainjector writes as.
pub const INJECTOR: &str = "cainjector";
/// The manager older versions of this program wrote as (the binary still does).
pub const OURS: &str = "autoregister";

/// The CA bundle the injector writes.
pub fn injected() -> &'static [u8] {
    static PEM: OnceLock<Vec<u8>> = OnceLock::new();
    PEM.get_or_init(|| self_signed_ca("injected CA"))
}

/// The CA bundle a manifest declares (the manifest loader checks it is X.509).
pub fn declared() -> &'static [u8] {
    static PEM: OnceLock<Vec<u8>> = OnceLock::new();
    PEM.get_or_init(|| self_signed_ca("declared CA"))
}

/// A self-signed CA certificate named `cn`, PEM.
fn self_signed_ca(cn: &str) -> Vec<u8> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.not_after = rcgen::date_time_ymd(2040, 1, 1);
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem().into_bytes()
}

/// APIServices on `c`, written as `manager`.
pub fn api_as(c: &Cluster, manager: &str) -> Api<APIService> {
    Api::all(c.client()).with_field_manager(manager)
}

/// The object `name`, if any.
pub fn get(c: &Cluster, name: &str) -> Option<APIService> {
    c.api().get(name).ok()
}

/// The managedFields entry of `manager` for `operation` on `name`, as JSON.
pub fn entry(c: &Cluster, name: &str, manager: &str, operation: &str) -> Option<Value> {
    let o = c.get(name)?;
    o["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
        .cloned()
}

/// The `(manager, operation)` of each managedFields entry of `name` on the main resource.
pub fn managers(c: &Cluster, name: &str) -> Vec<(String, String)> {
    let o = c.get(name).unwrap_or(Value::Null);
    o["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e.get("subresource").is_none_or(Value::is_null))
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or("").to_string(),
                e["operation"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The Events about `name` with `reason` (the controller records them in `default`).
pub fn events(c: &Cluster, name: &str, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(c.client(), "default")
        .list(&ListParams::default())
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.regarding.name == name && e.reason == reason)
        .collect()
}

/// Deletes `names` (best effort: a body cleans up after itself on a shared cluster).
pub fn delete(c: &Cluster, names: &[&str]) {
    for n in names {
        let _ = c.api().delete(n, &DeleteParams::default());
    }
}

/// Names and label key of one body's run, apart from every other body's.
pub struct Names {
    /// The API group, `<tag>.fields.example.com`.
    pub group: String,
    /// The APIService, `v1.<group>`.
    pub name: String,
    /// The ownership label key the binary runs with.
    pub key: String,
}

impl Names {
    /// The names of one run of `test` (lower-case letters, digits, `-`), apart from every
    /// other run's.
    pub fn new(test: &str) -> Names {
        let tag = tag(test);
        let group = format!("{tag}.fields.example.com");
        Names {
            name: format!("v1.{group}"),
            group,
            key: format!("{tag}.fields.autoregister.dev/automanaged"),
        }
    }

    /// The Service name the APIService points at (none exists: nothing dials it).
    pub fn backend(&self) -> String {
        format!("{}-backend", self.group.split('.').next().unwrap_or("x"))
    }

    /// `--label-key <key>` and `extra`, for the binary.
    pub fn args<'a>(&'a self, extra: &[&'a str]) -> Vec<&'a str> {
        let mut a = vec!["--label-key", self.key.as_str()];
        a.extend_from_slice(extra);
        a
    }
}

/// A manifest for `n` with the given extra metadata and spec lines (YAML, indented for
/// their place).
pub fn manifest(n: &Names, metadata: &str, spec: &str) -> String {
    format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {}\n{metadata}\
         spec:\n  group: {}\n  version: v1\n  groupPriorityMinimum: 100\n  versionPriority: 10\n  \
         service:\n    namespace: default\n    name: {}\n{spec}",
        n.name,
        n.group,
        n.backend(),
    )
}

/// `caBundle: <base64 of bundle>` as a spec line.
pub fn ca_bundle_line(bundle: &[u8]) -> String {
    use base64::Engine as _;
    format!(
        "  caBundle: {}\n",
        base64::engine::general_purpose::STANDARD.encode(bundle)
    )
}

/// How an injector writes its bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// An update of the whole object as [`INJECTOR`], as cert-manager's cainjector does.
    Update,
    /// A server-side apply of `spec.caBundle` alone (forced) as [`APPLIER`], as a
    /// controller that applies does (the stand-in for OpenShift's service-ca).
    Apply,
}

/// The manager of the applying injector.
pub const APPLIER: &str = "service-ca";

/// An APIService configuration that sets only what it names (a typed APIService always
/// sends both priorities): what an injector applies.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Partial {
    api_version: String,
    kind: String,
    metadata: autoregister::api::ObjectMeta,
    spec: Value,
}

impl autoregister::api::Resource for Partial {
    const GROUP: &'static str = "apiregistration.k8s.io";
    const VERSION: &'static str = "v1";
    const KIND: &'static str = "APIService";
    const PLURAL: &'static str = "apiservices";
    const NAMESPACED: bool = false;

    fn meta(&self) -> &autoregister::api::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut autoregister::api::ObjectMeta {
        &mut self.metadata
    }
}

/// Plays an injector beside the controller: whenever the object's `spec.caBundle` is not
/// its bundle, it writes it back (cainjector reacts to every change of the object; this
/// looks every 10 ms).
pub struct Injector {
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Injector {
    /// Starts injecting `bundle` into `name` with updates, as cainjector.
    pub fn start(c: &Cluster, name: &str, bundle: &'static [u8]) -> Injector {
        Injector::start_writing(c, name, bundle, Writes::Update)
    }

    /// Starts injecting `bundle` into `name`, written as `how` says.
    pub fn start_writing(c: &Cluster, name: &str, bundle: &'static [u8], how: Writes) -> Injector {
        let api = api_as(c, INJECTOR);
        let applier = Api::<Partial>::all(c.client()).with_field_manager(APPLIER);
        let name = name.to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicUsize::new(0));
        let write = move |o: &mut APIService| match how {
            Writes::Update => {
                o.spec.ca_bundle = Some(bundle.to_vec().into_boxed_slice());
                api.update(o).is_ok()
            }
            Writes::Apply => {
                use base64::Engine as _;
                let config = Partial {
                    api_version: "apiregistration.k8s.io/v1".into(),
                    kind: "APIService".into(),
                    metadata: autoregister::api::ObjectMeta::named(
                        o.metadata.name.clone().unwrap_or_default(),
                    ),
                    spec: json!({"caBundle": base64::engine::general_purpose::STANDARD.encode(bundle)}),
                };
                applier.apply_unread(&config, true).is_ok()
            }
        };
        let reader = api_as(c, INJECTOR);
        let thread = {
            let (stop, writes) = (stop.clone(), writes.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if let Ok(mut o) = reader.get(&name) {
                        // A conflict means someone wrote in between: look again.
                        if o.spec.ca_bundle.as_deref() != Some(bundle) && write(&mut o) {
                            writes.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        };
        Injector {
            stop,
            writes,
            thread: Some(thread),
        }
    }

    /// Stops; answers how many times it wrote its bundle.
    pub fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.writes.load(Ordering::SeqCst)
    }
}

impl Drop for Injector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The log lines of `log` about `name`'s writes of `verb` (`create`, `update`, ...) that
/// succeeded.
fn our_writes<'a>(log: &'a str, name: &str, verb: &str) -> Vec<&'a str> {
    log.lines()
        .filter(|l| {
            l.contains(&format!("{name} "))
                && l.contains(&format!(" {verb} ("))
                && l.ends_with(": ok")
        })
        .collect()
}

/// The time a log line was written (its RFC 3339 timestamp).
pub fn logged_at(line: &str) -> SystemTime {
    let stamp = line.split_whitespace().next().unwrap_or("");
    autoregister::api::time::parse_rfc3339(stamp).unwrap_or_else(|| panic!("no timestamp: {line}"))
}

/// Runs the binary (`run`) against `c` with `n`'s label key and `extra`.
fn run(c: &Cluster, s: &Scratch, n: &Names, extra: &[&str]) -> Proc {
    Proc::run(c.target(), s, &n.args(extra))
}

/// `run --once` against `c`; the exit code and the log.
fn run_once(c: &Cluster, s: &Scratch, n: &Names, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["--once"];
    args.extend_from_slice(extra);
    Proc::run(c.target(), s, &n.args(&args)).wait_exit(WAIT)
}

/// With an injector beside it, an APIService whose manifest has no `caBundle` keeps the
/// injected one for `quiet`, with no write of ours after the create: the field is the
/// injector's, not a difference. (The aggregator's availability controller writes the
/// status meanwhile: our entry in managedFields and our log are the oracle, not the
/// resourceVersion.)
pub fn an_injected_ca_bundle_is_kept_with_no_write_of_ours(c: &Cluster, quiet: Duration) {
    a_ca_bundle_written_by_another_manager_is_kept(c, quiet, Writes::Update);
}

/// The same beside a manager that applies `caBundle` (its own `Apply` entry).
pub fn an_applied_ca_bundle_is_kept_with_no_write_of_ours(c: &Cluster, quiet: Duration) {
    a_ca_bundle_written_by_another_manager_is_kept(c, quiet, Writes::Apply);
}

fn a_ca_bundle_written_by_another_manager_is_kept(c: &Cluster, quiet: Duration, how: Writes) {
    let n = Names::new("kept");
    let s = Scratch::new("fields-kept");
    // cert-manager's own annotation: it is what makes cainjector inject.
    let meta = "  annotations:\n    cert-manager.io/inject-ca-from: default/backend-tls\n";
    s.write("a.yaml", &manifest(&n, meta, ""));
    let p = run(c, &s, &n, &[]);
    assert!(wait_until(|| get(c, &n.name).is_some()), "{}", p.log());
    let injector = Injector::start_writing(c, &n.name, injected(), how);
    assert!(
        wait_until(
            || get(c, &n.name).is_some_and(|o| o.spec.ca_bundle.as_deref() == Some(injected()))
        ),
        "never injected\n{}",
        p.log()
    );
    let ours = || {
        (
            entry(c, &n.name, OURS, "Update"),
            entry(c, &n.name, OURS, "Apply"),
        )
    };
    let before = ours();
    assert!(before.0.is_some(), "created by us: {:?}", c.get(&n.name));
    // For the whole period: the injected bundle stays, and what we own does not move.
    let until = Instant::now() + quiet;
    while Instant::now() < until {
        let o = get(c, &n.name).unwrap();
        assert_eq!(o.spec.ca_bundle.as_deref(), Some(injected()), "{}", p.log());
        assert_eq!(ours(), before, "we wrote again\n{}", p.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let injected_writes = injector.stop();
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        injected_writes, 1,
        "the injector had to inject again: {log}"
    );
    assert_eq!(our_writes(&log, &n.name, "create").len(), 1, "{log}");
    for verb in ["update", "adopt", "delete"] {
        assert!(our_writes(&log, &n.name, verb).is_empty(), "{log}");
    }
    assert!(!log.contains("FieldFight"), "{log}");
    let theirs = match how {
        Writes::Update => entry(c, &n.name, INJECTOR, "Update"),
        Writes::Apply => entry(c, &n.name, APPLIER, "Apply"),
    }
    .unwrap_or_default();
    assert_eq!(
        theirs["fieldsV1"]["f:spec"]["f:caBundle"],
        json!({}),
        "{theirs}"
    );
    delete(c, &[&n.name]);
}

/// A manifest that declares `caBundle` beside an injector: the controller puts its bundle
/// back, each further put-back paced by the workqueue's per-key backoff (5 ms doubling),
/// and reports the fight once (log line and Warning Event `FieldFight`) naming the
/// injector. `observe` is how long the fight is watched after its report.
pub fn a_declared_ca_bundle_beside_an_injector_is_one_reported_paced_fight(
    c: &Cluster,
    observe: Duration,
) {
    let n = Names::new("fight");
    let s = Scratch::new("fields-fight");
    s.write("a.yaml", &manifest(&n, "", &ca_bundle_line(declared())));
    let p = run(c, &s, &n, &[]);
    assert!(
        wait_until(
            || get(c, &n.name).is_some_and(|o| o.spec.ca_bundle.as_deref() == Some(declared()))
        ),
        "{}",
        p.log()
    );
    let started = Instant::now();
    let injector = Injector::start(c, &n.name, injected());
    let report = format!(
        "{}: FieldFight: spec.caBundle is also written by {INJECTOR}; remove it from the \
         manifest or the injector's annotation",
        n.name
    );
    assert!(
        wait_until(|| p.log().contains(&report)),
        "no report naming the injector\n{}",
        p.log()
    );
    std::thread::sleep(observe);
    let fought = started.elapsed();
    injector.stop();
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    assert_eq!(log.matches("FieldFight").count(), 1, "reported once: {log}");
    assert!(
        wait_until(|| events(c, &n.name, "FieldFight").len() == 1),
        "{:?}",
        events(c, &n.name, "FieldFight")
    );
    let ev = &events(c, &n.name, "FieldFight")[0];
    assert_eq!(ev.type_, "Warning");
    assert!(ev.note.contains(INJECTOR), "{:?}", ev.note);
    // Put-backs: each further one at least twice the wait of the one before (5 ms, 10 ms,
    // 20 ms, ...), so a fight costs a few writes, not ~65 a second.
    let puts: Vec<SystemTime> = our_writes(&log, &n.name, "update")
        .into_iter()
        .map(logged_at)
        .collect();
    assert!(puts.len() >= 5, "{log}");
    let gaps: Vec<u128> = puts
        .windows(2)
        .map(|p| p[1].duration_since(p[0]).unwrap_or_default().as_millis())
        .collect();
    eprintln!("{} put-backs in {fought:?}, gaps (ms) {gaps:?}", puts.len());
    for (k, pair) in puts.windows(2).enumerate() {
        let gap = pair[1].duration_since(pair[0]).unwrap_or_default();
        let pace = Duration::from_millis(5) * (1u32 << k.min(20));
        assert!(
            gap + Duration::from_millis(1) >= pace,
            "put-back {} came {gap:?} after the one before, within its pace {pace:?}\n{log}",
            k + 2
        );
    }
    // 5 ms doubling: n put-backs take at least 5 ms · (2^(n-1) - 1).
    let most = 2 + (fought.as_millis() as f64 / 5.0).log2().ceil() as usize;
    assert!(
        puts.len() <= most,
        "{} put-backs in {fought:?}\n{log}",
        puts.len()
    );
    delete(c, &[&n.name]);
}

/// A field the manifest stops declaring (a label, an annotation, a spec field) is removed
/// from the object; a field another manager wrote beside ours stays.
pub fn a_field_dropped_from_the_manifest_is_removed(c: &Cluster) {
    let n = Names::new("dropped");
    let s = Scratch::new("fields-dropped");
    let full = "  labels:\n    team: storage\n  annotations:\n    note: declared\n";
    s.write(
        "a.yaml",
        &manifest(&n, full, "  insecureSkipTLSVerify: true\n"),
    );
    let p = run(c, &s, &n, &[]);
    assert!(
        wait_until(|| get(c, &n.name).is_some_and(
            |o| o.spec.insecure_skip_tls_verify && o.metadata.label("team") == Some("storage")
        )),
        "{}",
        p.log()
    );
    // Another writer labels the object: its label is its own.
    let other = api_as(c, "labeller");
    assert!(wait_until(|| {
        let mut o = other.get(&n.name).unwrap();
        o.metadata.set_label("cost-center", "42");
        other.update(&o).is_ok()
    }));
    s.write("a.yaml", &manifest(&n, "", ""));
    assert!(
        wait_until(
            || get(c, &n.name).is_some_and(|o| !o.spec.insecure_skip_tls_verify
                && o.metadata.label("team").is_none()
                && o.metadata
                    .annotations
                    .as_ref()
                    .is_none_or(|a| a.get("note").is_none()))
        ),
        "the dropped fields stayed: {:?}\n{}",
        c.get(&n.name),
        p.log()
    );
    let o = get(c, &n.name).unwrap();
    assert_eq!(
        o.metadata.label("cost-center"),
        Some("42"),
        "not ours: kept"
    );
    assert_eq!(o.metadata.label(&n.key), Some("true"));
    assert_eq!(o.spec.version_priority, 10);
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    delete(c, &[&n.name]);
}

/// An object written the old way (created and updated with `update` as `autoregister`,
/// as earlier versions did) is taken over by the first apply: a field its manifest then
/// no longer declares is removed, and our `update` entry is gone into our `apply` entry.
pub fn an_object_written_by_update_migrates_and_drops_a_field(c: &Cluster) {
    let n = Names::new("migrated");
    let old = api_as(c, OURS);
    let obj: APIService = serde_json::from_value(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": n.name, "labels": {n.key.as_str(): "true", "team": "storage"}},
        "spec": {"group": n.group, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 5,
                 "insecureSkipTLSVerify": true,
                 "service": {"namespace": "default", "name": n.backend()}},
    }))
    .unwrap();
    old.create(&obj).unwrap();
    // The aggregator may have written the status meanwhile: an update goes on the fresh one.
    assert!(wait_until(|| {
        let mut fresh = old.get(&n.name).unwrap();
        fresh.spec.version_priority = 10;
        old.update(&fresh).is_ok()
    }));
    assert_eq!(managers(c, &n.name), [(OURS.into(), "Update".into())]);
    let s = Scratch::new("fields-migrated");
    s.write("a.yaml", &manifest(&n, "", ""));
    let p = run(c, &s, &n, &[]);
    assert!(
        wait_until(|| get(c, &n.name).is_some_and(
            |o| !o.spec.insecure_skip_tls_verify && o.metadata.label("team").is_none()
        )),
        "{:?}\n{}",
        c.get(&n.name),
        p.log()
    );
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    let managers = managers(c, &n.name);
    assert!(
        managers.contains(&(OURS.into(), "Apply".into()))
            && !managers.contains(&(OURS.into(), "Update".into())),
        "{managers:?}"
    );
    let o = get(c, &n.name).unwrap();
    assert_eq!(o.metadata.label(&n.key), Some("true"));
    assert_eq!(o.spec.version_priority, 10);
    delete(c, &[&n.name]);
}

/// An object someone else created, adopted with `--adopt`: its declared fields become
/// ours alone, so a field the manifest later drops is removed; the rest stays theirs.
pub fn an_adopted_object_releases_a_field_its_manifest_drops(c: &Cluster) {
    let n = Names::new("adopted");
    let theirs: APIService = serde_json::from_value(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": n.name, "labels": {"app": "helm-release"}},
        "spec": {"group": n.group, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
                 "insecureSkipTLSVerify": true,
                 "service": {"namespace": "default", "name": n.backend()}},
    }))
    .unwrap();
    let uid = api_as(c, "helm").create(&theirs).unwrap().metadata.uid;
    let s = Scratch::new("fields-adopted");
    s.write(
        "a.yaml",
        &manifest(&n, "", "  insecureSkipTLSVerify: true\n"),
    );
    let (code, log) = run_once(c, &s, &n, &["--adopt"]);
    assert_eq!(code, 0, "{log}");
    let o = get(c, &n.name).unwrap();
    assert_eq!(o.metadata.uid, uid, "in place");
    assert_eq!(o.metadata.label(&n.key), Some("true"));
    s.write("a.yaml", &manifest(&n, "", ""));
    let (code, log) = run_once(c, &s, &n, &[]);
    assert_eq!(code, 0, "{log}");
    let o = get(c, &n.name).unwrap();
    assert!(!o.spec.insecure_skip_tls_verify, "{:?}", c.get(&n.name));
    assert_eq!(
        o.metadata.label("app"),
        Some("helm-release"),
        "theirs: kept"
    );
    delete(c, &[&n.name]);
}

/// `plan` lists, under our object, the field another manager set and the manifest leaves
/// alone (`spec.caBundle: kept, set by cainjector`), plans no write for it, and dry-runs
/// a planned apply (`dryRun=All`) without storing it.
pub fn plan_shows_a_kept_field_and_its_manager(c: &Cluster) {
    let n = Names::new("plan");
    let s = Scratch::new("fields-plan");
    s.write("a.yaml", &manifest(&n, "", ""));
    let (code, log) = run_once(c, &s, &n, &[]);
    assert_eq!(code, 0, "{log}");
    let injector = api_as(c, INJECTOR);
    assert!(wait_until(|| {
        let mut o = injector.get(&n.name).unwrap();
        o.spec.ca_bundle = Some(injected().to_vec().into_boxed_slice());
        injector.update(&o).is_ok()
    }));
    let plan = |extra: &[&str]| {
        Proc::command("plan", c.target(), &s, &n.args(extra)).wait_exit_stdout_first(WAIT)
    };
    let (code, out) = plan(&[]);
    assert_eq!(code, 0, "{out}");
    let entry: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with(&format!("{} ", n.name)))
        .take_while(|l| l.starts_with(&n.name) || l.starts_with("    "))
        .collect();
    assert!(entry[0].contains(" none "), "{out}");
    assert!(
        entry.contains(&format!("    spec.caBundle: kept, set by {INJECTOR}").as_str()),
        "{out}"
    );
    let (code, out) = plan(&["-o", "json"]);
    assert_eq!(code, 0, "{out}");
    // stdout first (the JSON document), then stderr.
    let doc: Value = serde_json::Deserializer::from_str(&out)
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    let item = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == n.name.as_str())
        .unwrap();
    assert_eq!(
        item["kept"],
        json!([{"field": "spec.caBundle", "managers": [INJECTOR]}])
    );
    // A changed manifest: the same apply `run` would send, dry-run, stores nothing.
    let before = get(c, &n.name).unwrap();
    s.write(
        "a.yaml",
        &manifest(&n, "", "").replace("versionPriority: 10", "versionPriority: 11"),
    );
    let (code, out) = plan(&[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("spec.versionPriority: 10 → 11") && out.contains("dry run: accepted"),
        "{out}"
    );
    let after = get(c, &n.name).unwrap();
    assert_eq!(after.spec, before.spec, "a dry run stored nothing");
    assert_eq!(after.metadata.labels, before.metadata.labels);
    delete(c, &[&n.name]);
}

/// Waits until `cond` holds, for up to `timeout`, polling every 20 ms.
pub fn wait_for(timeout: Duration, cond: impl FnMut() -> bool) -> bool {
    wait_until_for(timeout, cond)
}
