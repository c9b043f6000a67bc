//! `deploy/` and the Dockerfile against the binary: the manifests parse and match the CLI
//! contract, the RBAC grants exactly what an end-to-end run sends, a ConfigMap mount's
//! `..data` swap is followed, and `/metrics` passes the reference Prometheus parser.
//! Also (module `events_and_logs`): Events, usage errors and log lines.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/configmap.rs"]
mod configmap;
#[path = "support/kube.rs"]
mod kube;
#[path = "support/promtext.rs"]
mod promtext;

// Events, usage errors and log lines through the binary: its own file, this test process.
#[path = "deploy/events_and_logs.rs"]
mod events_and_logs;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use autoregister::api::DEFAULT_LABEL_KEY;
use autoregister::testserver::TestServer;
use serde::Deserialize;
use serde_json::{json, Value};

use binary::{http_get, wait_until, Proc, Scratch};
use configmap::ConfigMapDir;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every document of every `deploy/*.yaml`, as JSON, with the file it came from.
fn deploy_objects() -> Vec<(String, Value)> {
    // Folders (monitoring/) and the extensionless `Kustomization` are not read
    // by `kubectl apply -f deploy/`.
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("deploy"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.ends_with(".yaml"),
            "{name}: kubectl apply -f deploy/ reads every file"
        );
        let text = std::fs::read_to_string(&f).unwrap();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let v = Value::deserialize(doc).unwrap_or_else(|e| panic!("{name}: {e}"));
            if !v.is_null() {
                out.push((name.clone(), v));
            }
        }
    }
    out
}

fn find<'a>(objs: &'a [(String, Value)], kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .map(|(_, v)| v)
        .find(|v| v["kind"] == kind && v["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("deploy/ has no {kind} {name}"))
}

fn all<'a>(objs: &'a [(String, Value)], kind: &str) -> Vec<&'a Value> {
    objs.iter()
        .map(|(_, v)| v)
        .filter(|v| v["kind"] == kind)
        .collect()
}

fn container(objs: &[(String, Value)]) -> Value {
    let d = find(objs, "Deployment", "autoregister");
    let cs = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(cs.len(), 1);
    cs[0].clone()
}

