//! Availability through the binary against the test server in kube-apiserver mode, which
//! plays kube-aggregator's availability controller (its discovery check dials the TLS
//! backends these tests start on loopback): transitions are logged, recorded as
//! Events and exported as metrics; with withdrawal on, an APIService unavailable too long is
//! deleted and registered again once its Service has a ready endpoint; a backend that listens
//! but fails discovery is withdrawn with growing holds; `never`, local and onstart objects
//! stay; withdrawal is off by default; `--once --wait-available` waits for availability.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/promtext.rs"]
mod promtext;
#[path = "support/tls_backend.rs"]
mod tls_backend;

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant, SystemTime};

use autoregister::testserver::TestServer;
use serde_json::{json, Value};

use binary::{http_get, stored, uid, wait_until, Proc, Scratch};
use tls_backend::{Issued, Mode, TlsBackend};

const ANNOTATION: &str = "autoregister.dev/withdraw-unavailable-after";

fn kas() -> TestServer {
    TestServer::builder()
        .kube_apiserver(true)
        .start()
        .expect("test server")
}

/// An APIService manifest `v1.<group>` backed by `namespace/service` (none: local), with
/// optional annotation value and ownership label.
fn manifest(
    group: &str,
    service: Option<(&str, &str)>,
    annotation: Option<&str>,
    label: Option<&str>,
) -> String {
    let mut meta = format!("  name: v1.{group}\n");
    if let Some(a) = annotation {
        meta.push_str(&format!("  annotations:\n    {ANNOTATION}: \"{a}\"\n"));
    }
    if let Some(l) = label {
        meta.push_str(&format!(
            "  labels:\n    autoregister.dev/automanaged: \"{l}\"\n"
        ));
    }
    let service = match service {
        Some((ns, name)) => format!(
            "  service:\n    namespace: {ns}\n    name: {name}\n    port: 443\n  insecureSkipTLSVerify: true\n"
        ),
        None => String::new(),
    };
    format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n{meta}spec:\n  \
         group: {group}\n  version: v1\n  groupPriorityMinimum: 100\n  versionPriority: 10\n{service}---\n"
    )
}

/// A TLS backend serving `v1.<group>` for Service `ns/svc`, listening where that Service
/// will point (created later by [`create_service`]), and a manifest registering it with
/// its CA as `caBundle`.
fn backend(group: &str, annotation: Option<&str>) -> (TlsBackend, String) {
    // Any loopback address will do: the port, picked by binding, makes the pair unique.
    let listener = TcpListener::bind("127.1.0.254:0").unwrap();
    let issued = Issued::new("backend-ca", &["svc.ns.svc"]);
    let b = TlsBackend::start(listener, &issued, group, "v1");
    let text = manifest(group, Some(("ns", "svc")), annotation, None)
        .replace(
            "    port: 443\n",
            &format!("    port: {}\n", b.addr().port()),
        )
        .replace(
            "  insecureSkipTLSVerify: true\n",
            &format!("  caBundle: {}\n", base64(&issued.ca_pem)),
        );
    (b, text)
}

fn base64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Service `ns/name` whose ClusterIP and port are `addr`.
fn create_service(server: &TestServer, ns: &str, name: &str, addr: SocketAddr) {
    server
        .create_object_as(
            "test",
            "services",
            Some(ns),
            json!({
                "metadata": {"name": name},
                "spec": {"clusterIP": addr.ip().to_string(),
                         "ports": [{"name": "https", "port": addr.port(), "targetPort": 8443}]},
            }),
        )
        .unwrap();
}

fn create_slice(server: &TestServer, ns: &str, service: &str, ready: bool) {
    server
        .create_object_as(
            "test",
            "endpointslices",
            Some(ns),
            json!({
                "metadata": {
                    "name": format!("{service}-x1"),
                    "labels": {"kubernetes.io/service-name": service},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": ready}}],
                "ports": [{"name": "https", "port": 8443, "protocol": "TCP"}],
            }),
        )
        .unwrap();
}

/// `(status, reason)` of the stored object's Available condition.
fn condition(server: &TestServer, name: &str) -> Option<(String, String)> {
    let o = stored(server, name)?;
    let c = o["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")?
        .clone();
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
    ))
}

