//! CA bundles from a Secret, a ConfigMap or a file, through the real binary against the
//! test server: rotation, a source deleted and recreated, bad sources that never produce a
//! write, a kubelet `..data` swap, RBAC denial, a shared source, `plan`, expiry.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/configmap.rs"]
mod configmap;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use autoregister::testserver::TestServer;
use base64::Engine;
use binary::{http_get, stored, wait_until, writes, Proc, Scratch, WAIT};
use serde_json::{json, Value};

const NS: &str = "certs";
const SECRET: &str = "api-ca";

/// A self-signed CA certificate (PEM) named `cn`, valid until `not_after` (y, m, d).
fn ca_until(cn: &str, not_after: (i32, u8, u8)) -> String {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem()
}

fn ca(cn: &str) -> String {
    ca_until(cn, (2040, 1, 1))
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The certificates' base64 bodies, in order: what identifies them whatever the line breaks.
fn bodies(pem: &str) -> Vec<String> {
    pem.split("-----BEGIN CERTIFICATE-----")
        .skip(1)
        .map(|b| {
            b.split("-----END CERTIFICATE-----")
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect()
        })
        .collect()
}

/// The caBundle the server holds for `name`, decoded.
fn bundle(server: &TestServer, name: &str) -> Option<String> {
    let o = stored(server, name)?;
    let b = o["spec"]["caBundle"].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b).ok()?;
    String::from_utf8(bytes).ok()
}

fn holds(server: &TestServer, name: &str, pem: &str) -> bool {
    bundle(server, name).is_some_and(|b| bodies(&b) == bodies(pem))
}

/// A TLS-style Secret: `ca.crt`, `tls.crt` and `tls.key`.
fn tls_secret(name: &str, ca_pem: &str) -> Value {
    let key = rcgen::KeyPair::generate().unwrap();
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "type": "kubernetes.io/tls",
        "data": {"ca.crt": b64(ca_pem), "tls.crt": b64(ca_pem), "tls.key": b64(&key.serialize_pem())},
    })
}

fn put_secret(server: &TestServer, secret: Value) {
    server.seed("secrets", Some(NS), secret);
}

/// An APIService manifest `v1.<group>` whose CA comes from `annotation: value`.
fn sourced(group: &str, annotation: &str, value: &str) -> String {
    format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.{group}\n  \
         annotations:\n    autoregister.dev/{annotation}: \"{value}\"\nspec:\n  group: {group}\n  \
         version: v1\n  groupPriorityMinimum: 100\n  versionPriority: 10\n  service:\n    \
         namespace: ns\n    name: svc\n    port: 443\n"
    )
}

fn from_secret(group: &str, reference: &str) -> String {
    sourced(group, "inject-ca-from-secret", reference)
}

fn events(server: &TestServer, reason: &str, name: &str) -> Vec<Value> {
    server
        .list_objects("events", Some("default"))
        .into_iter()
        .filter(|e| e["reason"] == reason && e["regarding"]["name"] == name)
        .collect()
}

