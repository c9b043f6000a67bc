//! A kube-apiserver older than the oldest supported Kubernetes is refused at start-up, in
//! one line naming it and the version needed, by `run`, `run --once` and `plan`, with
//! nothing asked of it but `/version`; a supported one (a managed platform's `31+`
//! included) is not. Through the real binary, against a scripted server.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/scripted.rs"]
mod scripted;

use std::process::Command;

use binary::{exe, manifest, Scratch};
use scripted::{Answer, Server};
use serde_json::json;

/// A server whose `/version` says `minor` (`git` as its name) and that lists no
/// APIServices; every other request is answered 503, so a command that gets past the check
/// fails on its own terms.
fn server(minor: &str, git: &str) -> Server {
    let version = json!({"major": "1", "minor": minor, "gitVersion": git});
    let empty = json!({"kind": "APIServiceList", "apiVersion": "apiregistration.k8s.io/v1",
                       "metadata": {"resourceVersion": "1"}, "items": []});
    Server::with_handler(move |r| match (r.method.as_str(), r.path()) {
        ("GET", "/version") => Answer::json(200, &version),
        ("GET", "/apis/apiregistration.k8s.io/v1/apiservices") if r.query("watch").is_none() => {
            Answer::json(200, &empty)
        }
        _ => Answer::status(503, "ServiceUnavailable", "scripted: not asked for"),
    })
}

fn kubeconfig(s: &Scratch, server: &Server) -> std::path::PathBuf {
    let kc = s.path("kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n\
             users:\n- name: u\n  user: {{}}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n",
            server.url()
        ),
    )
    .unwrap();
    kc
}

/// Runs `args` against `server`: (exit code, stderr).
fn autoregister(server: &Server, args: &[&str]) -> (Option<i32>, String) {
    let s = Scratch::new("server-version");
    s.write("a.yaml", &manifest("a.version.example.com", &[], 10));
    let out = Command::new(exe())
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig(&s, server))
        .arg("--manifests")
        .arg(s.manifests())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_server_older_than_the_oldest_supported_is_refused_naming_both_versions() {
    let old = server("30", "v1.30.9");
    let want = "autoregister: kube-apiserver v1.30.9 is too old: autoregister needs Kubernetes v1.31 or newer (the oldest version it is tested on; see docs/compatibility.md)";
    for args in [&["run"][..], &["run", "--once"], &["plan"]] {
        let (code, err) = autoregister(&old, args);
        assert_eq!(code, Some(1), "{args:?}:\n{err}");
        assert!(
            err.lines().any(|l| l == want),
            "{args:?}: no {want:?} in:\n{err}"
        );
    }
    // Nothing was asked but the version and (plan, before it) the list: no watch, no
    // Lease, no write, no dry run.
    let asked: Vec<String> = old
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path()))
        .collect();
    assert!(
        asked
            .iter()
            .all(|a| a == "GET /version" || a == "GET /apis/apiregistration.k8s.io/v1/apiservices"),
        "{asked:?}"
    );
}

#[test]
fn a_supported_server_goes_on_past_the_check() {
    // GKE and EKS write the minor as "31+".
    for (minor, git) in [("31+", "v1.31.14-gke.100"), ("37", "v1.37.2")] {
        let ok = server(minor, git);
        let (code, err) = autoregister(&ok, &["plan"]);
        assert!(!err.contains("too old"), "{git}:\n{err}");
        // Past the check the plan dry-runs its create, which the scripted server refuses.
        assert_eq!(code, Some(1), "{git}:\n{err}");
        assert!(
            ok.requests().iter().any(|r| r.method == "POST"),
            "{git}: no dry run past the check:\n{err}"
        );
    }
}
