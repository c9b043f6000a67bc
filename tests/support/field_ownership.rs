//! Field ownership through the binary, as bodies that take the cluster under test: the
//! test server here (tests/field_ownership.rs), the real kube-apiserver elsewhere. Each
//! body talks to the cluster only through its kubeconfig (the binary, and a client for
//! what other writers do and what the object holds), uses names and a label key of its
//! own (`tag`), and deletes what it created.
//!
//! Use with `#[path = "support/binary.rs"] mod binary;` and
//! `#[path = "support/field_ownership.rs"] mod field_ownership;` at a test crate's root.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use autoregister::api::{APIService, Event};
use autoregister::client::{Api, Client, Config, ConnectOptions, DeleteParams, ListParams};
use serde_json::{json, Value};

use crate::binary::{wait_until, wait_until_for, Proc, Scratch, WAIT};

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

/// The cluster under test.
pub struct Cluster {
    /// A kubeconfig for it (the binary's `--kubeconfig`).
    pub kubeconfig: PathBuf,
    client: Client,
}

impl Cluster {
    /// The cluster `kubeconfig` names.
    pub fn new(kubeconfig: &Path) -> Cluster {
        let config = Config::infer(&ConnectOptions {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        Cluster {
            kubeconfig: kubeconfig.to_path_buf(),
            client: Client::new(config).unwrap(),
        }
    }

    /// APIServices, written as `manager`.
    pub fn api(&self, manager: &str) -> Api<APIService> {
        Api::all(self.client.clone()).with_field_manager(manager)
    }

    /// The object `name`, if any.
    pub fn get(&self, name: &str) -> Option<APIService> {
        self.api(OURS).get(name).ok()
    }

    /// The object `name` as JSON (managedFields included), if any.
    pub fn get_json(&self, name: &str) -> Option<Value> {
        self.get(name).map(|o| serde_json::to_value(o).unwrap())
    }

    /// The `(manager, operation)` of each managedFields entry of `name`.
    pub fn managers(&self, name: &str) -> Vec<(String, String)> {
        let o = self.get_json(name).unwrap_or(Value::Null);
        o["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    e["manager"].as_str().unwrap_or("").to_string(),
                    e["operation"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    /// The Events about `name` with `reason` (the controller records them in `default`).
    pub fn events(&self, name: &str, reason: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), "default")
            .list(&ListParams::default())
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.regarding.name == name && e.reason == reason)
            .collect()
    }

    /// Deletes `names` (best effort: a body cleans up after itself on a shared cluster).
    pub fn delete(&self, names: &[&str]) {
        for n in names {
            let _ = self.api(OURS).delete(n, &DeleteParams::default());
        }
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
    /// The names of a run tagged `tag` (lower-case letters, digits, `-`).
    pub fn new(tag: &str) -> Names {
        let group = format!("{tag}.fields.example.com");
        Names {
            name: format!("v1.{group}"),
            group,
            key: format!("{tag}.fields.autoregister.dev/automanaged"),
        }
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
         service:\n    namespace: default\n    name: {}-backend\n{spec}",
        n.name,
        n.group,
        n.group.split('.').next().unwrap_or("x"),
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

/// Plays cert-manager's cainjector beside the controller: whenever the object's
/// `spec.caBundle` is not its bundle, it writes it back with an update as [`INJECTOR`]
/// (cainjector reacts to every change of the object; this looks every 10 ms).
pub struct Injector {
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Injector {
    /// Starts injecting `bundle` into `name`.
    pub fn start(c: &Cluster, name: &str, bundle: &'static [u8]) -> Injector {
        let api = c.api(INJECTOR);
        let name = name.to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (stop, writes) = (stop.clone(), writes.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if let Ok(mut o) = api.get(&name) {
                        if o.spec.ca_bundle.as_deref() != Some(bundle) {
                            o.spec.ca_bundle = Some(bundle.to_vec().into_boxed_slice());
                            // A conflict means someone wrote in between: look again.
                            if api.update(&o).is_ok() {
                                writes.fetch_add(1, Ordering::SeqCst);
                            }
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
fn logged_at(line: &str) -> SystemTime {
    let stamp = line.split_whitespace().next().unwrap_or("");
    autoregister::api::time::parse_rfc3339(stamp).unwrap_or_else(|| panic!("no timestamp: {line}"))
}

/// With an injector beside it, an APIService whose manifest has no `caBundle` keeps the
/// injected one for `quiet`, with no write of ours after the create: the field is the
/// injector's, not a difference.
pub fn an_injected_ca_bundle_is_kept_with_no_write_of_ours(
    c: &Cluster,
    tag: &str,
    quiet: Duration,
) {
    let n = Names::new(tag);
    let s = Scratch::new(tag);
    // cert-manager's own annotation: it is what makes cainjector inject.
    let meta = "  annotations:\n    cert-manager.io/inject-ca-from: default/backend-tls\n";
    s.write("a.yaml", &manifest(&n, meta, ""));
    let p = Proc::run_with_kubeconfig(&c.kubeconfig, &s, &n.args(&[]));
    assert!(wait_until(|| c.get(&n.name).is_some()), "{}", p.log());
    let injector = Injector::start(c, &n.name, injected());
    assert!(
        wait_until(|| c
            .get(&n.name)
            .is_some_and(|o| o.spec.ca_bundle.as_deref() == Some(injected()))),
        "never injected\n{}",
        p.log()
    );
    let version = c.get(&n.name).unwrap().metadata.resource_version;
    // For the whole period: the injected bundle stays and nobody writes the object.
    let until = Instant::now() + quiet;
    while Instant::now() < until {
        let o = c.get(&n.name).unwrap();
        assert_eq!(
            o.metadata.resource_version,
            version,
            "the object was written again\n{}",
            p.log()
        );
        assert_eq!(o.spec.ca_bundle.as_deref(), Some(injected()));
        std::thread::sleep(Duration::from_millis(50));
    }
    let injected = injector.stop();
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    assert_eq!(injected, 1, "the injector had to inject again: {log}");
    assert_eq!(our_writes(&log, &n.name, "create").len(), 1, "{log}");
    for verb in ["update", "adopt", "delete"] {
        assert!(our_writes(&log, &n.name, verb).is_empty(), "{log}");
    }
    assert!(!log.contains("FieldFight"), "{log}");
    let kept = c.get_json(&n.name).unwrap();
    let theirs = kept["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == INJECTOR)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        theirs["fieldsV1"]["f:spec"]["f:caBundle"],
        json!({}),
        "{kept}"
    );
    c.delete(&[&n.name]);
}

/// A manifest that declares `caBundle` beside an injector: the controller puts its bundle
/// back, each further put-back paced by the workqueue's per-key backoff (5 ms doubling),
/// and reports the fight once (log line and Warning Event `FieldFight`) naming the
/// injector. `observe` is how long the fight is watched after its report.
pub fn a_declared_ca_bundle_beside_an_injector_is_one_reported_paced_fight(
    c: &Cluster,
    tag: &str,
    observe: Duration,
) {
    let n = Names::new(tag);
    let s = Scratch::new(tag);
    s.write("a.yaml", &manifest(&n, "", &ca_bundle_line(declared())));
    let p = Proc::run_with_kubeconfig(&c.kubeconfig, &s, &n.args(&[]));
    assert!(
        wait_until(|| c
            .get(&n.name)
            .is_some_and(|o| o.spec.ca_bundle.as_deref() == Some(declared()))),
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
    let events = c.events(&n.name, "FieldFight");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].type_, "Warning");
    assert!(events[0].note.contains(INJECTOR), "{:?}", events[0].note);
    // Put-backs: the first at once, each further one at least twice the wait of the one
    // before (5 ms, 10 ms, 20 ms, ...), so a fight costs a few writes, not ~65 a second.
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
    c.delete(&[&n.name]);
}

/// A field the manifest stops declaring (a label, an annotation, a spec field) is removed
/// from the object; a field another manager wrote beside ours stays.
pub fn a_field_dropped_from_the_manifest_is_removed(c: &Cluster, tag: &str) {
    let n = Names::new(tag);
    let s = Scratch::new(tag);
    let full = "  labels:\n    team: storage\n  annotations:\n    note: declared\n";
    s.write(
        "a.yaml",
        &manifest(&n, full, "  insecureSkipTLSVerify: true\n"),
    );
    let p = Proc::run_with_kubeconfig(&c.kubeconfig, &s, &n.args(&[]));
    assert!(
        wait_until(|| c.get(&n.name).is_some_and(
            |o| o.spec.insecure_skip_tls_verify && o.metadata.label("team") == Some("storage")
        )),
        "{}",
        p.log()
    );
    // Another writer labels the object: its label is its own.
    let other = c.api("labeller");
    let mut o = other.get(&n.name).unwrap();
    o.metadata.set_label("cost-center", "42");
    other.update(&o).unwrap();
    s.write("a.yaml", &manifest(&n, "", ""));
    assert!(
        wait_until(|| c
            .get(&n.name)
            .is_some_and(|o| !o.spec.insecure_skip_tls_verify
                && o.metadata.label("team").is_none()
                && o.metadata
                    .annotations
                    .as_ref()
                    .is_none_or(|a| a.get("note").is_none()))),
        "the dropped fields stayed: {:?}\n{}",
        c.get_json(&n.name),
        p.log()
    );
    let o = c.get(&n.name).unwrap();
    assert_eq!(
        o.metadata.label("cost-center"),
        Some("42"),
        "not ours: kept"
    );
    assert_eq!(o.metadata.label(&n.key), Some("true"));
    assert_eq!(o.spec.version_priority, 10);
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    c.delete(&[&n.name]);
}

/// An object written the old way (created and updated with `update` as `autoregister`,
/// as earlier versions did) is taken over by the first apply: a field its manifest then
/// no longer declares is removed, and our `update` entry is gone into our `apply` entry.
pub fn an_object_written_by_update_migrates_and_drops_a_field(c: &Cluster, tag: &str) {
    let n = Names::new(tag);
    let old = c.api(OURS);
    let mut obj: APIService = serde_json::from_value(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": n.name, "labels": {n.key.as_str(): "true", "team": "storage"}},
        "spec": {"group": n.group, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 5,
                 "insecureSkipTLSVerify": true,
                 "service": {"namespace": "default", "name": format!("{tag}-backend")}},
    }))
    .unwrap();
    obj = old.create(&obj).unwrap();
    obj.spec.version_priority = 10;
    old.update(&obj).unwrap();
    assert_eq!(c.managers(&n.name), [(OURS.into(), "Update".into())]);
    let s = Scratch::new(tag);
    s.write("a.yaml", &manifest(&n, "", ""));
    let p = Proc::run_with_kubeconfig(&c.kubeconfig, &s, &n.args(&[]));
    assert!(
        wait_until(|| c.get(&n.name).is_some_and(
            |o| !o.spec.insecure_skip_tls_verify && o.metadata.label("team").is_none()
        )),
        "{:?}\n{}",
        c.get_json(&n.name),
        p.log()
    );
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    let managers = c.managers(&n.name);
    assert!(
        managers.contains(&(OURS.into(), "Apply".into()))
            && !managers.contains(&(OURS.into(), "Update".into())),
        "{managers:?}"
    );
    let o = c.get(&n.name).unwrap();
    assert_eq!(o.metadata.label(&n.key), Some("true"));
    assert_eq!(o.spec.version_priority, 10);
    c.delete(&[&n.name]);
}

/// An object someone else created, adopted with `--adopt`: its declared fields become
/// ours alone, so a field the manifest later drops is removed; the rest stays theirs.
pub fn an_adopted_object_releases_a_field_its_manifest_drops(c: &Cluster, tag: &str) {
    let n = Names::new(tag);
    let theirs: APIService = serde_json::from_value(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": n.name, "labels": {"app": "helm-release"}},
        "spec": {"group": n.group, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
                 "insecureSkipTLSVerify": true,
                 "service": {"namespace": "default", "name": format!("{tag}-backend")}},
    }))
    .unwrap();
    let uid = c.api("helm").create(&theirs).unwrap().metadata.uid;
    let s = Scratch::new(tag);
    s.write(
        "a.yaml",
        &manifest(&n, "", "  insecureSkipTLSVerify: true\n"),
    );
    let (code, log) = Proc::run_with_kubeconfig(&c.kubeconfig, &s, &n.args(&["--once", "--adopt"]))
        .wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    let o = c.get(&n.name).unwrap();
    assert_eq!(o.metadata.uid, uid, "in place");
    assert_eq!(o.metadata.label(&n.key), Some("true"));
    s.write("a.yaml", &manifest(&n, "", ""));
    let (code, log) =
        Proc::run_with_kubeconfig(&c.kubeconfig, &s, &n.args(&["--once"])).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    let o = c.get(&n.name).unwrap();
    assert!(
        !o.spec.insecure_skip_tls_verify,
        "{:?}",
        c.get_json(&n.name)
    );
    assert_eq!(
        o.metadata.label("app"),
        Some("helm-release"),
        "theirs: kept"
    );
    c.delete(&[&n.name]);
}

/// `plan` lists, under our object, the field another manager set and the manifest leaves
/// alone (`spec.caBundle: kept, set by cainjector`), plans no write for it, and dry-runs
/// a planned apply (`dryRun=All`) without storing it.
pub fn plan_shows_a_kept_field_and_its_manager(c: &Cluster, tag: &str) {
    let n = Names::new(tag);
    let s = Scratch::new(tag);
    s.write("a.yaml", &manifest(&n, "", ""));
    let (code, log) =
        Proc::run_with_kubeconfig(&c.kubeconfig, &s, &n.args(&["--once"])).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    let injector = c.api(INJECTOR);
    let mut o = injector.get(&n.name).unwrap();
    o.spec.ca_bundle = Some(injected().to_vec().into_boxed_slice());
    injector.update(&o).unwrap();
    let kubeconfig = c.kubeconfig.to_str().unwrap();
    let manifests = s.manifests();
    let plan = |extra: &[&str]| {
        let mut args = vec![
            "plan",
            "--manifests",
            manifests.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig,
        ];
        args.extend(n.args(extra));
        Proc::spawn(&args).wait_exit_stdout_first(WAIT)
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
    let before = c.get(&n.name).unwrap();
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
    assert_eq!(c.get(&n.name).unwrap(), before, "a dry run stored nothing");
    c.delete(&[&n.name]);
}

/// Waits until `cond` holds, for up to `timeout`, polling every 20 ms.
pub fn wait_for(timeout: Duration, cond: impl FnMut() -> bool) -> bool {
    wait_until_for(timeout, cond)
}