#[test]
fn a_rotated_secret_reaches_the_apiservice_within_5s_and_the_key_is_never_copied() {
    let server = TestServer::start();
    let old = ca("old CA");
    put_secret(&server, tls_secret(SECRET, &old));
    let s = Scratch::new("ca-rotate");
    s.write("a.yaml", &from_secret("a.example.com", "certs/api-ca"));
    let p = Proc::run(&server, &s, &["--health-addr", "127.0.0.1:0"]);
    let name = "v1.a.example.com";
    assert!(wait_until(|| holds(&server, name, &old)), "{}", p.log());
    // The watch names the one Secret (RBAC resourceNames can allow exactly it).
    let watched = server
        .requests()
        .into_iter()
        .filter(|r| r.resource.as_deref() == Some("secrets") && r.verb == "watch")
        .collect::<Vec<_>>();
    assert!(!watched.is_empty(), "{}", p.log());
    for r in &watched {
        assert_eq!(r.namespace.as_deref(), Some(NS));
        assert!(
            r.query.contains("fieldSelector=metadata.name%3Dapi-ca"),
            "{}",
            r.query
        );
    }

    // Rotation: the Secret holds old and new CA for a while, then only the new one.
    let new = ca("new CA");
    let both = format!("{old}{new}");
    let started = Instant::now();
    put_secret(&server, tls_secret(SECRET, &both));
    assert!(
        binary::wait_until_for(Duration::from_secs(5), || holds(&server, name, &both)),
        "rotation not applied within 5 s: {}",
        p.log()
    );
    let took = started.elapsed();
    put_secret(&server, tls_secret(SECRET, &new));
    assert!(
        binary::wait_until_for(Duration::from_secs(5), || holds(&server, name, &new)),
        "{}",
        p.log()
    );
    let b = bundle(&server, name).unwrap();
    assert!(!b.contains("PRIVATE KEY"), "{b}");
    assert_eq!(
        stored(&server, name).unwrap()["spec"]["insecureSkipTLSVerify"],
        Value::Null
    );
    eprintln!("rotation reached the APIService in {took:?}");

    // Expiry: the earliest notAfter of the bundle (2040-01-01T00:00:00Z).
    let (code, metrics) = http_get(&p.ops_addr(), "/metrics");
    assert_eq!(code, 200);
    assert!(
        metrics.contains(
            "autoregister_ca_bundle_expiry_timestamp_seconds{apiservice=\"v1.a.example.com\"} 2208988800"
        ),
        "{metrics}"
    );
    let (_, log) = p.terminate();
    assert!(!log.contains("PRIVATE KEY-----"), "{log}");
}

#[test]
fn two_apiservices_sharing_one_source_follow_it_through_one_watch() {
    let server = TestServer::start();
    let first = ca("first");
    server.seed(
        "configmaps",
        Some(NS),
        json!({"metadata": {"name": "bundle", "namespace": NS}, "data": {"service-ca.crt": first}}),
    );
    let s = Scratch::new("ca-shared");
    for g in ["a.example.com", "b.example.com"] {
        s.write(
            &format!("{g}.yaml"),
            &sourced(g, "inject-ca-from-configmap", "certs/bundle:service-ca.crt"),
        );
    }
    let p = Proc::run(&server, &s, &[]);
    let names = ["v1.a.example.com", "v1.b.example.com"];
    assert!(
        wait_until(|| names.iter().all(|n| holds(&server, n, &first))),
        "{}",
        p.log()
    );
    let second = ca("second");
    server
        .update_object_as("someone", "configmaps", Some(NS), "bundle", |o| {
            o["data"]["service-ca.crt"] = json!(second);
        })
        .unwrap();
    assert!(
        binary::wait_until_for(Duration::from_secs(5), || names
            .iter()
            .all(|n| holds(&server, n, &second))),
        "{}",
        p.log()
    );
    let lists = server
        .requests()
        .into_iter()
        .filter(|r| r.resource.as_deref() == Some("configmaps") && r.verb == "list")
        .count();
    assert_eq!(lists, 1, "one reflector for the shared source");
    p.terminate();
}

#[test]
fn a_deleted_source_keeps_the_last_good_bundle_until_it_is_recreated() {
    let server = TestServer::start();
    let first = ca("first");
    put_secret(&server, tls_secret(SECRET, &first));
    let s = Scratch::new("ca-deleted");
    s.write("a.yaml", &from_secret("a.example.com", "certs/api-ca"));
    let p = Proc::run(&server, &s, &[]);
    let name = "v1.a.example.com";
    assert!(wait_until(|| holds(&server, name, &first)), "{}", p.log());
    let before = writes(&server, name).len();

    server.delete_object("secrets", Some(NS), SECRET).unwrap();
    p.wait_log("Secret certs/api-ca key ca.crt: not found");
    assert!(wait_until(
        || !events(&server, "CABundleInvalid", name).is_empty()
    ));
    assert_eq!(
        writes(&server, name).len(),
        before,
        "no write without a source"
    );
    assert!(holds(&server, name, &first), "the last good bundle stays");

    let second = ca("second");
    put_secret(&server, tls_secret(SECRET, &second));
    assert!(
        binary::wait_until_for(Duration::from_secs(5), || holds(&server, name, &second)),
        "{}",
        p.log()
    );
    p.terminate();
}

