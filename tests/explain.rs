//! `autoregister explain` on the real kube-apiserver: each way an aggregated API fails,
//! made on purpose behind a loopback Service, is named by its cause code with its evidence
//! — and agrees with the `Available` condition kube-aggregator wrote. No kubelet runs, so
//! pods are objects whose readiness the test writes to their status.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/kube.rs"]
mod kube;
#[path = "support/tls_backend.rs"]
mod tls_backend;

use std::time::Duration;

use binary::{wait_until_for, Proc, WAIT};
use cluster::{tag, Cluster};
use kube::{kube, LoopbackService};
use serde_json::{json, Value};
use tls_backend::{Issued, Mode, TlsBackend};

/// One case: a namespace, a loopback Service `api` in it and an APIService for it.
struct Case {
    ns: String,
    group: String,
    name: String,
    svc: LoopbackService,
    listener: Option<std::net::TcpListener>,
}

impl Case {
    fn new(test: &str) -> Case {
        let ns = format!("x-{}", tag(test));
        let svc = kube().loopback_service(&ns, "api");
        let listener = std::net::TcpListener::bind(svc.addr()).unwrap();
        let group = format!("{ns}.example.com");
        Case {
            name: format!("v1.{group}"),
            group,
            ns,
            svc,
            listener: Some(listener),
        }
    }

    /// The APIService, for `service` on `port`, trusting `ca` (PEM).
    fn register(&self, service: &str, port: u16, ca: &str) {
        use base64::Engine as _;
        Cluster::kube().create(json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": self.name},
            "spec": {"group": self.group, "version": "v1", "groupPriorityMinimum": 100,
                     "versionPriority": 10,
                     "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
                     "service": {"namespace": self.ns, "name": service, "port": port}},
        }));
    }

    /// A backend with `issued`'s certificate serving `version` of the group.
    fn serve(&mut self, issued: &Issued, version: &str) -> TlsBackend {
        let listener = self.listener.take().unwrap();
        TlsBackend::start(listener, issued, &self.group, version)
    }

    /// The Service `api` gets selector `app=api`, and a pod `api-0` with that label, run as
    /// ServiceAccount `api` and mounting Secret `api-tls` (`tls.crt` = `cert_pem`), Ready as
    /// given.
    fn pod(&self, cert_pem: &str, ready: bool) {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(cert_pem);
        let ns = &self.ns;
        kube().apply(&format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: api\n  namespace: {ns}\n---\n\
             apiVersion: v1\nkind: Secret\nmetadata:\n  name: api-tls\n  namespace: {ns}\ntype: Opaque\n\
             data:\n  tls.crt: {b64}\n  tls.key: {key}\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata:\n  name: api-0\n  namespace: {ns}\n  labels:\n    app: api\n\
             spec:\n  serviceAccountName: api\n  containers:\n  - name: api\n    image: example.invalid/api\n    ports:\n    - name: https\n      containerPort: 443\n\
             \x20   volumeMounts:\n    - name: tls\n      mountPath: /tls\n  volumes:\n  - name: tls\n    secret:\n      secretName: api-tls\n",
            key = base64::engine::general_purpose::STANDARD.encode("not a key")
        ));
        let (ok, out, err) = kube().kubectl(&[
            "-n",
            ns,
            "patch",
            "service",
            "api",
            "--type=merge",
            "-p",
            r#"{"spec":{"selector":{"app":"api"}}}"#,
        ]);
        assert!(ok, "{out}{err}");
        let status = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" },
             "reason": if ready { "" } else { "ContainersNotReady" }}],
            "containerStatuses": [{"name": "api", "ready": ready, "restartCount": 3,
                "image": "example.invalid/api", "imageID": "", "state": {"running": {}}}]}});
        let (ok, out, err) = kube().kubectl(&[
            "-n",
            ns,
            "patch",
            "pod",
            "api-0",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ]);
        assert!(ok, "{out}{err}");
    }

    /// Waits until kube-aggregator's `Available` condition has `reason`.
    fn wait_reason(&self, reason: &str) -> (String, String, String) {
        let c = Cluster::kube();
        let done = wait_until_for(Duration::from_secs(40), || {
            c.available(&self.name).1 == reason
        });
        let got = c.available(&self.name);
        assert!(done, "no {reason} for {}: {got:?}", self.name);
        got
    }

    /// `explain NAME -o json` as `kubeconfig` (default: the admin); exit code and the item.
    fn explain_as(&self, kubeconfig: Option<&std::path::Path>) -> (i32, Value) {
        // One file per case: tests run in parallel, and a file rewritten in place can be
        // read half written.
        let admin = kube()
            .scratch("explain")
            .join(format!("{}.admin.kubeconfig", self.ns));
        if kubeconfig.is_none() {
            std::fs::write(&admin, kube().kubeconfig(kube::ADMIN_TOKEN)).unwrap();
        }
        let kc = kubeconfig.unwrap_or(&admin);
        let (code, out) = Proc::spawn(&[
            "explain",
            &self.name,
            "-o",
            "json",
            "--kubeconfig",
            kc.to_str().unwrap(),
        ])
        .wait_exit_stdout_first(WAIT);
        let doc: Value = serde_json::Deserializer::from_str(&out)
            .into_iter()
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("no JSON: {out}"));
        (code, doc["items"][0].clone())
    }

    fn explain(&self) -> (i32, Value) {
        self.explain_as(None)
    }
}