fn args_of(container: &Value) -> Vec<String> {
    container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// `--flag=value` arguments as a map (the Deployment writes every value that way).
fn flag_values(args: &[String]) -> BTreeMap<String, String> {
    args.iter()
        .filter_map(|a| a.strip_prefix("--")?.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The Deployment's args with `--manifests` and `--health-addr` pointed at the test's own
/// folder and a free loopback port, plus a kubeconfig for the test server.
fn test_args(args: &[String], manifests: &Path, kubeconfig: &Path) -> Vec<String> {
    let mut out: Vec<String> = args
        .iter()
        .map(|a| {
            if a.starts_with("--manifests=") {
                format!("--manifests={}", manifests.display())
            } else if a.starts_with("--health-addr=") {
                "--health-addr=127.0.0.1:0".to_string()
            } else {
                a.clone()
            }
        })
        .collect();
    out.push(format!("--kubeconfig={}", kubeconfig.display()));
    out
}

/// An example shipped commented out, uncommented (one leading `# ` or `#` off each line).
fn uncomment(text: &str) -> String {
    text.lines()
        .map(|l| l.strip_prefix("# ").or(l.strip_prefix('#')).unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The ConfigMap's examples, uncommented: file name → text.
fn example_data(objs: &[(String, Value)]) -> BTreeMap<String, String> {
    configmap_data(objs)
        .into_iter()
        .map(|(k, v)| (k, uncomment(&v)))
        .collect()
}

/// The ConfigMap's `data` as file name → text.
fn configmap_data(objs: &[(String, Value)]) -> BTreeMap<String, String> {
    let cm = find(objs, "ConfigMap", "autoregister-manifests");
    cm["data"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect()
}

/// Whether `.dockerignore` (its `patterns`, last match wins) lets `path`, a top-level file or
/// folder of the repository, into the image's build context. Only the forms the file uses
/// are understood (`*`, `NAME`, `!NAME`); another fails the test, so it is kept simple.
fn in_build_context(patterns: &[&str], path: &str) -> bool {
    let mut included = true;
    for pattern in patterns {
        let (include, name) = match pattern.strip_prefix('!') {
            Some(name) => (true, name),
            None => (false, *pattern),
        };
        assert!(
            !name.contains(['/', '?', '[']) && (name == "*" || !name.contains('*')),
            ".dockerignore: pattern {pattern:?} is beyond what this test reads"
        );
        if name == "*" || name == path {
            included = include;
        }
    }
    included
}

/// Every file the Dockerfile's build stage copies from the context is in the build context:
/// a folder `.dockerignore` leaves out fails `docker build` on its COPY, and no other test
/// builds the image.
#[test]
fn the_image_build_context_holds_everything_the_dockerfile_copies() {
    let ignore = std::fs::read_to_string(repo().join(".dockerignore")).unwrap();
    let patterns: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let mut copied = Vec::new();
    for line in dockerfile.lines() {
        let Some(args) = line.strip_prefix("COPY ") else {
            continue;
        };
        let words: Vec<&str> = args.split_whitespace().collect();
        if words.iter().any(|w| w.starts_with("--from")) {
            continue;
        }
        let (_, sources) = words.split_last().expect("COPY has a destination");
        for source in sources {
            let path = source.trim_start_matches("./").trim_end_matches('/');
            assert!(
                repo().join(path).exists(),
                "Dockerfile copies {path}, which is not in the repository"
            );
            assert!(
                in_build_context(&patterns, path),
                "Dockerfile copies {path}, which .dockerignore leaves out of the build context"
            );
            copied.push(path.to_string());
        }
    }
    // The static binaries are linked by what .cargo/config.toml names under link/.
    for needed in ["Cargo.toml", ".cargo", "link", "src"] {
        assert!(
            copied.iter().any(|c| c == needed),
            "the Dockerfile does not copy {needed}"
        );
    }
    assert!(!in_build_context(&patterns, "target"), "target/ is sent");
}

#[test]
fn deploy_yaml_parses_and_the_deployment_matches_the_cli_contract() {
    let objs = deploy_objects();
    let ns = find(&objs, "Namespace", "autoregister");
    let namespace = ns["metadata"]["name"].as_str().unwrap();
    for (file, v) in &objs {
        for field in ["apiVersion", "kind"] {
            assert!(v[field].is_string(), "{file}: {field}");
        }
        assert!(v["metadata"]["name"].is_string(), "{file}: metadata.name");
    }
    // Where each namespaced object lives: ours, except the Events Role in `default`.
    for kind in ["ServiceAccount", "ConfigMap", "Deployment", "Service"] {
        for v in all(&objs, kind) {
            assert_eq!(v["metadata"]["namespace"], namespace, "{kind}");
        }
    }

    let d = find(&objs, "Deployment", "autoregister");
    assert_eq!(d["spec"]["replicas"], 2);
    let pod = &d["spec"]["template"]["spec"];
    let c = container(&objs);
    let args = args_of(&c);
    let flags = flag_values(&args);
    assert_eq!(args[0], "run");
    assert!(args.iter().any(|a| a == "--leader-elect"), "{args:?}");

    // Security: what the restricted Pod Security Standard asks, and the image's user.
    let psc = &pod["securityContext"];
    assert_eq!(psc["runAsNonRoot"], true);
    assert_eq!(psc["seccompProfile"]["type"], "RuntimeDefault");
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let user = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("Dockerfile sets USER");
    let (uid, gid) = user.trim().split_once(':').unwrap();
    assert_eq!(psc["runAsUser"].to_string(), uid, "runAsUser = image USER");
    assert_eq!(psc["runAsGroup"].to_string(), gid);
    assert!(dockerfile.lines().any(|l| l.trim() == "FROM scratch"));

    // Probes and scraping hit the port --health-addr listens on.
    let port: u16 = flags["health-addr"]
        .strip_prefix(':')
        .expect("--health-addr=:PORT")
        .parse()
        .unwrap();
    let ports = c["ports"].as_array().unwrap();
    let named = |name: &Value| {
        ports
            .iter()
            .find(|p| &p["name"] == name)
            .map(|p| p["containerPort"].as_u64().unwrap())
    };
    for (probe, path) in [("livenessProbe", "/livez"), ("readinessProbe", "/readyz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(named(&get["port"]), Some(u64::from(port)), "{probe} port");
    }
    let ann = &d["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(ann["prometheus.io/scrape"], "true");
    assert_eq!(ann["prometheus.io/port"], port.to_string());
    assert_eq!(ann["prometheus.io/path"], "/metrics");
    for (section, key) in [
        ("requests", "cpu"),
        ("requests", "memory"),
        ("limits", "memory"),
    ] {
        assert!(
            c["resources"][section][key].is_string(),
            "resources.{section}.{key}"
        );
    }

    // The manifests folder is the ConfigMap's mount, and its files are valid manifests.
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == flags["manifests"].as_str())
        .expect("--manifests is a volume mount");
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    let cm_name = volume["configMap"]["name"].as_str().unwrap();
    assert_eq!(cm_name, "autoregister-manifests");
    // As shipped they register nothing (no unavailable API by default); uncommented, the
    // examples are valid manifests.
    let scratch = Scratch::new("deploy-yaml");
    for (file, text) in configmap_data(&objs) {
        std::fs::write(scratch.path(&file), text).unwrap();
    }
    let desired = autoregister::controller::load(&scratch.0, DEFAULT_LABEL_KEY)
        .unwrap_or_else(|e| panic!("ConfigMap manifests: {e:?}"));
    assert!(desired.is_empty(), "deploy/ registers {:?}", desired.keys());
    for (file, text) in example_data(&objs) {
        std::fs::write(scratch.path(&file), text).unwrap();
    }
    let desired = autoregister::controller::load(&scratch.0, DEFAULT_LABEL_KEY)
        .unwrap_or_else(|e| panic!("ConfigMap examples: {e:?}"));
    assert!(desired.len() >= 2, "{:?}", desired.keys());

    // The ServiceAccount the pod runs as is the subject of every binding.
    let sa = pod["serviceAccountName"].as_str().unwrap();
    find(&objs, "ServiceAccount", sa);
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        for b in all(&objs, kind) {
            assert_eq!(b["subjects"][0]["name"], sa, "{kind}");
            assert_eq!(b["subjects"][0]["namespace"], namespace, "{kind}");
            let role_kind = b["roleRef"]["kind"].as_str().unwrap();
            let role = find_role(&objs, b);
            if role_kind == "Role" {
                assert_eq!(
                    role["metadata"]["namespace"], b["metadata"]["namespace"],
                    "{kind} and its {role_kind} share a namespace"
                );
            } else {
                assert!(role["metadata"]["namespace"].is_null(), "{kind}");
            }
        }
    }

    // The binary's own parser accepts the args: it parses every flag before `--help`.
    let out = Command::new(binary::exe())
        .args(&args)
        .arg("--help")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("--leader-elect"),
        "{args:?}: {}{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut broken = args.clone();
    broken.push("--health-addr=8080".into());
    let out = Command::new(binary::exe())
        .args(&broken)
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "the parser does check before --help"
    );
}

/// (API group, resource, verb, namespace or "" for cluster scope).
type Access = (String, String, String, String);

fn group_of(resource: &str) -> &'static str {
    match resource {
        "apiservices" => "apiregistration.k8s.io",
        "services" => "",
        "endpointslices" => "discovery.k8s.io",
        "leases" => "coordination.k8s.io",
        "events" => "events.k8s.io",
        "secrets" | "configmaps" => "",
        other => panic!("the binary sent a request for an unexpected resource {other:?}"),
    }
}

/// The Role or ClusterRole a binding refers to (a Role in the binding's namespace).
fn find_role<'a>(objs: &'a [(String, Value)], binding: &Value) -> &'a Value {
    let kind = binding["roleRef"]["kind"].as_str().unwrap();
    let name = binding["roleRef"]["name"].as_str().unwrap();
    objs.iter()
        .map(|(_, v)| v)
        .find(|v| {
            v["kind"] == kind
                && v["metadata"]["name"] == name
                && (kind == "ClusterRole"
                    || v["metadata"]["namespace"] == binding["metadata"]["namespace"])
        })
        .unwrap_or_else(|| panic!("deploy/ has no {kind} {name} for {binding}"))
}

/// What the bindings grant, as Kubernetes reads them: a ClusterRoleBinding grants its
/// ClusterRole at any scope, a RoleBinding grants its Role or ClusterRole in its namespace.
fn granted(objs: &[(String, Value)]) -> BTreeSet<Access> {
    let mut out = BTreeSet::new();
    for (kind, scoped) in [("ClusterRoleBinding", false), ("RoleBinding", true)] {
        for binding in all(objs, kind) {
            let ns = if scoped {
                binding["metadata"]["namespace"]
                    .as_str()
                    .unwrap()
                    .to_string()
            } else {
                String::new()
            };
            let role = find_role(objs, binding);
            for rule in role["rules"].as_array().unwrap() {
                let list = |f: &str| -> Vec<String> {
                    rule[f]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|s| s.as_str().unwrap().to_string())
                        .collect()
                };
                for g in list("apiGroups") {
                    for r in list("resources") {
                        for v in list("verbs") {
                            assert!(g != "*" && r != "*" && v != "*", "no wildcards");
                            out.insert((g.clone(), r.clone(), v, ns.clone()));
                        }
                    }
                }
            }
        }
    }
    out
}

fn allows(granted: &BTreeSet<Access>, a: &Access) -> bool {
    granted.contains(a) || granted.contains(&(a.0.clone(), a.1.clone(), a.2.clone(), String::new()))
}

/// `/metrics` through the reference parser (`prometheus_client`, Python): family → JSON.
fn reference_parse(body: &str) -> serde_json::Map<String, Value> {
    let script = repo().join("tests/support/check_metrics.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (the reference Prometheus parser runs in Python)");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client rejected /metrics (or is missing: `make test` installs it, see scripts/test-deps.sh):\n{}\n{body}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The samples named `sample` (families are keyed without `_total` by the reference parser).
fn samples<'a>(fams: &'a serde_json::Map<String, Value>, sample: &str) -> Vec<&'a Value> {
    fams.values()
        .flat_map(|f| f["samples"].as_array().unwrap())
        .filter(|s| s["name"] == sample)
        .collect()
}