#[test]
fn bad_pem_never_writes_and_once_fails_naming_the_source() {
    let server = TestServer::start();
    server.seed(
        "secrets",
        Some(NS),
        json!({"metadata": {"name": SECRET, "namespace": NS}, "data": {"ca.crt": b64("not a certificate")}}),
    );
    let s = Scratch::new("ca-bad-pem");
    s.write("a.yaml", &from_secret("a.example.com", "certs/api-ca"));
    let (code, log) = Proc::run(&server, &s, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("v1.a.example.com: CA bundle not usable, nothing written: Secret certs/api-ca key ca.crt: no PEM certificate found"),
        "{log}"
    );
    assert!(writes(&server, "v1.a.example.com").is_empty(), "{log}");
    assert_eq!(
        events(&server, "CABundleInvalid", "v1.a.example.com").len(),
        1
    );

    // Running: a good bundle first, then garbage: nothing is written, the good one stays.
    let good = ca("good");
    put_secret(&server, tls_secret(SECRET, &good));
    let p = Proc::run(&server, &s, &[]);
    let name = "v1.a.example.com";
    assert!(wait_until(|| holds(&server, name, &good)), "{}", p.log());
    let before = writes(&server, name).len();
    server.seed(
        "secrets",
        Some(NS),
        json!({"metadata": {"name": SECRET, "namespace": NS}, "data": {"ca.crt": b64("")}}),
    );
    p.wait_log("Secret certs/api-ca key ca.crt: empty");
    assert_eq!(writes(&server, name).len(), before);
    assert!(holds(&server, name, &good));
    p.terminate();
}

#[test]
fn a_key_instead_of_a_certificate_is_an_error_and_never_copied() {
    let server = TestServer::start();
    let secret = tls_secret(SECRET, &ca("CA"));
    let key_b64 = secret["data"]["tls.key"].as_str().unwrap().to_string();
    put_secret(&server, secret);
    let s = Scratch::new("ca-key");
    s.write(
        "a.yaml",
        &from_secret("a.example.com", "certs/api-ca:tls.key"),
    );
    let (code, log) = Proc::run(&server, &s, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("Secret certs/api-ca key tls.key: block 1 is a private key (PRIVATE KEY)"),
        "{log}"
    );
    let key = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(key_b64)
            .unwrap(),
    )
    .unwrap();
    let body: String = key.lines().nth(1).unwrap().to_string();
    assert!(!log.contains(&body), "key material in the log: {log}");
    assert!(writes(&server, "v1.a.example.com").is_empty());
    for e in server.list_objects("events", Some("default")) {
        assert!(!e.to_string().contains(&body), "key material in an Event");
    }
}

#[test]
fn a_file_source_follows_the_kubelet_data_swap() {
    let server = TestServer::start();
    let s = Scratch::new("ca-file");
    let mut volume = configmap::ConfigMapDir::new(s.path("ca-volume"));
    let first = ca("first");
    volume.publish(&BTreeMap::from([("ca.crt".to_string(), first.clone())]));
    let path = s.path("ca-volume").join("ca.crt");
    s.write(
        "a.yaml",
        &sourced(
            "a.example.com",
            "inject-ca-from-file",
            path.to_str().unwrap(),
        ),
    );
    let p = Proc::run(&server, &s, &[]);
    let name = "v1.a.example.com";
    assert!(wait_until(|| holds(&server, name, &first)), "{}", p.log());
    let second = ca("second");
    volume.publish(&BTreeMap::from([("ca.crt".to_string(), second.clone())]));
    assert!(
        binary::wait_until_for(Duration::from_secs(5), || holds(&server, name, &second)),
        "{}",
        p.log()
    );
    p.terminate();
}

