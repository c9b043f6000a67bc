//! The Helm chart with the real helm: its default render is `deploy/` (generated from it by
//! scripts/deploy-gen.sh, compared file by file and object by object), `helm lint --strict`
//! and `helm template` pass for the defaults and for a values file setting every value, the
//! schema refuses a wrong value naming the field, and the chart installs, upgrades and
//! uninstalls on the real kube-apiserver, where the controller run as the rendered
//! ServiceAccount with the rendered ConfigMap and arguments converges.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::binary::{self, Proc, Scratch};
use crate::kube;
use crate::tools::{helm, Ran};
use crate::{chart_dir, id, objects_in, repo, yaml_docs};

/// The values file that sets every value of values.yaml to something other than its default.
fn all_values() -> PathBuf {
    repo().join("tests/packaging/all-values.yaml")
}

/// `helm template RELEASE CHART -n NS ARGS` (offline): the rendered objects, or helm's error.
fn template(home: &Path, release: &str, ns: &str, args: &[&str]) -> Ran {
    let chart = chart_dir();
    let mut a = vec![
        "template",
        release,
        chart.to_str().unwrap(),
        "--namespace",
        ns,
    ];
    a.extend_from_slice(args);
    helm(home, None, &a)
}

fn rendered(home: &Path, release: &str, ns: &str, args: &[&str]) -> Vec<Value> {
    let out = template(home, release, ns, args).expect_ok("helm template");
    yaml_docs(&out, "helm template")
}

/// Files of `dir` (recursively), relative path → text.
fn files_under(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    out
}

/// Files of deploy/ that scripts/deploy-gen.sh does not write: the namespace (a chart leaves
/// it to `helm install --create-namespace`), the kustomize base.
fn hand_written(rel: &str) -> bool {
    rel == "00-namespace.yaml" || rel == "Kustomization"
}

#[test]
fn deploy_is_the_chart_rendered_with_its_defaults() {
    let s = Scratch::new("chart-deploy");
    let home = s.path("helm");
    let out = s.path("deploy");
    let gen = Command::new(repo().join("scripts/deploy-gen.sh"))
        .arg(&out)
        .env("HELM", crate::tools::tool("helm"))
        .env("HOME", &home)
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .unwrap();
    assert!(
        gen.status.success(),
        "scripts/deploy-gen.sh: {}",
        String::from_utf8_lossy(&gen.stderr)
    );

    // File by file: deploy/ is what the generator writes now (run `make deploy` after
    // editing the chart).
    let generated = files_under(&out);
    let shipped: BTreeMap<String, String> = files_under(&repo().join("deploy"))
        .into_iter()
        .filter(|(rel, _)| !hand_written(rel))
        .collect();
    assert_eq!(
        generated.keys().collect::<Vec<_>>(),
        shipped.keys().collect::<Vec<_>>(),
        "deploy/ has other files than the chart renders: run `make deploy`"
    );
    for (rel, text) in &generated {
        assert!(
            &shipped[rel] == text,
            "deploy/{rel} is not the chart's render: run `make deploy`\n--- generated:\n{text}"
        );
    }

    // Object by object: the chart's default render (release `autoregister` in namespace
    // `autoregister`) has exactly deploy/'s objects, but for the Namespace.
    let chart: BTreeMap<String, Value> = rendered(&home, "autoregister", "autoregister", &[])
        .into_iter()
        .map(|v| (id(&v), v))
        .collect();
    let deploy: BTreeMap<String, Value> = objects_in(&repo().join("deploy"))
        .into_iter()
        .filter(|v| v["kind"] != "Namespace")
        .map(|v| (id(&v), v))
        .collect();
    assert_eq!(
        chart.keys().collect::<BTreeSet<_>>(),
        deploy.keys().collect::<BTreeSet<_>>(),
        "the chart's objects and deploy/'s"
    );
    for (k, v) in &chart {
        assert_eq!(
            v, &deploy[k],
            "{k}: the chart renders it otherwise than deploy/"
        );
    }
    let ns = objects_in(&repo().join("deploy"))
        .into_iter()
        .filter(|v| v["kind"] == "Namespace")
        .map(|v| id(&v))
        .collect::<Vec<_>>();
    assert_eq!(ns, ["Namespace /autoregister"]);
}

