//! Impersonation through the real binary: the kubeconfig's `as*` fields and the `--as*`
//! flags become `Impersonate-*` headers on every request (watches too), and the test
//! server honours them only for a user allowed to impersonate, as kube-apiserver does.
#![cfg(feature = "testing")]

use autoregister::testserver::TestServer;

#[path = "support/binary.rs"]
mod binary;

use binary::{manifest, stored, wait_until, Proc, Scratch, WAIT};

const ADMIN: &str = "admin-token-P4s8Kw2Q";
const PLAIN: &str = "plain-token-Z7c1Mn5R";

fn server() -> TestServer {
    TestServer::builder()
        .tls(true)
        .user(ADMIN, "admin")
        .user(PLAIN, "plain")
        .impersonator("admin")
        .start()
        .unwrap()
}

/// A kubeconfig for the TLS `server` whose user has `token` and the extra `user` fields
/// (indented 4).
fn kubeconfig(s: &Scratch, server: &TestServer, token: &str, user: &str) -> std::path::PathBuf {
    let ca_file = s.path("ca.pem");
    std::fs::write(&ca_file, server.ca_pem().unwrap()).unwrap();
    let path = s.path("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\n    \
             certificate-authority: {}\nusers:\n- name: t\n  user:\n    token: {token}\n{user}\
             contexts:\n- name: t\n  context:\n    cluster: t\n    user: t\ncurrent-context: t\n",
            server.url(),
            ca_file.display()
        ),
    )
    .unwrap();
    path
}

#[test]
fn every_request_and_the_watch_act_as_the_impersonated_user() {
    let server = server();
    let s = Scratch::new("impersonate-watch");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let kc = kubeconfig(
        &s,
        &server,
        ADMIN,
        "    as: nobody\n    as-groups: [ignored]\n",
    );
    // The flags replace the kubeconfig's `as` and `as-groups`.
    let p = Proc::run_with_kubeconfig(
        &kc,
        &s,
        &[
            "--as",
            "plain",
            "--as-group",
            "team-a",
            "--as-group",
            "team-b",
        ],
    );
    assert!(
        wait_until(|| stored(&server, "v1.a.example.com").is_some()
            && server.requests().iter().any(|r| r.verb == "watch")),
        "{}",
        p.log()
    );
    let (_, log) = p.terminate();
    let api: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.resource.is_some())
        .collect();
    assert!(api.iter().any(|r| r.verb == "create"), "{log}");
    for r in &api {
        assert_eq!(r.user.as_deref(), Some("plain"), "{} {}", r.verb, r.path);
        assert_eq!(r.impersonated_by.as_deref(), Some("admin"));
        assert_eq!(r.groups, ["team-a", "team-b"], "{} {}", r.verb, r.path);
    }
}

#[test]
fn impersonation_is_refused_without_the_permission_or_as_an_identity_without_rights() {
    let server = server();
    for (i, (token, user, flags, want)) in [
        (PLAIN, "    as: admin\n", &[][..], "cannot impersonate"),
        (ADMIN, "    as: system:anonymous\n", &[][..], "Forbidden"),
        (ADMIN, "", &["--as", "system:anonymous"][..], "Forbidden"),
        (
            ADMIN,
            "",
            &["--as-group", "system:masters"][..],
            "needs a user",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let s = Scratch::new(&format!("impersonate-refused-{i}"));
        s.write("a.yaml", &manifest("a.example.com", &[], 10));
        let kc = kubeconfig(&s, &server, token, user);
        let m = s.manifests();
        let mut args = vec![
            "plan",
            "--manifests",
            m.to_str().unwrap(),
            "--kubeconfig",
            kc.to_str().unwrap(),
        ];
        args.extend_from_slice(flags);
        let (code, log) = Proc::spawn(&args).wait_exit(WAIT);
        assert_ne!(code, 0, "case {i}: {log}");
        assert!(log.contains(want), "case {i}: {log}");
    }
    // Allowed: admin acting as a known user, or as anyone in system:masters.
    for (i, flags) in [
        &["--as", "plain"][..],
        &["--as", "x", "--as-group", "system:masters"],
    ]
    .into_iter()
    .enumerate()
    {
        let s = Scratch::new(&format!("impersonate-allowed-{i}"));
        s.write("a.yaml", &manifest("a.example.com", &[], 10));
        let kc = kubeconfig(&s, &server, ADMIN, "");
        let m = s.manifests();
        let mut args = vec![
            "plan",
            "--manifests",
            m.to_str().unwrap(),
            "--kubeconfig",
            kc.to_str().unwrap(),
        ];
        args.extend_from_slice(flags);
        let (code, log) = Proc::spawn(&args).wait_exit(WAIT);
        assert_eq!(code, 0, "allowed {i}: {log}");
    }
}