#[test]
fn a_forbidden_watch_is_reported_naming_the_grant_and_a_forbidden_read_fails_once() {
    let server = TestServer::start();
    let good = ca("good");
    put_secret(&server, tls_secret(SECRET, &good));
    server.deny("watch", "secrets", Some(NS), Some(SECRET));
    let s = Scratch::new("ca-forbidden");
    s.write("a.yaml", &from_secret("a.example.com", "certs/api-ca"));
    let p = Proc::run(&server, &s, &[]);
    // Listing is allowed: the bundle is read and written.
    assert!(
        wait_until(|| holds(&server, "v1.a.example.com", &good)),
        "{}",
        p.log()
    );
    p.wait_log(
        "CA source Secret certs/api-ca: cannot watch it, forbidden by RBAC (Forbidden (403): \
         secrets \"api-ca\" is forbidden: User \"system:anonymous\" cannot watch resource \"secrets\"",
    );
    p.wait_log("grant list and watch on secrets with resourceNames [api-ca] in namespace certs");
    p.terminate();

    // Nothing may be read: --once fails naming the Secret and the denial.
    server.deny("list", "secrets", Some(NS), Some(SECRET));
    let s = Scratch::new("ca-forbidden-once");
    s.write("b.yaml", &from_secret("b.example.com", "certs/api-ca"));
    let (code, log) = Proc::run(&server, &s, &["--once", "--timeout", "3s"]).wait_exit(WAIT);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("v1.b.example.com: CA bundle not available: Secret certs/api-ca key ca.crt: cannot be read"),
        "{log}"
    );
    assert!(log.contains("cannot list it, forbidden by RBAC"), "{log}");
    assert!(writes(&server, "v1.b.example.com").is_empty());
}

#[test]
fn plan_prints_the_bundle_as_subject_fingerprint_and_expiry_and_a_bad_source_as_blocked() {
    let server = TestServer::start();
    let pem = ca_until("example CA", (2031, 7, 9));
    put_secret(&server, tls_secret(SECRET, &pem));
    let s = Scratch::new("ca-plan");
    s.write("a.yaml", &from_secret("a.example.com", "certs/api-ca"));
    s.write("b.yaml", &from_secret("b.example.com", "certs/missing"));
    let (code, out) = Proc::command("plan", &server, &s, &[]).wait_exit_stdout_first(WAIT);
    assert_eq!(code, 0, "{out}");
    eprintln!("{out}");
    assert!(
        out.contains("    caBundle from Secret certs/api-ca key ca.crt: 1 certificate\n      subject=CN=example CA sha256="),
        "{out}"
    );
    assert!(out.contains("notAfter=2031-07-09T00:00:00Z"), "{out}");
    assert!(
        out.contains(
            "v1.b.example.com  2C    blocked  -          desired, absent: CA bundle not usable: \
             Secret certs/missing key ca.crt: not found"
        ),
        "{out}"
    );
    // -o json: the same summary, and no base64 of the bundle anywhere.
    let (code, json_out) =
        Proc::command("plan", &server, &s, &["-o", "json"]).wait_exit_stdout_first(WAIT);
    assert_eq!(code, 0, "{json_out}");
    let start = json_out.find('{').unwrap();
    let end = json_out.rfind('}').unwrap();
    let doc: Value = serde_json::from_str(&json_out[start..=end]).unwrap();
    let a = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "v1.a.example.com")
        .unwrap();
    assert_eq!(
        a["caBundle"]["source"], "Secret certs/api-ca key ca.crt",
        "{a}"
    );
    assert_eq!(a["caBundle"]["certificates"][0]["subject"], "CN=example CA");
    assert_eq!(
        a["caBundle"]["certificates"][0]["notAfter"],
        "2031-07-09T00:00:00Z"
    );
    let b = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "v1.b.example.com")
        .unwrap();
    assert_eq!(b["action"], "blocked", "{b}");
    for body in bodies(&pem) {
        assert!(
            !json_out.contains(&body[..40]),
            "base64 in the plan: {json_out}"
        );
    }
    for body in bodies(&pem) {
        assert!(!out.contains(&body[..40]), "base64 in the plan: {out}");
    }
    // Only dry runs: nothing stored.
    assert!(stored(&server, "v1.a.example.com").is_none());
    assert!(out.contains("dry run: accepted by the server"), "{out}");
}