/// Every key path of a values tree (maps descended, lists and scalars are leaves).
fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let Some(m) = v.as_object() {
        for (k, v) in m {
            let p = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            // Free-form maps (labels, annotations, files, k8s objects) are set as a whole.
            let free = v.as_object().is_some_and(|o| o.is_empty())
                || [
                    "resources",
                    "podSecurityContext",
                    "securityContext",
                    "affinity",
                ]
                .contains(&k.as_str());
            if free || !v.is_object() {
                out.insert(p);
            } else {
                key_paths(v, &p, out);
            }
        }
    }
}

fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

#[test]
fn helm_lint_strict_and_template_pass_for_the_defaults_and_for_every_value_set() {
    let s = Scratch::new("chart-lint");
    let home = s.path("helm");
    let chart = chart_dir();
    let all = all_values();
    helm(&home, None, &["lint", "--strict", chart.to_str().unwrap()])
        .expect_ok("helm lint --strict");
    helm(
        &home,
        None,
        &[
            "lint",
            "--strict",
            chart.to_str().unwrap(),
            "-f",
            all.to_str().unwrap(),
        ],
    )
    .expect_ok("helm lint --strict -f all-values.yaml");

    // all-values.yaml sets every value, each to something else than the default.
    let defaults = &yaml_docs(
        &std::fs::read_to_string(chart.join("values.yaml")).unwrap(),
        "values.yaml",
    )[0];
    let set = &yaml_docs(&std::fs::read_to_string(&all).unwrap(), "all-values.yaml")[0];
    let mut paths = BTreeSet::new();
    key_paths(defaults, "", &mut paths);
    // leaderElection.enabled stays on there, so that leaseName shows; off is checked below.
    for p in &paths {
        let v = lookup(set, p).unwrap_or_else(|| panic!("all-values.yaml does not set {p}"));
        if p != "leaderElection.enabled" {
            assert_ne!(
                Some(v),
                lookup(defaults, p),
                "all-values.yaml sets {p} to its default"
            );
        }
    }
    let single = rendered(
        &home,
        "autoregister",
        "autoregister",
        &[
            "--set",
            "leaderElection.enabled=false",
            "--set",
            "replicaCount=1",
        ],
    );
    let d = single.iter().find(|v| v["kind"] == "Deployment").unwrap();
    let args = d["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(
        !args.contains("--leader-elect") && !args.contains("--lease-"),
        "{args}"
    );
    assert!(
        !single
            .iter()
            .any(|v| v["metadata"]["name"] == "autoregister-leader-election"),
        "no Lease RBAC without leader election"
    );

    // What the values do, in the render.
    let objs = rendered(&home, "edge", "ops", &["-f", all.to_str().unwrap()]);
    let by_kind =
        |kind: &str| -> Vec<&Value> { objs.iter().filter(|v| v["kind"] == kind).collect() };
    let d = by_kind("Deployment")[0];
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(d["metadata"]["name"], "edge-apis");
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(
        c["image"],
        "registry.example.com/autoregister@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    );
    assert_eq!(c["imagePullPolicy"], "Always");
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args,
        [
            "run",
            "--manifests=/etc/autoregister/manifests",
            "--leader-elect",
            "--lease-namespace=ops",
            "--lease-name=edge-lease",
            "--health-addr=:9090",
            "--label-key=example.com/registered",
            "--workers=4",
            "--withdraw-unavailable=10m",
            "--resync=1h",
            "--relist=30m",
            "--ca-expiry-warning=168h",
            "--adopt",
            "--allow-empty",
            "--events=false",
            "--log-format=json",
            "--qps=20",
        ]
    );
    // The binary's own parser accepts them (it parses every flag before --help).
    let out = Command::new(binary::exe())
        .args(&args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(pod["serviceAccountName"], "edge-sa");
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], "linux");
    assert_eq!(pod["tolerations"][0]["key"], "dedicated");
    assert_eq!(pod["imagePullSecrets"][0]["name"], "registry");
    assert!(pod["affinity"]["nodeAffinity"].is_object(), "{pod}");
    assert_eq!(pod["volumes"][0]["configMap"]["name"], "edge-manifests");
    assert!(by_kind("ConfigMap")
        .iter()
        .all(|c| c["metadata"]["name"] != "edge-apis-manifests"));
    assert!(
        by_kind("ServiceAccount").is_empty(),
        "serviceAccount.create false"
    );
    // rbac.create false: none at all; no Service; the monitoring objects on.
    for kind in [
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
    ] {
        assert!(by_kind(kind).is_empty(), "{kind}");
    }
    assert_eq!(by_kind("PodDisruptionBudget").len(), 0);
    let sm = by_kind("ServiceMonitor")[0];
    assert_eq!(sm["spec"]["endpoints"][0]["interval"], "15s");
    assert_eq!(sm["metadata"]["labels"]["release"], "prometheus");
    let rule = by_kind("PrometheusRule")[0];
    assert!(!rule["spec"]["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .is_empty());
    let dash = by_kind("ConfigMap")
        .into_iter()
        .find(|c| c["metadata"]["name"] == "edge-apis-dashboard")
        .unwrap();
    let json: Value =
        serde_json::from_str(dash["data"]["autoregister.json"].as_str().unwrap()).unwrap();
    assert_eq!(json["uid"], "autoregister");
    for o in &objs {
        assert_eq!(o["metadata"]["labels"]["team"], "platform", "{}", id(o));
        assert_eq!(
            o["metadata"]["labels"]["app.kubernetes.io/name"],
            "apis",
            "{}",
            id(o)
        );
    }
}

#[test]
fn the_schema_refuses_a_wrong_value_naming_the_field() {
    let s = Scratch::new("chart-schema");
    let home = s.path("helm");
    for (set, field) in [
        ("controller.workers=many", "workers"),
        ("controller.workers=0", "workers"),
        ("controller.wokers=2", "wokers"),
        ("replicaCount=two", "replicaCount"),
        ("image.pullPolicy=Sometimes", "pullPolicy"),
        (
            "controller.withdrawUnavailable=5 minutes",
            "withdrawUnavailable",
        ),
        ("controller.logFormat=yaml", "logFormat"),
        ("podAntiAffinity=maybe", "podAntiAffinity"),
        ("manifests.files.notes\\.txt=x", "notes.txt"),
    ] {
        let r = template(&home, "autoregister", "autoregister", &["--set", set]);
        assert!(!r.ok, "--set {set} was accepted");
        assert!(
            r.stderr.contains(field) && r.stderr.contains("schema"),
            "--set {set}: the error does not name {field}:\n{}",
            r.stderr
        );
    }
}

#[test]
fn empty_manifests_render_a_configmap_that_deregisters_nothing() {
    let s = Scratch::new("chart-empty");
    let home = s.path("helm");
    let objs = rendered(
        &home,
        "autoregister",
        "autoregister",
        &["--set", "manifests.examples=false"],
    );
    let cm = objs.iter().find(|v| v["kind"] == "ConfigMap").unwrap();
    assert!(cm.get("data").is_none(), "{cm}");
    let d = objs.iter().find(|v| v["kind"] == "Deployment").unwrap();
    let args = d["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    // The empty-set guard stays on: an empty set deregisters nothing.
    assert!(!args.contains("--allow-empty"), "{args}");
    let objs = rendered(
        &home,
        "autoregister",
        "autoregister",
        &[
            "--set",
            "manifests.examples=false",
            "--set",
            "controller.allowEmpty=true",
        ],
    );
    let d = objs.iter().find(|v| v["kind"] == "Deployment").unwrap();
    let args = d["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains("--allow-empty"), "{args}");
}

/// An APIService manifest `v1alpha1.<group>` backed by Service `ns/api` with no backend
/// running (registered, unavailable), with an optional annotation.
fn apiservice(group: &str, ns: &str, annotation: Option<(&str, &str)>) -> String {
    let meta = match annotation {
        Some((k, v)) => format!("  annotations:\n    {k}: {v}\n"),
        None => String::new(),
    };
    let tls = if annotation.is_some_and(|(k, _)| k.contains("inject-ca")) {
        ""
    } else {
        "  insecureSkipTLSVerify: true\n"
    };
    format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1alpha1.{group}\n{meta}spec:\n  group: {group}\n  version: v1alpha1\n  service:\n    namespace: {ns}\n    name: api\n    port: 443\n{tls}  groupPriorityMinimum: 100\n  versionPriority: 10\n"
    )
}

/// A values file for the install test: manifests `files`, its own label key, RBAC for the
/// test's namespaces.
fn install_values(files: &BTreeMap<&str, String>) -> String {
    let files = serde_json::to_value(files).unwrap();
    let v = json!({
        "manifests": {"examples": false, "files": files},
        "controller": {"labelKey": LABEL_KEY},
        "rbac": {
            "backendNamespaces": [BACKENDS],
            "caSources": [{"namespace": CA_NS, "secrets": ["b-tls"]}],
        },
    });
    serde_yaml_ng::to_string(&v).unwrap()
}

const RELEASE_NS: &str = "ar-helm";
const BACKENDS: &str = "ar-backends";
const CA_NS: &str = "ar-ca";
const LABEL_KEY: &str = "packaging.example.com/registered";

/// What the installed Deployment's pod would run: its arguments (with `--manifests` on a
/// local copy of the installed ConfigMap, `--health-addr` on a free loopback port and a
/// kubeconfig with the rendered ServiceAccount's token), run with `--once`.
fn run_as_installed(k: &kube::Kube, s: &Scratch, round: &str) -> (i32, String) {
    let get = |args: &[&str]| -> Value {
        let (ok, out, err) = k.kubectl(args);
        assert!(ok, "kubectl {args:?}: {err}");
        serde_json::from_str(&out).unwrap()
    };
    let d = get(&[
        "-n",
        RELEASE_NS,
        "get",
        "deployment",
        "ar-autoregister",
        "-o",
        "json",
    ]);
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let cm_name = pod["volumes"][0]["configMap"]["name"].as_str().unwrap();
    let cm = get(&["-n", RELEASE_NS, "get", "configmap", cm_name, "-o", "json"]);
    let dir = s.path(&format!("manifests-{round}"));
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(data) = cm["data"].as_object() {
        for (file, text) in data {
            std::fs::write(dir.join(file), text.as_str().unwrap()).unwrap();
        }
    }
    let sa = pod["serviceAccountName"].as_str().unwrap();
    let (ok, token, err) = k.kubectl(&["-n", RELEASE_NS, "create", "token", sa]);
    assert!(ok, "{err}");
    let kubeconfig = s.path(&format!("kubeconfig-{round}"));
    std::fs::write(&kubeconfig, k.kubeconfig(token.trim())).unwrap();
    let mut args: Vec<String> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let a = a.as_str().unwrap();
            if a.starts_with("--manifests=") {
                format!("--manifests={}", dir.display())
            } else if a.starts_with("--health-addr=") {
                "--health-addr=127.0.0.1:0".into()
            } else {
                a.to_string()
            }
        })
        .collect();
    args.push(format!("--kubeconfig={}", kubeconfig.display()));
    args.push("--once".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, log) = Proc::spawn(&args).wait_exit(binary::WAIT);
    // A refusal logs "Forbidden (403)".
    assert!(
        !log.to_ascii_lowercase().contains("forbidden") && !log.contains("(403)"),
        "{round}: the rendered RBAC refused a request:\n{log}"
    );
    (code, log)
}

