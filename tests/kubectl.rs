//! The real `kubectl` against the test API server: a client nobody here wrote.
//!
//! Skipped with a notice when `kubectl` is not on the PATH (CI installs it).
#![cfg(feature = "testing")]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use autoregister::testserver::TestServer;
use serde_json::{json, Value};

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A scratch directory with a kubeconfig for `s`.
fn scratch(s: &TestServer, tag: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("autoregister-kubectl-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    s.write_kubeconfig(&dir.join("kubeconfig")).unwrap();
    dir
}

struct Kubectl {
    bin: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args)
            .env("HOME", &self.dir)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = self.cmd(args).output().expect("run kubectl");
        eprintln!(
            "$ kubectl {}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "kubectl {} failed", args.join(" "));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn manifest(dir: &Path, name: &str, group: &str, priority: u32) -> PathBuf {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: {name}
  labels:
    kube-aggregator.kubernetes.io/automanaged: \"true\"
spec:
  group: {group}
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: {priority}
  service:
    namespace: default
    name: example
"
        ),
    )
    .unwrap();
    path
}

fn kubectl_or_skip() -> Option<PathBuf> {
    let bin = on_path("kubectl");
    if bin.is_none() {
        println!("NOTICE: kubectl is not on the PATH; skipping the kubectl acceptance test");
    }
    bin
}