#[test]
fn a_bundle_expiring_soon_gets_a_warning_event() {
    let server = TestServer::start();
    let pem = ca_until("short-lived", binary::date_in_days(3));
    put_secret(&server, tls_secret(SECRET, &pem));
    let s = Scratch::new("ca-expiry");
    s.write("a.yaml", &from_secret("a.example.com", "certs/api-ca"));
    let (code, log) = Proc::run(&server, &s, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("v1.a.example.com: the CA bundle's first certificate expires at"),
        "{log}"
    );
    assert_eq!(
        events(&server, "CABundleExpiring", "v1.a.example.com").len(),
        1
    );
    // Far from expiry with a 1-day threshold: no warning.
    let server = TestServer::start();
    put_secret(&server, tls_secret(SECRET, &pem));
    let (code, log) =
        Proc::run(&server, &s, &["--once", "--ca-expiry-warning", "24h"]).wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    assert!(!log.contains("expires at"), "{log}");
}

#[test]
fn a_literal_bundle_beside_a_source_is_a_manifest_error_naming_both() {
    let server = TestServer::start();
    let s = Scratch::new("ca-both");
    let m =
        from_secret("a.example.com", "certs/api-ca") + &format!("  caBundle: {}\n", b64(&ca("x")));
    s.write("a.yaml", &m);
    let (code, log) = Proc::run(&server, &s, &["--once"]).wait_exit(WAIT);
    assert_eq!(code, 2, "{log}");
    assert!(
        log.contains("spec.caBundle and annotation autoregister.dev/inject-ca-from-secret both set the CA bundle"),
        "{log}"
    );
}

/// An APIService object for the library, `v1.<group>`, served by `ns/svc`.
fn lib_object(group: &str) -> autoregister::api::APIService {
    serde_json::from_value(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": format!("v1.{group}")},
        "spec": {"group": group, "version": "v1", "groupPriorityMinimum": 100,
                 "versionPriority": 10, "service": {"namespace": "ns", "name": "svc", "port": 443}},
    }))
    .unwrap()
}

#[test]
fn embedders_name_a_source_on_the_object_or_hand_their_own_ca_in() {
    use autoregister::client::Client;
    use autoregister::controller::{Controller, ControllerOptions};
    use autoregister::CaSource;

    let server = TestServer::start();
    let first = ca("first");
    put_secret(&server, tls_secret(SECRET, &first));
    let ctl = Controller::new(
        Client::new(server.client_config()).unwrap(),
        ControllerOptions::new("example.com/registered-by"),
    );
    // From a Secret, through the same annotation the manifests use.
    let mut sourced = lib_object("a.example.com");
    CaSource::Secret {
        namespace: NS.into(),
        name: SECRET.into(),
        key: "ca.crt".into(),
    }
    .annotate(&mut sourced);
    ctl.add_api_service_to_sync(sourced);
    // An embedded aggregated API server's own CA, handed in directly.
    let own = ca("embedded server CA");
    let mut direct = lib_object("b.example.com");
    direct.spec.ca_bundle = Some(own.clone().into_bytes().into_boxed_slice());
    ctl.add_api_service_to_sync(direct);
    ctl.start();
    assert!(ctl.wait_converged(WAIT).is_ok());
    assert!(holds(&server, "v1.a.example.com", &first));
    assert!(holds(&server, "v1.b.example.com", &own));
    // Rotation follows for the embedder too.
    let second = ca("second");
    put_secret(&server, tls_secret(SECRET, &second));
    assert!(binary::wait_until_for(Duration::from_secs(5), || holds(
        &server,
        "v1.a.example.com",
        &second
    )));
    let metrics = ctl.render_metrics();
    for name in ["v1.a.example.com", "v1.b.example.com"] {
        assert!(
            metrics.contains(&format!(
                "autoregister_ca_bundle_expiry_timestamp_seconds{{apiservice=\"{name}\"}} 2208988800"
            )),
            "{metrics}"
        );
    }
    let ours = || -> Vec<String> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
            .map(|c| c.trim_end().to_string())
            .filter(|c| {
                c == "ca-sources"
                    || c.starts_with("reflector-secre")
                    || c.starts_with("autoregister-ti")
            })
            .collect()
    };
    // The polling is a task of the controller's timers thread, not a thread of its own.
    let mut threads = ours();
    threads.sort();
    assert_eq!(
        threads,
        ["autoregister-ti", "reflector-secre"],
        "the controller's timers and one reflector"
    );
    // Removed: its metric is gone.
    ctl.remove_api_service_to_sync("v1.a.example.com");
    assert!(!ctl
        .render_metrics()
        .contains("apiservice=\"v1.a.example.com\""));
    ctl.shutdown();
    // Nothing leaks: the timers and the sources' reflectors end with the controller.
    // (The only controller of this test process; the others run in child processes.)
    assert!(wait_until(|| ours().is_empty()), "{:?}", ours());
}