fn metric(addr: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let body = http_get(addr, "/metrics").1;
    promtext::parse(&body).ok()?.value(name, labels)
}

fn events(server: &TestServer, name: &str, reason: &str) -> Vec<Value> {
    server
        .list_objects("events", Some("default"))
        .into_iter()
        .filter(|e| e["regarding"]["name"] == name && e["reason"] == reason)
        .collect()
}

/// Our client's writes to `name` (verb, time), oldest first.
fn our_writes(server: &TestServer, name: &str) -> Vec<(String, SystemTime)> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.name.as_deref() == Some(name) && binary::is_write(r) && r.code < 300)
        .map(|r| (r.verb, r.time))
        .collect()
}

/// Namespaces in which our client listed or watched `resource`.
fn watched(server: &TestServer, resource: &str) -> Vec<String> {
    let mut ns: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.resource.as_deref() == Some(resource))
        .map(|r| r.namespace.unwrap_or_else(|| "<all>".into()))
        .collect();
    ns.sort();
    ns.dedup();
    ns
}

#[test]
fn a_missing_backend_is_withdrawn_after_the_duration_and_restored_when_endpoints_are_ready() {
    let server = kas();
    let scratch = Scratch::new("avail-cycle");
    let (backend, text) = backend("a.example.com", None);
    scratch.write("a.yaml", &text);
    let p = Proc::run(
        &server,
        &scratch,
        &[
            "--withdraw-unavailable",
            "1s",
            "--health-addr",
            "127.0.0.1:0",
        ],
    );
    let addr = p.ops_addr();
    let name = "v1.a.example.com";

    // Seen: one log line with upstream's reason and message, an Event, the metrics.
    p.wait_log(
        r#"v1.a.example.com is unavailable: ServiceNotFound (service/svc in "ns" is not present); cause ServiceNotFound"#,
    );
    let unavailable_at = Instant::now();
    let first_uid = uid(&server, name);
    assert!(wait_until(|| {
        metric(
            &addr,
            "autoregister_apiservice_available",
            &[("apiservice", name)],
        ) == Some(0.0)
            && metric(
                &addr,
                "autoregister_apiservice_availability_info",
                &[
                    ("apiservice", name),
                    ("status", "False"),
                    ("reason", "ServiceNotFound"),
                    ("cause", "ServiceNotFound"),
                ],
            ) == Some(1.0)
            && !events(&server, name, "Unavailable").is_empty()
    }));

    // Withdrawn after 1 s unavailable: deleted with the UID precondition, held absent.
    assert!(
        wait_until(|| stored(&server, name).is_none()),
        "{}",
        p.log()
    );
    assert!(
        unavailable_at.elapsed() >= Duration::from_millis(800),
        "withdrawn {:?} after the unavailable line",
        unavailable_at.elapsed()
    );
    let delete = server
        .requests()
        .into_iter()
        .find(|r| r.verb == "delete" && r.name.as_deref() == Some(name))
        .unwrap();
    assert_eq!(delete.uid_precondition, first_uid);
    p.wait_log("v1.a.example.com withdrawn after 1s unavailable: ServiceNotFound");
    assert!(wait_until(|| metric(
        &addr,
        "autoregister_apiservice_withdrawn",
        &[("apiservice", name)]
    ) == Some(1.0)
        && events(&server, name, "Withdrawn").len() == 1));
    assert!(events(&server, name, "Deregistered").is_empty());

    // Watched, only where the desired service lives.
    assert!(wait_until(
        || watched(&server, "services") == ["ns"] && watched(&server, "endpointslices") == ["ns"]
    ));

    // A Service without endpoints is not a ready backend: still absent.
    create_service(&server, "ns", "svc", backend.addr());
    create_slice(&server, "ns", "svc", false);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        stored(&server, name).is_none(),
        "restored too early:\n{}",
        p.log()
    );

    // A ready endpoint: registered again, then available (Passed).
    server.delete_object("endpointslices", Some("ns"), "svc-x1");
    create_slice(&server, "ns", "svc", true);
    assert!(
        wait_until(|| stored(&server, name).is_some()),
        "{}",
        p.log()
    );
    p.wait_log("v1.a.example.com restored after");
    p.wait_log("v1.a.example.com is available (Passed)");
    assert_eq!(
        condition(&server, name),
        Some(("True".into(), "Passed".into()))
    );
    assert!(wait_until(|| metric(
        &addr,
        "autoregister_apiservice_available",
        &[("apiservice", name)]
    ) == Some(1.0)
        && metric(
            &addr,
            "autoregister_apiservice_withdrawn",
            &[("apiservice", name)]
        ) == Some(0.0)
        && events(&server, name, "Restored").len() == 1
        && events(&server, name, "Registered").len() == 1
        && events(&server, name, "Available").len() == 1));
    assert_eq!(
        metric(
            &addr,
            "autoregister_apiservice_withdrawals_total",
            &[("apiservice", name)]
        ),
        Some(1.0)
    );
    let writes: Vec<String> = our_writes(&server, name).into_iter().map(|w| w.0).collect();
    assert_eq!(writes, ["create", "delete", "create"]);
    let metrics = http_get(&addr, "/metrics").1;
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    // The cycle, for people reading `--nocapture` output.
    println!("{log}");
    for line in metrics.lines().filter(|l| l.contains("apiservice")) {
        println!("{line}");
    }
}