/// get, apply (create and configure), get -o json, get --watch, delete, and an invalid apply,
/// over TLS with a bearer token from the kubeconfig.
#[test]
fn kubectl_drives_the_test_server() {
    let Some(bin) = kubectl_or_skip() else { return };
    let s = TestServer::builder()
        .tls(true)
        .token("kubectl-token")
        .start()
        .unwrap();
    let k = Kubectl {
        bin,
        dir: scratch(&s, "main"),
    };

    let out = k.run(&["get", "apiservices"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("No resources found"));

    let m = manifest(&k.dir, "v1.a.example.com", "a.example.com", 15);
    let out = k.ok(&["apply", "-f", m.to_str().unwrap()]);
    assert!(
        out.contains("apiservice.apiregistration.k8s.io/v1.a.example.com created"),
        "{out}"
    );
    let stored = s
        .get_object("apiservices", None, "v1.a.example.com")
        .unwrap();
    assert!(
        stored["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );

    let out = k.ok(&["get", "apiservices"]);
    assert!(out.contains("v1.a.example.com"), "{out}");

    let json: Value =
        serde_json::from_str(&k.ok(&["get", "apiservice", "v1.a.example.com", "-o", "json"]))
            .unwrap();
    assert_eq!(json["spec"]["group"], "a.example.com");
    assert_eq!(json["spec"]["service"]["port"], 443);
    assert_eq!(
        json["metadata"]["resourceVersion"],
        stored["metadata"]["resourceVersion"]
    );

    // Re-apply with a change: a PATCH.
    let m = manifest(&k.dir, "v1.a.example.com", "a.example.com", 20);
    s.clear_requests();
    let out = k.ok(&["apply", "-f", m.to_str().unwrap()]);
    assert!(out.contains("configured"), "{out}");
    assert_eq!(s.count("patch"), 1);
    assert_eq!(
        s.get_object("apiservices", None, "v1.a.example.com")
            .unwrap()["spec"]["versionPriority"],
        20
    );
    let out = k.ok(&["apply", "-f", m.to_str().unwrap()]);
    assert!(out.contains("unchanged"), "{out}");

    // An invalid object is refused with the server's causes.
    let bad = manifest(&k.dir, "v1.wrong-name", "b.example.com", 15);
    let out = k.run(&["apply", "-f", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is invalid") && err.contains("metadata.name"),
        "{err}"
    );

    // kubectl asks for strict field validation: a misspelt field is refused.
    let typo = k.dir.join("typo.yaml");
    std::fs::write(
        &typo,
        std::fs::read_to_string(&m)
            .unwrap()
            .replace("versionPriority", "versionPriorty"),
    )
    .unwrap();
    let out = k.run(&["apply", "-f", typo.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown field \"spec.versionPriorty\""),
        "{err}"
    );

    // --watch sees an event: start it, wait for the existing object, then create another.
    let mut child = k
        .cmd(&["get", "apiservices", "--watch", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let wait_line = |want: &str| loop {
        let line = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no {want:?} from kubectl --watch"));
        if line.trim() == want {
            break;
        }
    };
    wait_line("apiservice.apiregistration.k8s.io/v1.a.example.com");
    s.seed("apiservices", None, json!({"metadata": {"name": "v1.b.example.com"}, "spec": {"group": "b.example.com", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1}}));
    wait_line("apiservice.apiregistration.k8s.io/v1.b.example.com");
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();

    let out = k.ok(&["delete", "apiservice", "v1.a.example.com"]);
    assert!(out.contains("deleted"), "{out}");
    assert!(s
        .get_object("apiservices", None, "v1.a.example.com")
        .is_none());
    let out = k.run(&["get", "apiservice", "v1.a.example.com"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NotFound")
            || String::from_utf8_lossy(&out.stderr).contains("not found")
    );

    // A wrong token is refused.
    std::fs::write(
        k.dir.join("kubeconfig"),
        s.kubeconfig().replace("kubectl-token", "wrong"),
    )
    .unwrap();
    let out = k.run(&["get", "apiservices"]);
    assert!(!out.status.success());
    let _ = std::fs::remove_dir_all(&k.dir);
}

/// apply, get -o json and delete with every `kubectl.1.NN` the machine ships (plain HTTP):
/// on the PATH or beside the real `kubectl` (the Google Cloud CLI keeps them there).
#[test]
fn kubectl_versions_apply_get_delete() {
    let beside = on_path("kubectl")
        .and_then(|p| std::fs::canonicalize(p).ok())
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let versions: Vec<(String, PathBuf, u32)> = (20..=40)
        .filter_map(|minor| {
            let name = format!("kubectl.1.{minor}");
            on_path(&name)
                .or_else(|| {
                    beside
                        .as_ref()
                        .map(|d| d.join(&name))
                        .filter(|p| p.is_file())
                })
                .map(|p| (name, p, minor))
        })
        .collect();
    println!(
        "kubectl versions: {:?}",
        versions.iter().map(|v| &v.0).collect::<Vec<_>>()
    );
    if versions.is_empty() {
        println!("NOTICE: no kubectl.1.NN on the PATH; skipping the version matrix");
        return;
    }
    for (name, bin, minor) in versions {
        // kubectl before 1.29 validates with the protobuf OpenAPI v2 document, which the
        // server does not serve (404); those versions need --validate=false.
        let apply: &[&str] = if minor < 29 {
            &["apply", "--validate=false", "-f"]
        } else {
            &["apply", "-f"]
        };
        let s = TestServer::start();
        let k = Kubectl {
            bin,
            dir: scratch(&s, &name),
        };
        let m = manifest(&k.dir, "v1.x.example.com", "x.example.com", 15);
        let out = k.ok(&[apply, &[m.to_str().unwrap()]].concat());
        assert!(out.contains("created"), "{name}: {out}");
        let json: Value =
            serde_json::from_str(&k.ok(&["get", "apiservice", "v1.x.example.com", "-o", "json"]))
                .unwrap();
        assert_eq!(json["spec"]["group"], "x.example.com", "{name}");
        let m = manifest(&k.dir, "v1.x.example.com", "x.example.com", 16);
        let out = k.ok(&[apply, &[m.to_str().unwrap()]].concat());
        assert!(out.contains("configured"), "{name}: {out}");
        assert!(
            k.ok(&["delete", "-f", m.to_str().unwrap()])
                .contains("deleted"),
            "{name}"
        );
        assert!(
            s.get_object("apiservices", None, "v1.x.example.com")
                .is_none(),
            "{name}"
        );
        let _ = std::fs::remove_dir_all(&k.dir);
    }
}

/// kube-apiserver mode: kubectl lists the built-ins, sees their managers, and an object it
/// applies with kube-apiserver's `true` label is deleted by kube-apiserver's own rules.
#[test]
fn kubectl_against_kube_apiserver_mode() {
    let Some(bin) = kubectl_or_skip() else { return };
    let s = TestServer::builder().kube_apiserver(true).start().unwrap();
    let k = Kubectl {
        bin,
        dir: scratch(&s, "kas"),
    };
    let out = k.ok(&["get", "apiservices", "-o", "name"]);
    for name in autoregister::testserver::builtin_apiservices() {
        assert!(
            out.lines()
                .any(|l| l == format!("apiservice.apiregistration.k8s.io/{name}")),
            "{name} missing: {out}"
        );
    }
    let apps: Value = serde_json::from_str(&k.ok(&[
        "get",
        "apiservice",
        "v1.apps",
        "-o",
        "json",
        "--show-managed-fields",
    ]))
    .unwrap();
    assert_eq!(
        apps["metadata"]["managedFields"][0]["manager"],
        "kube-apiserver"
    );

    let m = manifest(&k.dir, "v1.a.example.com", "a.example.com", 15);
    let out = k.ok(&["apply", "-f", m.to_str().unwrap()]);
    assert!(out.contains("created"), "{out}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while s
        .get_object("apiservices", None, "v1.a.example.com")
        .is_some()
    {
        assert!(std::time::Instant::now() < deadline, "not deleted (6A)");
        std::thread::sleep(Duration::from_millis(5));
    }
    let applied = s.requests();
    let create = applied.iter().find(|r| r.verb == "create").unwrap();
    assert_eq!(
        create.field_manager.as_deref(),
        Some("kubectl-client-side-apply"),
        "kubectl names itself"
    );
}

/// `kubectl describe apiservice` shows the controller's Events, as on a real cluster: they
/// are written through `events.k8s.io/v1` and read (as kube-apiserver serves them) through
/// `core/v1` with `involvedObject.*` field selectors, which is what `describe` lists.
#[test]
fn kubectl_describe_shows_the_events_the_controller_wrote() {
    let Some(bin) = kubectl_or_skip() else {
        return;
    };
    let server = TestServer::start();
    let dir = scratch(&server, "describe");
    let manifests = dir.join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    manifest(
        &manifests,
        "v1.described.example.com",
        "described.example.com",
        10,
    );
    let run = Command::new(env!("CARGO_BIN_EXE_autoregister"))
        .args(["run", "--once", "--manifests"])
        .arg(&manifests)
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let k = Kubectl { bin, dir };
    let out = k.ok(&["describe", "apiservice", "v1.described.example.com"]);
    let events = out
        .split("\nEvents:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Events section:\n{out}"));
    assert!(!events.trim_start().starts_with("<none>"), "{out}");
    let line = events
        .lines()
        .find(|l| l.contains("Registered"))
        .unwrap_or_else(|| panic!("no Registered event:\n{out}"));
    for word in ["Normal", "autoregister", "create by autoregister"] {
        assert!(line.contains(word), "{word} missing: {line}");
    }
    // The same Event through core/v1 with the selector describe uses, and no other.
    let uid = k.ok(&[
        "get",
        "apiservice",
        "v1.described.example.com",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let selector = format!(
        "involvedObject.name=v1.described.example.com,involvedObject.namespace=,\
         involvedObject.kind=APIService,involvedObject.uid={uid}"
    );
    let listed: Value = serde_json::from_str(&k.ok(&[
        "get",
        "events.v1.",
        "-A",
        "--field-selector",
        &selector,
        "-o",
        "json",
    ]))
    .unwrap();
    let items = listed["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{listed:#}");
    assert_eq!(items[0]["apiVersion"], "v1");
    assert_eq!(items[0]["reason"], "Registered");
    assert_eq!(items[0]["involvedObject"]["uid"], uid.as_str());
    let none: Value = serde_json::from_str(&k.ok(&[
        "get",
        "events.v1.",
        "-A",
        "--field-selector",
        "involvedObject.name=v1.other.example.com",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(none["items"], json!([]));
}

/// `kubectl apply --server-side` against the test server: it creates, owns its fields as
/// an `Apply` entry, is refused with kube-apiserver's conflict message when another
/// manager changed a field it applies, takes it with `--force-conflicts`, and upgrades an
/// object it had applied client-side (its JSON patch of managedFields, `csaupgrade`).
#[test]
fn kubectl_server_side_apply() {
    let Some(bin) = kubectl_or_skip() else { return };
    let s = TestServer::start();
    let k = Kubectl {
        bin,
        dir: scratch(&s, "ssa"),
    };
    let name = "v1.ssa.example.com";
    let m = manifest(&k.dir, name, "ssa.example.com", 15);
    let out = k.ok(&["apply", "--server-side", "-f", m.to_str().unwrap()]);
    assert!(out.contains("serverside-applied"), "{out}");
    let stored = s.get_object("apiservices", None, name).unwrap();
    let entries = stored["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(
        (&entries[0]["manager"], &entries[0]["operation"]),
        (&json!("kubectl"), &json!("Apply"))
    );
    assert_eq!(
        entries[0]["fieldsV1"]["f:spec"]["f:versionPriority"],
        json!({})
    );

    // Another manager changes a field kubectl applies.
    let mut edited = stored.clone();
    edited["spec"]["versionPriority"] = json!(40);
    let api = autoregister::client::Api::<autoregister::api::APIService>::all(
        autoregister::client::Client::new(s.client_config()).unwrap(),
    )
    .with_field_manager("other");
    api.update(&serde_json::from_value(edited).unwrap())
        .unwrap();
    let out = k.run(&["apply", "--server-side", "-f", m.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "Apply failed with 1 conflict: conflict with \"other\" using apiregistration.k8s.io/v1: .spec.versionPriority"
        ),
        "{err}"
    );
    k.ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        m.to_str().unwrap(),
    ]);
    let stored = s.get_object("apiservices", None, name).unwrap();
    assert_eq!(stored["spec"]["versionPriority"], 15);
    let managers: Vec<&Value> = stored["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["manager"])
        .collect();
    assert_eq!(
        managers,
        [&json!("kubectl")],
        "the other manager owned nothing else"
    );

    // Client-side first, then server-side: kubectl moves its Update entry into its Apply one.
    let csa = "v1.csa.example.com";
    let m = manifest(&k.dir, csa, "csa.example.com", 15);
    k.ok(&["apply", "-f", m.to_str().unwrap()]);
    k.ok(&["apply", "--server-side", "-f", m.to_str().unwrap()]);
    let stored = s.get_object("apiservices", None, csa).unwrap();
    let who: Vec<(String, String)> = stored["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap().to_string(),
                e["operation"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // Its client-side entry is gone; the annotation has an applier of its own.
    assert_eq!(
        who,
        [
            ("kubectl-last-applied".to_string(), "Apply".to_string()),
            ("kubectl".to_string(), "Apply".to_string())
        ],
        "{stored}"
    );
    let _ = std::fs::remove_dir_all(&k.dir);
}