#[test]
fn the_test_server_serves_secrets_and_configmaps_with_field_selectors_versions_and_404s() {
    use autoregister::api::{ConfigMap, Secret, WatchEvent};
    use autoregister::client::{Api, Canceller, Client, DeleteParams, ListParams, WatchParams};

    let server = TestServer::start();
    let client = Client::new(server.client_config()).unwrap();
    let secrets = Api::<Secret>::namespaced(client.clone(), NS);
    let mk = |name: &str, v: &str| -> Secret {
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"ca.crt": b64(v)}}))
            .unwrap()
    };
    let a = secrets.create(&mk("a", "one")).unwrap();
    secrets.create(&mk("b", "two")).unwrap();
    assert_eq!(
        a.type_.as_deref(),
        Some("Opaque"),
        "defaulted as the API does"
    );
    assert!(secrets
        .create(&mk("a", "again"))
        .unwrap_err()
        .is_already_exists());
    // A list pinned to one name, from the core group's path.
    let one = secrets
        .list(&ListParams {
            field_selector: Some("metadata.name=b".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(one.items.len(), 1);
    assert_eq!(one.items[0].metadata.name.as_deref(), Some("b"));
    // A watch pinned to `a` sees a's update, not b's.
    let cancel = Canceller::new();
    let mut events = secrets
        .watch(
            &WatchParams {
                resource_version: one.metadata.resource_version.clone().unwrap_or_default(),
                field_selector: Some("metadata.name=a".into()),
                timeout_seconds: 5,
                ..Default::default()
            },
            &cancel,
        )
        .unwrap();
    let mut b = secrets.get("b").unwrap();
    b.data = Some([("ca.crt".to_string(), b64("three"))].into());
    secrets.update(&b).unwrap();
    let mut a2 = a.clone();
    a2.data = Some([("ca.crt".to_string(), b64("four"))].into());
    let a2 = secrets.update(&a2).unwrap();
    assert_ne!(a2.metadata.resource_version, a.metadata.resource_version);
    match events.next() {
        Some(Ok(WatchEvent::Modified(s))) => {
            assert_eq!(s.metadata.name.as_deref(), Some("a"));
            assert_eq!(s.data.unwrap()["ca.crt"], b64("four"));
        }
        other => panic!("{other:?}"),
    }
    // Stale resourceVersion: Conflict.
    assert!(secrets.update(&a).unwrap_err().is_conflict());
    secrets.delete("a", &DeleteParams::default()).unwrap();
    assert!(secrets.get("a").unwrap_err().is_not_found());
    assert!(secrets
        .delete("a", &DeleteParams::default())
        .unwrap_err()
        .is_not_found());
    cancel.cancel();

    // ConfigMaps: data as text, binaryData base64; a bad body is refused.
    let cms = Api::<ConfigMap>::namespaced(client, NS);
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "c"}, "data": {"ca.crt": "pem"}, "binaryData": {"b": b64("x")}}),
    )
    .unwrap();
    cms.create(&cm).unwrap();
    assert_eq!(cms.get("c").unwrap().data.unwrap()["ca.crt"], "pem");
    let bad: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "d"}, "binaryData": {"b": "!!"}}))
            .unwrap();
    assert_eq!(
        cms.create(&bad).unwrap_err().as_api().map(|e| e.code),
        Some(400)
    );
    // RBAC denial: 403 worded as kube-apiserver's.
    server.deny("get", "configmaps", Some(NS), Some("c"));
    let e = cms.get("c").unwrap_err();
    assert!(e.is_forbidden(), "{e}");
    assert!(
        e.to_string().contains(
            "configmaps \"c\" is forbidden: User \"system:anonymous\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"certs\""
        ),
        "{e}"
    );
    server.allow_all();
    assert!(cms.get("c").is_ok());
}