fn family<'a>(fams: &'a serde_json::Map<String, Value>, sample: &str) -> &'a Value {
    let name = sample.strip_suffix("_total").unwrap_or(sample);
    fams.get(name)
        .unwrap_or_else(|| panic!("no family {name} in {:?}", fams.keys()))
}

fn check_metrics(body: &str, identity_lease: &str) {
    promtext::parse(body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    let fams = reference_parse(body);
    for (sample, kind) in [
        ("autoregister_syncs_total", "counter"),
        ("autoregister_desired_apiservices", "gauge"),
        ("autoregister_managed_apiservices", "gauge"),
        ("autoregister_unowned_desired_apiservices", "gauge"),
        ("autoregister_manifest_reloads_total", "counter"),
        (
            "autoregister_manifest_last_reload_success_timestamp_seconds",
            "gauge",
        ),
        ("leader_election_master_status", "gauge"),
        ("process_cpu_seconds_total", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_virtual_memory_bytes", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("workqueue_adds_total", "counter"),
        ("rest_client_requests_total", "counter"),
    ] {
        let f = family(&fams, sample);
        assert_eq!(f["type"], kind, "{sample}");
        assert!(
            f["help"].as_str().is_some_and(|h| h.len() > 10),
            "{sample}: HELP"
        );
        assert!(!samples(&fams, sample).is_empty(), "{sample}: no sample");
    }
    for s in samples(&fams, "autoregister_syncs_total") {
        let cell = s["labels"]["cell"].as_str().unwrap();
        let b = cell.as_bytes();
        assert!(
            b.len() == 2 && (b'1'..=b'6').contains(&b[0]) && (b'A'..=b'C').contains(&b[1]),
            "{cell}"
        );
        let result = s["labels"]["result"].as_str().unwrap();
        assert!(["ok", "error", "skipped"].contains(&result), "{result}");
    }
    let results: BTreeSet<&str> = samples(&fams, "autoregister_manifest_reloads_total")
        .iter()
        .map(|s| s["labels"]["result"].as_str().unwrap())
        .collect();
    assert_eq!(results, BTreeSet::from(["error", "ok"]));
    let leader = samples(&fams, "leader_election_master_status");
    assert_eq!(leader.len(), 1);
    assert_eq!(leader[0]["labels"]["name"], identity_lease);
    assert_eq!(leader[0]["value"], 1.0);
    let value = |sample: &str| samples(&fams, sample)[0]["value"].as_f64().unwrap();
    assert!(value("process_resident_memory_bytes") > 1e5);
    assert!(value("process_open_fds") >= 3.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = value("process_start_time_seconds");
    assert!(started <= now + 1.0 && started > now - 600.0, "{started}");
    assert!(value("autoregister_manifest_last_reload_success_timestamp_seconds") >= started - 1.0);
}

/// Events in `default` about `name` with `reason`.
fn events(server: &TestServer, name: &str, reason: &str) -> Vec<Value> {
    server
        .list_objects("events", Some("default"))
        .into_iter()
        .filter(|e| e["regarding"]["name"] == name && e["reason"] == reason)
        .collect()
}

fn sample_value(body: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    promtext::parse(body).ok()?.value(name, labels)
}

#[test]
fn the_deployment_follows_a_configmap_data_swap_records_events_and_needs_exactly_its_rbac() {
    let objs = deploy_objects();
    let args = args_of(&container(&objs));
    let lease_name = flag_values(&args)
        .get("lease-name")
        .cloned()
        .unwrap_or_else(|| "autoregister".into());
    let server = TestServer::start();
    let scratch = Scratch::new("deploy-run");
    let kubeconfig = scratch.path("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    // The CA Secret the sample manifests inject from (as cert-manager would have issued it).
    for role in all(&objs, "Role") {
        for rule in role["rules"].as_array().unwrap() {
            if rule["resources"] != json!(["secrets"]) {
                continue;
            }
            for name in rule["resourceNames"].as_array().unwrap() {
                server.seed(
                    "secrets",
                    role["metadata"]["namespace"].as_str(),
                    json!({"metadata": {"name": name, "namespace": role["metadata"]["namespace"]},
                           "data": {"ca.crt": base64_ca()}}),
                );
            }
        }
    }
    let mut volume = ConfigMapDir::new(scratch.path("manifests"));
    // The examples uncommented, as a user who runs their backends would.
    let mut data = example_data(&objs);
    volume.publish(&data);
    let first = autoregister::controller::load(&volume.dir, DEFAULT_LABEL_KEY).unwrap();
    let names: Vec<String> = first.keys().cloned().collect();

    let run_args = test_args(&args, &volume.dir, &kubeconfig);
    let run_args: Vec<&str> = run_args.iter().map(String::as_str).collect();
    let p = Proc::spawn(&run_args);
    let addr = p.ops_addr();
    p.wait_log("leader election: leading as ");
    assert!(
        wait_until(|| names
            .iter()
            .all(|n| server.get_object("apiservices", None, n).is_some())),
        "not every ConfigMap manifest was registered:\n{}",
        p.log()
    );

    // The kubelet's update: a new timestamped dir, `..data` flipped. One file changes a
    // spec field (same length, so only the swap itself can give it away), one file goes.
    let changed = "v1beta1.metrics.k8s.io";
    let file = data
        .iter()
        .find(|(_, t)| t.contains(changed))
        .map(|(k, _)| k.clone())
        .unwrap();
    let text = data[&file].replace("versionPriority: 100", "versionPriority: 200");
    assert_ne!(text, data[&file]);
    data.insert(file.clone(), text);
    let removed_file = data.keys().find(|k| **k != file).cloned().unwrap();
    data.remove(&removed_file);
    volume.publish(&data);
    let second = autoregister::controller::load(&volume.dir, DEFAULT_LABEL_KEY).unwrap();
    let removed: Vec<&String> = names.iter().filter(|n| !second.contains_key(*n)).collect();
    assert!(!removed.is_empty());
    assert!(
        wait_until(|| {
            let prio = server
                .get_object("apiservices", None, changed)
                .and_then(|o| o["spec"]["versionPriority"].as_i64());
            prio == Some(200)
                && removed
                    .iter()
                    .all(|n| server.get_object("apiservices", None, n).is_none())
        }),
        "the ..data swap was not applied:\n{}",
        p.log()
    );

    // Events: one per write, on the APIService, in default.
    assert!(
        wait_until(|| names
            .iter()
            .all(|n| events(&server, n, "Registered").len() == 1)
            && events(&server, changed, "Updated").len() == 1
            && removed
                .iter()
                .all(|n| events(&server, n, "Deregistered").len() == 1)),
        "events: {:#?}\n{}",
        server.list_objects("events", None),
        p.log()
    );
    let identity = p
        .log()
        .split("leading as ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_string();
    let updated = &events(&server, changed, "Updated")[0];
    assert_eq!(updated["type"], "Normal");
    assert_eq!(updated["action"], "Update");
    assert_eq!(updated["reportingController"], "autoregister");
    assert_eq!(updated["reportingInstance"], identity.as_str());
    assert_eq!(updated["regarding"]["kind"], "APIService");
    assert_eq!(
        updated["regarding"]["apiVersion"],
        "apiregistration.k8s.io/v1"
    );
    let uid = server.get_object("apiservices", None, changed).unwrap()["metadata"]["uid"].clone();
    assert_eq!(updated["regarding"]["uid"], uid);
    assert!(
        updated["note"].as_str().unwrap().contains("6C"),
        "{updated}"
    );

    // Metrics, once the gauges show the second version of the set.
    let want_desired = second.len().to_string();
    assert!(wait_until(|| {
        let body = http_get(&addr, "/metrics").1;
        sample_value(&body, "autoregister_desired_apiservices", &[])
            .is_some_and(|v| v.to_string() == want_desired)
            && sample_value(&body, "autoregister_managed_apiservices", &[])
                .is_some_and(|v| v.to_string() == want_desired)
    }));
    let body = http_get(&addr, "/metrics").1;
    check_metrics(&body, &lease_name);
    let syncs = |cell: &str| {
        sample_value(
            &body,
            "autoregister_syncs_total",
            &[("cell", cell), ("result", "ok")],
        )
        .unwrap_or(0.0)
    };
    assert!(syncs("2C") >= names.len() as f64, "{body}");
    assert!(
        syncs("6C") >= 1.0 && syncs("6A") >= removed.len() as f64,
        "{body}"
    );
    assert!(
        sample_value(
            &body,
            "autoregister_manifest_reloads_total",
            &[("result", "ok")]
        )
        .unwrap()
            >= 2.0
    );

    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    // Log lines a person can read: microsecond timestamps (as klog, at every level), cell
    // and meaning on each action.
    for line in log.lines() {
        let b = line.as_bytes();
        assert!(
            b.len() > 27
                && b[19] == b'.'
                && b[26] == b'Z'
                && b[20..26].iter().all(u8::is_ascii_digit),
            "no microsecond timestamp: {line}"
        );
    }
    assert!(
        log.lines().any(|l| l.contains(&format!(
            "{changed} 6C update (managed always, desired always; declared field differs) ["
        )) && l.ends_with("]: ok")),
        "{log}"
    );

    // RBAC: every request the run sent is granted, and every grant was used.
    let granted = granted(&objs);
    let mut sent: BTreeSet<Access> = BTreeSet::new();
    for r in server.requests() {
        assert!(
            r.verb != "other",
            "unexpected request {} {}",
            r.method,
            r.path
        );
        let Some(resource) = r.resource.clone() else {
            continue; // discovery needs no grant (system:discovery)
        };
        let resource = match &r.subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource,
        };
        sent.insert((
            group_of(&resource).to_string(),
            resource,
            r.verb.clone(),
            r.namespace.clone().unwrap_or_default(),
        ));
    }
    // Secrets are read one by one, as resourceNames grants them.
    for r in server.requests() {
        if r.resource.as_deref() == Some("secrets") {
            assert!(
                r.query
                    .contains("fieldSelector=metadata.name%3Dprometheus-adapter-tls"),
                "{} {}?{}",
                r.method,
                r.path,
                r.query
            );
        }
    }
    for a in &sent {
        assert!(
            allows(&granted, a),
            "sent but not granted: {a:?}\ngranted: {granted:#?}"
        );
    }
    for g in &granted {
        let used = sent
            .iter()
            .any(|s| (&s.0, &s.1, &s.2) == (&g.0, &g.1, &g.2) && (g.3.is_empty() || s.3 == g.3));
        assert!(used, "granted but never sent: {g:?}\nsent: {sent:#?}");
    }
}

#[test]
fn kubectl_reads_every_deploy_object_offline() {
    // `kubectl apply --dry-run=client` needs a cluster's discovery; `--local` decodes
    // every object with kubectl's own scheme and no server.
    let out = Command::new("kubectl")
        .args(["label", "--local", "-o", "name", "check=ok", "-f"])
        .arg(repo().join("deploy"))
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .expect("kubectl (.ci/run installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: Vec<&str> = stdout.lines().collect();
    assert_eq!(names.len(), deploy_objects().len(), "{stdout}");
    for want in [
        "deployment.apps/autoregister",
        "clusterrole.rbac.authorization.k8s.io/autoregister",
        "configmap/autoregister-manifests",
    ] {
        assert!(names.contains(&want), "{stdout}");
    }
}

/// A CA certificate, base64 of its PEM (a Secret's `data` value).
fn base64_ca() -> String {
    use base64::Engine;
    let params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    base64::engine::general_purpose::STANDARD.encode(params.self_signed(&key).unwrap().pem())
}

/// deploy/ on the real kube-apiserver: its namespace, ServiceAccount and RBAC applied as
/// they are, the binary run as that ServiceAccount (a token from the TokenRequest API) with
/// the Deployment's arguments and the shipped examples: it converges, holds the Lease,
/// records Events and reads its CA Secret, and nothing it sends is forbidden.
#[test]
fn the_deploy_rbac_is_enough_on_the_real_kube_apiserver() {
    let k = kube::kube();
    let dir = repo().join("deploy");
    // The namespaces 02-rbac.yaml grants in (kube-system exists already).
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: monitoring\n");
    for f in [
        "00-namespace.yaml",
        "01-serviceaccount.yaml",
        "02-rbac.yaml",
    ] {
        k.apply(&std::fs::read_to_string(dir.join(f)).unwrap());
    }
    let ca = base64_ca();
    k.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: prometheus-adapter-tls\n  namespace: monitoring\ndata:\n  ca.crt: {ca}\n"
    ));
    let (ok, token, err) = k.kubectl(&["-n", "autoregister", "create", "token", "autoregister"]);
    assert!(ok, "{err}");
    let s = Scratch::new("deploy-real");
    for (file, text) in example_data(&deploy_objects()) {
        s.write(&file, &text);
    }
    let kubeconfig = s.path("kubeconfig");
    std::fs::write(&kubeconfig, k.kubeconfig(token.trim())).unwrap();
    let mut args = test_args(
        &args_of(&container(&deploy_objects())),
        &s.manifests(),
        &kubeconfig,
    );
    args.push("--once".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, log) = Proc::spawn(&args).wait_exit(binary::WAIT);
    assert_eq!(code, 0, "{log}");
    // A refusal logs "Forbidden (403)"; a bare "403" is in ports and timestamps too.
    assert!(
        !log.to_ascii_lowercase().contains("forbidden") && !log.contains("(403)"),
        "{log}"
    );

    let names = [
        "v1beta1.metrics.k8s.io",
        "v1beta1.custom.metrics.k8s.io",
        "v1beta1.external.metrics.k8s.io",
    ];
    for name in names {
        let a = k
            .get_apiservice(name)
            .unwrap_or_else(|| panic!("{name} not registered:\n{log}"));
        let v = serde_json::to_value(a).unwrap();
        assert_eq!(v["metadata"]["labels"][DEFAULT_LABEL_KEY], "true", "{v}");
    }
    // The Secret's CA became the caBundle of the custom metrics APIServices.
    let custom = serde_json::to_value(k.get_apiservice(names[1]).unwrap()).unwrap();
    assert_eq!(custom["spec"]["caBundle"], ca.as_str(), "{custom}");
    let (ok, lease, err) = k.kubectl(&[
        "-n",
        "autoregister",
        "get",
        "lease",
        "autoregister",
        "-o",
        "json",
    ]);
    assert!(ok, "the Lease: {err}");
    assert!(lease.contains("holderIdentity"), "{lease}");
    let (_, events, _) = k.kubectl(&["-n", "default", "get", "events.events.k8s.io", "-o", "json"]);
    assert!(
        events.contains("v1beta1.metrics.k8s.io"),
        "no Event recorded:\n{events}\n{log}"
    );

    // Leave the shared server as it was: these APIServices have no backend.
    for name in names {
        let (ok, out, err) = k.kubectl(&["delete", "apiservice", name]);
        assert!(ok, "{out}{err}");
    }
}