fn ours(k: &kube::Kube) -> BTreeSet<String> {
    let (ok, out, err) = k.kubectl(&["get", "apiservices", "-l", LABEL_KEY, "-o", "name"]);
    assert!(ok, "{err}");
    out.lines()
        .map(|l| {
            l.trim_start_matches("apiservice.apiregistration.k8s.io/")
                .to_string()
        })
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|n| n.to_string()).collect()
}

/// helm install, upgrade and uninstall on the real kube-apiserver. No kubelet runs the
/// Deployment: the test runs the binary as its pod would, as the rendered ServiceAccount
/// with the installed ConfigMap's files and the Deployment's arguments.
#[test]
fn helm_installs_upgrades_and_uninstalls_the_chart_on_the_real_kube_apiserver() {
    let k = kube::kube();
    let s = Scratch::new("chart-install");
    let home = s.path("helm");
    let kubeconfig = k.kubeconfig_path();
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    let helm_ok =
        |args: &[&str]| helm(&home, Some(&kubeconfig), args).expect_ok(&format!("helm {args:?}"));
    k.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {BACKENDS}\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {CA_NS}\n"
    ));
    let ca = crate::monitoring::ca_pem_base64(30);
    k.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: b-tls\n  namespace: {CA_NS}\ndata:\n  ca.crt: {ca}\n"
    ));

    // Install: a and b (b's caBundle from the Secret).
    let mut files = BTreeMap::new();
    files.insert(
        "a.yaml",
        apiservice(
            "a.packaging.example.com",
            BACKENDS,
            Some(("autoregister.dev/withdraw-unavailable-after", "5m")),
        ),
    );
    files.insert(
        "b.yaml",
        apiservice(
            "b.packaging.example.com",
            BACKENDS,
            Some((
                "autoregister.dev/inject-ca-from-secret",
                &format!("{CA_NS}/b-tls"),
            )),
        ),
    );
    std::fs::write(s.path("values-1.yaml"), install_values(&files)).unwrap();
    let notes = helm_ok(&[
        "install",
        "ar",
        chart,
        "--namespace",
        RELEASE_NS,
        "--create-namespace",
        "-f",
        s.path("values-1.yaml").to_str().unwrap(),
    ]);
    assert!(
        notes.contains(&format!("kubectl get apiservices -l {LABEL_KEY}")),
        "NOTES.txt says how to see what it registered:\n{notes}"
    );
    for (kind, ns, name) in [
        ("serviceaccount", RELEASE_NS, "ar-autoregister"),
        ("configmap", RELEASE_NS, "ar-autoregister-manifests"),
        ("deployment", RELEASE_NS, "ar-autoregister"),
        ("service", RELEASE_NS, "ar-autoregister-metrics"),
        ("poddisruptionbudget", RELEASE_NS, "ar-autoregister"),
        ("clusterrole", "", "ar-autoregister"),
        ("clusterrolebinding", "", "ar-autoregister"),
        ("role", RELEASE_NS, "ar-autoregister-leader-election"),
        ("role", "default", "ar-autoregister-events"),
        ("rolebinding", BACKENDS, "ar-autoregister-backends"),
        ("role", CA_NS, "ar-autoregister-ca-sources"),
    ] {
        let mut args = vec!["get", kind, name];
        if !ns.is_empty() {
            args.extend(["-n", ns]);
        }
        let (ok, _, err) = k.kubectl(&args);
        assert!(ok, "helm install did not create {kind} {ns}/{name}: {err}");
    }
    let (code, log) = run_as_installed(k, &s, "install");
    assert_eq!(code, 0, "{log}");
    let a = "v1alpha1.a.packaging.example.com";
    let b = "v1alpha1.b.packaging.example.com";
    let c = "v1alpha1.c.packaging.example.com";
    assert_eq!(ours(k), names(&[a, b]), "{log}");
    let got = serde_json::to_value(k.get_apiservice(b).unwrap()).unwrap();
    assert_eq!(
        got["spec"]["caBundle"],
        ca.as_str(),
        "the Secret's CA became b's caBundle"
    );
    let (ok, lease, err) = k.kubectl(&[
        "-n",
        RELEASE_NS,
        "get",
        "lease",
        "autoregister",
        "-o",
        "json",
    ]);
    assert!(
        ok && lease.contains("holderIdentity"),
        "the Lease in the release's namespace: {err}"
    );

    // Upgrade with a changed list: a goes, c comes, b stays.
    files.remove("a.yaml");
    files.insert(
        "c.yaml",
        apiservice("c.packaging.example.com", BACKENDS, None),
    );
    std::fs::write(s.path("values-2.yaml"), install_values(&files)).unwrap();
    helm_ok(&[
        "upgrade",
        "ar",
        chart,
        "--namespace",
        RELEASE_NS,
        "-f",
        s.path("values-2.yaml").to_str().unwrap(),
    ]);
    let (code, log) = run_as_installed(k, &s, "upgrade");
    assert_eq!(code, 0, "{log}");
    assert_eq!(ours(k), names(&[b, c]), "{log}");

    // Upgrade to an empty list: the empty-set guard deregisters nothing.
    std::fs::write(s.path("values-3.yaml"), install_values(&BTreeMap::new())).unwrap();
    helm_ok(&[
        "upgrade",
        "ar",
        chart,
        "--namespace",
        RELEASE_NS,
        "-f",
        s.path("values-3.yaml").to_str().unwrap(),
    ]);
    let (_, log) = run_as_installed(k, &s, "empty");
    assert_eq!(ours(k), names(&[b, c]), "an empty set deregistered:\n{log}");

    // A wrong value is refused by the schema before anything changes.
    let r = helm(
        &home,
        Some(&kubeconfig),
        &[
            "upgrade",
            "ar",
            chart,
            "--namespace",
            RELEASE_NS,
            "--reuse-values",
            "--set",
            "controller.workers=lots",
        ],
    );
    assert!(
        !r.ok && r.stderr.contains("workers"),
        "{}{}",
        r.stdout,
        r.stderr
    );

    // Uninstall: every object of the release goes; the APIServices it registered stay
    // registered (uninstalling the controller does not take APIs down), and so does the
    // Lease the controller created.
    helm_ok(&["uninstall", "ar", "--namespace", RELEASE_NS]);
    for (kind, ns, name) in [
        ("configmap", RELEASE_NS, "ar-autoregister-manifests"),
        ("deployment", RELEASE_NS, "ar-autoregister"),
        ("clusterrole", "", "ar-autoregister"),
        ("role", "default", "ar-autoregister-events"),
        ("rolebinding", BACKENDS, "ar-autoregister-backends"),
        ("role", CA_NS, "ar-autoregister-ca-sources"),
    ] {
        let mut args = vec!["get", kind, name, "--ignore-not-found", "-o", "name"];
        if !ns.is_empty() {
            args.extend(["-n", ns]);
        }
        let (ok, out, err) = k.kubectl(&args);
        assert!(
            ok && out.trim().is_empty(),
            "{kind} {ns}/{name} outlived helm uninstall: {out}{err}"
        );
    }
    assert_eq!(ours(k), names(&[b, c]));
    let list = helm_ok(&["list", "--all-namespaces", "-q"]);
    assert!(list.trim().is_empty(), "{list}");

    // Leave the shared server as it was: these APIServices have no backend.
    for n in [b, c] {
        let (ok, out, err) = k.kubectl(&["delete", "apiservice", n]);
        assert!(ok, "{out}{err}");
    }
}