#[test]
fn a_backend_that_fails_discovery_is_withdrawn_again_with_doubling_holds() {
    let server = kas();
    // A backend that listens but answers its discovery with 503.
    let (backend, text) = backend("a.example.com", None);
    backend.set_mode(Mode::Status(503));
    create_service(&server, "ns", "svc", backend.addr());
    create_slice(&server, "ns", "svc", true);
    let scratch = Scratch::new("avail-flap");
    scratch.write("a.yaml", &text);
    let p = Proc::run(&server, &scratch, &["--withdraw-unavailable", "1s"]);
    let name = "v1.a.example.com";
    // create, (delete, create) x 3.
    assert!(
        binary::wait_until_for(Duration::from_secs(25), || our_writes(&server, name).len()
            >= 7),
        "{:?}\n{}",
        our_writes(&server, name),
        p.log()
    );
    p.wait_log("FailedDiscoveryCheck");
    let w = our_writes(&server, name);
    let verbs: Vec<&str> = w.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(
        &verbs[..7],
        ["create", "delete", "create", "delete", "create", "delete", "create"]
    );
    // The first withdrawal is restored as soon as the endpoints look ready; each withdrawal
    // in a row without becoming available holds it twice as long: 1s, 2s.
    let log = p.log();
    let withdrawals: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("v1.a.example.com withdrawn after 1s"))
        .collect();
    assert!(withdrawals.len() >= 3, "{log}");
    assert!(!withdrawals[0].contains("not before"), "{log}");
    assert!(withdrawals[1].contains("and not before 1s"), "{log}");
    assert!(withdrawals[2].contains("and not before 2s"), "{log}");
    let held = |i: usize| w[i + 1].1.duration_since(w[i].1).unwrap();
    assert!(held(3) >= Duration::from_millis(1000), "{:?}", held(3));
    assert!(held(5) >= Duration::from_millis(2000), "{:?}", held(5));

    // Discovery passes again: available, and no more withdrawals.
    backend.set_mode(Mode::Serve);
    assert!(
        wait_until(|| condition(&server, name) == Some(("True".into(), "Passed".into()))),
        "{}",
        p.log()
    );
    let settled = our_writes(&server, name).len();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(our_writes(&server, name).len(), settled, "{}", p.log());
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn a_withdrawal_deletes_only_the_object_it_saw_unavailable() {
    let server = kas();
    // Another writer changes the object just before the withdrawal's first delete lands
    // (as kube-aggregator does when the backend comes back at that instant).
    server.faults().race_next_deletes(1);
    let scratch = Scratch::new("avail-precondition");
    scratch.write(
        "a.yaml",
        &manifest("gone.example.com", Some(("ns", "gone")), None, None),
    );
    let p = Proc::run(&server, &scratch, &["--withdraw-unavailable", "1s"]);
    let name = "v1.gone.example.com";
    p.wait_log(&format!("{name} withdrawn after 1s"));
    let deletes: Vec<(u16, Value)> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "delete" && r.name.as_deref() == Some(name))
        .map(|r| (r.code, r.body.unwrap_or_default()))
        .collect();
    let rv = |body: &Value| {
        body["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_string)
    };
    // The first names the version it saw unavailable, which the other write replaced: 409,
    // nothing deleted. Decided again on the changed object (still unavailable): deleted.
    assert_eq!(
        deletes.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
        [409, 200],
        "{deletes:?}\n{}",
        p.log()
    );
    let (first, second) = (rv(&deletes[0].1), rv(&deletes[1].1));
    assert!(first.is_some() && second.is_some(), "{deletes:?}");
    assert!(
        first.unwrap().parse::<u64>().unwrap() < second.unwrap().parse::<u64>().unwrap(),
        "{deletes:?}"
    );
    // One withdrawal for the two deletes (the Event is written after the log line).
    assert!(
        wait_until(|| events(&server, name, "Withdrawn").len() == 1),
        "{}",
        p.log()
    );
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn never_local_and_onstart_apiservices_are_never_withdrawn() {
    let server = kas();
    let scratch = Scratch::new("avail-never");
    let mut text = manifest("gone.example.com", Some(("ns", "gone")), None, None);
    text += &manifest(
        "never.example.com",
        Some(("ns", "gone")),
        Some("never"),
        None,
    );
    text += &manifest("local.example.com", None, None, None);
    text += &manifest(
        "onstart.example.com",
        Some(("ns", "gone")),
        None,
        Some("onstart"),
    );
    scratch.write("a.yaml", &text);
    let p = Proc::run(&server, &scratch, &["--withdraw-unavailable", "1s"]);
    let kept = [
        "v1.never.example.com",
        "v1.local.example.com",
        "v1.onstart.example.com",
    ];
    assert!(wait_until(|| kept
        .iter()
        .all(|n| stored(&server, n).is_some())));
    let uids: Vec<Option<String>> = kept.iter().map(|n| uid(&server, n)).collect();
    assert!(
        wait_until(|| condition(&server, "v1.never.example.com")
            == Some(("False".into(), "ServiceNotFound".into()))
            && condition(&server, "v1.onstart.example.com")
                == Some(("False".into(), "ServiceNotFound".into()))),
        "{}",
        p.log()
    );
    // The control, unavailable as long, is withdrawn; the others are not, then or later.
    p.wait_log("v1.gone.example.com withdrawn after 1s");
    std::thread::sleep(Duration::from_millis(1200));
    let now: Vec<Option<String>> = kept.iter().map(|n| uid(&server, n)).collect();
    assert_eq!(now, uids, "{}", p.log());
    for n in kept {
        assert!(
            our_writes(&server, n).iter().all(|(v, _)| v != "delete"),
            "{n}"
        );
    }
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn withdrawal_is_off_by_default_and_the_annotation_opts_one_object_in() {
    let server = kas();
    let scratch = Scratch::new("avail-default");
    let mut text = manifest("plain.example.com", Some(("plain-ns", "svc")), None, None);
    text += &manifest(
        "opted.example.com",
        Some(("opted-ns", "svc")),
        Some("1s"),
        None,
    );
    scratch.write("a.yaml", &text);
    let p = Proc::run(&server, &scratch, &[]);
    p.wait_log("v1.plain.example.com is unavailable: ServiceNotFound");
    let plain_uid = uid(&server, "v1.plain.example.com");
    p.wait_log("v1.opted.example.com withdrawn after 1s");
    assert!(stored(&server, "v1.opted.example.com").is_none());
    // The plain one has been unavailable as long: kept.
    assert_eq!(uid(&server, "v1.plain.example.com"), plain_uid);
    // Only the opted-in object's namespace is watched, and only while it is desired.
    assert_eq!(watched(&server, "services"), ["opted-ns"]);
    assert_eq!(watched(&server, "endpointslices"), ["opted-ns"]);
    scratch.write(
        "a.yaml",
        &manifest("plain.example.com", Some(("plain-ns", "svc")), None, None),
    );
    p.wait_log(r#"no longer watching Services and EndpointSlices in "opted-ns""#);
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");

    // No flag, no annotation: no Service or EndpointSlice request at all.
    let server = kas();
    let scratch = Scratch::new("avail-default-none");
    scratch.write(
        "a.yaml",
        &manifest("plain.example.com", Some(("ns", "svc")), None, None),
    );
    let p = Proc::run(&server, &scratch, &[]);
    p.wait_log("v1.plain.example.com is unavailable: ServiceNotFound");
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    assert!(watched(&server, "services").is_empty());
    assert!(watched(&server, "endpointslices").is_empty());
    assert!(our_writes(&server, "v1.plain.example.com")
        .iter()
        .all(|(v, _)| v == "create"));
}

#[test]
fn once_wait_available_waits_for_availability_within_the_timeout() {
    let server = kas();
    let scratch = Scratch::new("avail-once");
    let (backend, text) = backend("a.example.com", None);
    scratch.write("a.yaml", &text);
    // The backend is missing: converged, but not available within the timeout.
    let p = Proc::run(
        &server,
        &scratch,
        &["--once", "--wait-available", "--timeout", "3s"],
    );
    let (code, log) = p.wait_exit(Duration::from_secs(15));
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("converged: 1 APIService"), "{log}");
    assert!(
        log.contains(
            r#"v1.a.example.com: unavailable: ServiceNotFound (service/svc in "ns" is not present)"#
        ),
        "{log}"
    );
    // Without --wait-available the same run succeeds.
    let (code, log) = Proc::run(&server, &scratch, &["--once"]).wait_exit(Duration::from_secs(15));
    assert_eq!(code, 0, "{log}");
    // With a ready backend it succeeds, once the aggregator says Available.
    create_service(&server, "ns", "svc", backend.addr());
    create_slice(&server, "ns", "svc", true);
    let (code, log) = Proc::run(
        &server,
        &scratch,
        &["--once", "--wait-available", "--timeout", "10s"],
    )
    .wait_exit(Duration::from_secs(20));
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("available: every desired APIService"), "{log}");
    // --wait-available needs --once.
    let (code, log) =
        Proc::run(&server, &scratch, &["--wait-available"]).wait_exit(Duration::from_secs(10));
    assert_eq!(code, 2, "{log}");
}

#[test]
fn plan_shows_availability_and_withdrawn_names_with_why() {
    let server = kas();
    let scratch = Scratch::new("avail-plan");
    let mut text = manifest("a.example.com", Some(("ns", "gone")), Some("1s"), None);
    text += &manifest("b.example.com", Some(("ns", "gone")), Some("never"), None);
    text += &manifest("local.example.com", None, None, None);
    scratch.write("a.yaml", &text);
    let p = Proc::run(&server, &scratch, &[]);
    p.wait_log("v1.a.example.com withdrawn after 1s");
    assert!(wait_until(|| events(
        &server,
        "v1.a.example.com",
        "Withdrawn"
    )
    .len()
        == 1));
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");

    let (code, out) =
        Proc::command("plan", &server, &scratch, &[]).wait_exit_stdout_first(binary::WAIT);
    assert_eq!(code, 0, "{out}");
    let row = |name: &str| -> Vec<String> {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row for {name}:\n{out}"))
            .split_whitespace()
            .take(4)
            .map(String::from)
            .collect()
    };
    assert_eq!(
        row("NAME"),
        ["NAME", "CELL", "ACTION", "AVAILABLE"],
        "{out}"
    );
    assert_eq!(
        row("v1.a.example.com"),
        ["v1.a.example.com", "2C", "create", "-"]
    );
    assert_eq!(
        row("v1.b.example.com"),
        ["v1.b.example.com", "6C", "none", "False"]
    );
    assert_eq!(row("v1.local.example.com")[3], "Unknown", "{out}");
    assert!(
        out.contains(r#"    unavailable: ServiceNotFound (service/gone in "ns" is not present); cause ServiceNotFound"#),
        "{out}"
    );
    assert!(
        out.contains("    withdrawn by a running instance: v1.a.example.com withdrawn after 1s unavailable: ServiceNotFound"),
        "{out}"
    );
}