/// The evidence lines of `item`, joined.
fn evidence(item: &Value) -> String {
    item["evidence"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn assert_cause(item: &Value, code: i32, cause: &str, want: i32) {
    assert_eq!(item["cause"], cause, "{item:#}");
    assert_eq!(code, want, "{item:#}");
}

#[test]
fn a_served_api_is_served() {
    let mut c = Case::new("served");
    let issued = Issued::new("served-ca", &[&c.svc.host()]);
    let _b = c.serve(&issued, "v1");
    c.register("api", c.svc.port, &issued.ca_pem);
    c.wait_reason("Passed");
    let (code, item) = c.explain();
    assert_cause(&item, code, "Served", 0);
    assert_eq!(item["verdict"], "served");
}

#[test]
fn a_missing_service_is_named_with_the_closest_one() {
    let c = Case::new("nosvc");
    let issued = Issued::new("nosvc-ca", &[&c.svc.host()]);
    c.register("apii", c.svc.port, &issued.ca_pem);
    c.wait_reason("ServiceNotFound");
    let (code, item) = c.explain();
    assert_cause(&item, code, "ServiceNotFound", 1);
    assert!(
        item["fix"].as_str().unwrap().contains("did you mean api?"),
        "{item:#}"
    );
    assert!(
        item["consequences"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{item:#}"
    );
}

#[test]
fn a_port_the_service_lacks_lists_its_ports() {
    let c = Case::new("port");
    let issued = Issued::new("port-ca", &[&c.svc.host()]);
    c.register("api", c.svc.port + 1, &issued.ca_pem);
    c.wait_reason("ServicePortError");
    let (code, item) = c.explain();
    assert_cause(&item, code, "ServicePortMismatch", 1);
    assert!(
        evidence(&item).contains(&format!("ports {} (https)", c.svc.port)),
        "{item:#}"
    );
}

#[test]
fn no_endpoint_slice_is_endpoints_not_found() {
    let c = Case::new("noslice");
    c.svc.remove_endpoints();
    let issued = Issued::new("noslice-ca", &[&c.svc.host()]);
    c.register("api", c.svc.port, &issued.ca_pem);
    c.wait_reason("EndpointsNotFound");
    let (code, item) = c.explain();
    assert_cause(&item, code, "EndpointsNotFound", 1);
    assert!(
        item["fix"].as_str().unwrap().contains("no selector"),
        "{item:#}"
    );
}

#[test]
fn a_selector_matching_nothing_is_named() {
    let c = Case::new("nopod");
    c.svc.remove_endpoints();
    let (ok, out, err) = kube().kubectl(&[
        "-n",
        &c.ns,
        "patch",
        "service",
        "api",
        "--type=merge",
        "-p",
        r#"{"spec":{"selector":{"app":"nothing"}}}"#,
    ]);
    assert!(ok, "{out}{err}");
    let issued = Issued::new("nopod-ca", &[&c.svc.host()]);
    c.register("api", c.svc.port, &issued.ca_pem);
    c.wait_reason("EndpointsNotFound");
    let (code, item) = c.explain();
    assert_cause(&item, code, "SelectorMatchesNoPod", 1);
    assert!(
        evidence(&item).contains("pods matching app=nothing: none"),
        "{item:#}"
    );
}

#[test]
fn a_slice_not_ready_with_its_pod_not_ready_names_the_pod() {
    let c = Case::new("notready");
    c.svc.set_ready(false);
    let issued = Issued::new("notready-ca", &[&c.svc.host()]);
    c.pod(&issued.cert_pem, false);
    c.register("api", c.svc.port, &issued.ca_pem);
    c.wait_reason("MissingEndpoints");
    let (code, item) = c.explain();
    assert_cause(&item, code, "PodsNotReady", 1);
    let ev = evidence(&item);
    assert!(
        ev.contains("0 ready endpoints")
            && ev
                .contains("pod/api-0: phase Running, Ready=False (ContainersNotReady), restarts 3"),
        "{item:#}"
    );
}

/// A backend whose certificate fails the aggregator's TLS check: the cause from the
/// certificate the pods mount, in agreement with the condition's Go error.
fn tls_case(
    test: &str,
    issued_for: impl Fn(&Case) -> Issued,
    bundle_of_other_ca: bool,
    aggregator_says: &str,
    cause: &str,
) {
    let mut c = Case::new(test);
    let issued = issued_for(&c);
    let _b = c.serve(&issued, "v1");
    c.pod(&issued.cert_pem, true);
    let ca = if bundle_of_other_ca {
        Issued::new("other-ca", &["x"]).ca_pem
    } else {
        issued.ca_pem.clone()
    };
    c.register("api", c.svc.port, &ca);
    if kube::minor() >= 36 {
        let (_, _, message) = c.wait_reason("FailedDiscoveryCheck");
        assert!(message.contains(aggregator_says), "{message}");
    } else {
        // kube-aggregator v1.35 and older check availability without verifying the
        // certificate (`TLSConfig{Insecure: true}`; v1.36's `BuildTransportConfig` verifies
        // it): the condition reads Passed while every proxied request fails. explain
        // verifies the certificate itself, so its cause is the same on every version.
        c.wait_reason("Passed");
    }
    let (code, item) = c.explain();
    assert_cause(&item, code, cause, 1);
    assert!(
        evidence(&item).contains(&format!(
            "serving certificate (secret {}/api-tls key tls.crt)",
            c.ns
        )),
        "{item:#}"
    );
}

#[test]
fn a_bundle_of_another_ca_is_cert_not_signed_by_ca() {
    tls_case(
        "otherca",
        |c| Issued::new("right-ca", &[&c.svc.host()]),
        true,
        "unknown authority",
        "CertNotSignedByCA",
    );
}

#[test]
fn a_certificate_for_another_name_is_cert_wrong_name() {
    tls_case(
        "wrongname",
        |_| Issued::new("wn-ca", &["other.default.svc"]),
        false,
        "certificate is valid for",
        "CertWrongName",
    );
}

#[test]
fn an_expired_certificate_is_cert_expired() {
    tls_case(
        "expired",
        |c| Issued::expired("exp-ca", &[&c.svc.host()]),
        false,
        "expired",
        "CertExpired",
    );
}

#[test]
fn a_stopped_backend_is_unreachable() {
    let mut c = Case::new("stopped");
    let issued = Issued::new("stopped-ca", &[&c.svc.host()]);
    let mut b = c.serve(&issued, "v1");
    c.register("api", c.svc.port, &issued.ca_pem);
    c.wait_reason("Passed");
    b.stop();
    c.wait_reason("FailedDiscoveryCheck");
    let (code, item) = c.explain();
    assert_cause(&item, code, "BackendUnreachable", 1);
}

#[test]
fn a_backend_answering_403_is_forbidden_with_its_permissions() {
    let mut c = Case::new("forbidden");
    let issued = Issued::new("forbidden-ca", &[&c.svc.host()]);
    let b = c.serve(&issued, "v1");
    b.set_mode(Mode::Status(403));
    c.pod(&issued.cert_pem, true);
    c.register("api", c.svc.port, &issued.ca_pem);
    c.wait_reason("FailedDiscoveryCheck");
    let (code, item) = c.explain();
    assert_cause(&item, code, "BackendForbidden", 1);
    let ev = evidence(&item);
    assert!(
        ev.contains(&format!("serviceaccount {}/api may get configmaps/extension-apiserver-authentication in kube-system: DENIED", c.ns)),
        "{item:#}"
    );
    assert!(ev.contains("requestheader-client-ca-file set"), "{item:#}");
}

#[test]
fn a_backend_serving_another_version_is_group_version_not_served() {
    let mut c = Case::new("otherver");
    let issued = Issued::new("otherver-ca", &[&c.svc.host()]);
    let _b = c.serve(&issued, "v2");
    c.register("api", c.svc.port, &issued.ca_pem);
    let (_, _, message) = c.wait_reason("FailedDiscoveryCheck");
    assert!(message.ends_with(": 404"), "{message}");
    let (code, item) = c.explain();
    assert_cause(&item, code, "GroupVersionNotServed", 1);
}

#[test]
fn a_reader_of_apiservices_alone_gets_the_cause_and_what_it_may_not_read() {
    let c = Case::new("reader");
    let issued = Issued::new("reader-ca", &[&c.svc.host()]);
    c.register("apii", c.svc.port, &issued.ca_pem);
    c.wait_reason("ServiceNotFound");
    let kc = Cluster::kube().reader(&tag("explain"));
    let path = kube()
        .scratch("explain")
        .join(format!("{}.kubeconfig", c.ns));
    std::fs::write(&path, &kc.0).unwrap();
    let (code, item) = c.explain_as(Some(&path));
    assert_cause(&item, code, "ServiceNotFound", 1);
    let unchecked = item["unchecked"].to_string();
    assert!(
        unchecked.contains(&format!("not permitted to list services in {}", c.ns)),
        "{item:#}"
    );
}

#[test]
fn every_unavailable_apiservice_is_explained_without_names_and_usage_errors_exit_2() {
    let c = Case::new("all");
    let issued = Issued::new("all-ca", &[&c.svc.host()]);
    c.register("apii", c.svc.port, &issued.ca_pem);
    c.wait_reason("ServiceNotFound");
    let admin = kube().scratch("explain").join("all.kubeconfig");
    std::fs::write(&admin, kube().kubeconfig(kube::ADMIN_TOKEN)).unwrap();
    let (code, out) = Proc::spawn(&["explain", "--kubeconfig", admin.to_str().unwrap()])
        .wait_exit_stdout_first(WAIT);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("{}: not served (ServiceNotFound)", c.name)),
        "{out}"
    );
    assert!(
        !out.contains("v1.apps: "),
        "a served built-in is not listed without --all: {out}"
    );
    let (code, out) = Proc::spawn(&[
        "explain",
        "v1.no-such.example.com",
        "--kubeconfig",
        admin.to_str().unwrap(),
    ])
    .wait_exit_stdout_first(WAIT);
    assert_eq!(code, 2, "{out}");
    let (code, out) = Proc::spawn(&["explain", "--manifests", "x"]).wait_exit_stdout_first(WAIT);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("--manifests is not valid for `explain`"),
        "{out}"
    );
}

/// The same binary as a kubectl plugin: `kubectl-autoregister` on the PATH answers
/// `kubectl autoregister explain`, with kubectl's `--kubeconfig`, and its exit code.
#[test]
fn kubectl_runs_it_as_a_plugin() {
    let c = Case::new("plugin");
    let issued = Issued::new("plugin-ca", &[&c.svc.host()]);
    c.register("apii", c.svc.port, &issued.ca_pem);
    c.wait_reason("ServiceNotFound");
    let dir = kube().scratch(&format!("plugin-{}", c.ns));
    let plugin = dir.join("kubectl-autoregister");
    let _ = std::fs::remove_file(&plugin);
    std::os::unix::fs::symlink(binary::exe(), &plugin).unwrap();
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, kube().kubeconfig(kube::ADMIN_TOKEN)).unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("kubectl")
        .args([
            "autoregister",
            "explain",
            &c.name,
            "--kubeconfig",
            kc.to_str().unwrap(),
        ])
        .env("PATH", &path)
        .output()
        .expect("kubectl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!("{}: not served (ServiceNotFound)", c.name)),
        "{text}"
    );
    assert!(
        text.contains("fix: fix spec.service.name (did you mean api?)"),
        "{text}"
    );
}
