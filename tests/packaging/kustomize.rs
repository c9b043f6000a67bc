//! The kustomize base (`deploy/Kustomization`) and its overlay (`examples/kustomize-overlay`):
//! `kubectl kustomize` renders deploy/'s objects and the overlay's changes, and the real
//! kube-apiserver accepts both with `kubectl apply -k --dry-run=server`.

use std::collections::BTreeMap;

use autoregister::api::DEFAULT_LABEL_KEY;
use serde_json::Value;

use crate::binary::Scratch;
use crate::{id, objects_in, repo, yaml_docs};

fn kustomize(dir: &str) -> Vec<Value> {
    let out = std::process::Command::new("kubectl")
        .args(["kustomize", repo().join(dir).to_str().unwrap()])
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .expect("kubectl (.ci/run installs it)");
    assert!(
        out.status.success(),
        "kubectl kustomize {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_docs(&String::from_utf8_lossy(&out.stdout), dir)
}

fn keyed(objs: Vec<Value>) -> BTreeMap<String, Value> {
    objs.into_iter().map(|v| (id(&v), v)).collect()
}

#[test]
fn kubectl_kustomize_renders_deploy_and_the_overlay_and_the_real_server_accepts_them() {
    // The base is every object of deploy/*.yaml, unchanged.
    let base = keyed(kustomize("deploy"));
    let plain = keyed(objects_in(&repo().join("deploy")));
    assert_eq!(
        base, plain,
        "kubectl kustomize deploy/ differs from deploy/*.yaml"
    );

    // The overlay: the image set, one more manifest file that registers one APIService;
    // everything else as the base.
    let overlay = keyed(kustomize("examples/kustomize-overlay"));
    assert_eq!(
        overlay.keys().collect::<Vec<_>>(),
        base.keys().collect::<Vec<_>>()
    );
    let d = &overlay["Deployment autoregister/autoregister"];
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/platform/autoregister:0.1.0"
    );
    let cm = &overlay["ConfigMap autoregister/autoregister-manifests"];
    let base_cm = &base["ConfigMap autoregister/autoregister-manifests"];
    let data = cm["data"].as_object().unwrap();
    assert_eq!(data.len(), base_cm["data"].as_object().unwrap().len() + 1);
    let s = Scratch::new("kustomize");
    for (file, text) in data {
        s.write(file, text.as_str().unwrap());
    }
    let desired = autoregister::controller::load(&s.manifests(), DEFAULT_LABEL_KEY)
        .unwrap_or_else(|e| panic!("the overlay's manifests: {e:?}"));
    assert_eq!(
        desired.keys().collect::<Vec<_>>(),
        ["v1alpha1.wardle.example.com"]
    );
    for (k, v) in &overlay {
        if !k.starts_with("Deployment ") && !k.starts_with("ConfigMap ") {
            assert_eq!(v, &base[k], "{k}: the overlay changed it");
        }
    }

    // The real server accepts both. The namespaces the RBAC grants in must exist (a server
    // dry run creates nothing, so the Namespace of the base is created for real first).
    let k = crate::kube::kube();
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: monitoring\n");
    k.apply(&std::fs::read_to_string(repo().join("deploy/00-namespace.yaml")).unwrap());
    for dir in ["deploy", "examples/kustomize-overlay"] {
        let path = repo().join(dir);
        let (ok, out, err) =
            k.kubectl(&["apply", "-k", path.to_str().unwrap(), "--dry-run=server"]);
        assert!(ok, "kubectl apply -k {dir} --dry-run=server: {out}{err}");
        assert!(
            out.contains("deployment.apps/autoregister created (server dry run)")
                && out.contains("configmap/autoregister-manifests created (server dry run)"),
            "{out}"
        );
    }
    // A dry run writes nothing.
    let (ok, out, _) = k.kubectl(&["-n", "autoregister", "get", "deployments", "-o", "name"]);
    assert!(ok && out.trim().is_empty(), "{out}");
}
