//! One end-to-end test body, two servers: the test server playing kube-apiserver, and the
//! real kube-apiserver of `make kube`. The real one is the judge: a case they answer
//! differently is a test-server bug.
//!
//! Use with `mod binary;`, `mod kube;` and `mod tls_backend;` from `support/`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;

use autoregister::api::APIService;
use autoregister::client::{Api, Client, ListParams};
use autoregister::testserver::TestServer;
use serde_json::{json, Value};

use crate::binary::{wait_until, Target};
use crate::kube::{kube, Kube, LoopbackService};

/// The server a shared test runs against.
pub enum Cluster {
    /// The in-process test server in kube-apiserver mode (built-ins, availability).
    Test(TestServer),
    /// The real kube-apiserver, shared by the tests of one binary.
    Real(&'static Kube),
}

/// Runs the test body `$name(&Cluster)` against both servers, as `$name::test_server` and
/// `$name::kube_apiserver`.
#[macro_export]
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn test_server() {
                super::$name(&$crate::cluster::Cluster::test_server())
            }
            #[test]
            fn kube_apiserver() {
                super::$name(&$crate::cluster::Cluster::kube())
            }
        }
    )*};
}

impl Cluster {
    /// A fresh test server playing kube-apiserver.
    pub fn test_server() -> Cluster {
        Cluster::Test(
            TestServer::builder()
                .kube_apiserver(true)
                .tls(true)
                .token("admin-token")
                .start()
                .unwrap(),
        )
    }

    /// The test binary's real kube-apiserver.
    pub fn kube() -> Cluster {
        Cluster::Real(kube())
    }

    /// Whether this is the real kube-apiserver.
    pub fn is_real(&self) -> bool {
        matches!(self, Cluster::Real(_))
    }

    /// What the binary is pointed at.
    pub fn target(&self) -> &dyn Target {
        match self {
            Cluster::Test(s) => s,
            Cluster::Real(k) => *k,
        }
    }

    /// The admin's client.
    pub fn client(&self) -> Client {
        match self {
            Cluster::Test(s) => Client::new(s.client_config()).unwrap(),
            Cluster::Real(k) => k.client(),
        }
    }

    /// APIServices, as the admin.
    pub fn api(&self) -> Api<APIService> {
        Api::all(self.client())
    }

    /// Creates an APIService from its JSON.
    pub fn create(&self, obj: Value) -> APIService {
        let a: APIService = serde_json::from_value(obj).unwrap();
        self.api().create(&a).unwrap()
    }

    /// The APIService `name` as JSON, if it exists.
    pub fn get(&self, name: &str) -> Option<Value> {
        match self.api().get(name) {
            Ok(a) => Some(serde_json::to_value(a).unwrap()),
            Err(e) if e.is_not_found() => None,
            Err(e) => panic!("get {name}: {e}"),
        }
    }

    /// A Service `ns/name` with a ClusterIP on loopback and a ready EndpointSlice, and a
    /// listener on its ClusterIP and port for the backend the test starts: what the
    /// server's aggregator dials.
    pub fn loopback_service(&self, ns: &str, name: &str) -> (LoopbackService, TcpListener) {
        match self {
            Cluster::Test(s) => {
                let listener = crate::tls_backend::service_on(s, ns, name);
                let addr = listener.local_addr().unwrap();
                let svc = LoopbackService {
                    namespace: ns.to_string(),
                    service: name.to_string(),
                    ip: addr.ip().to_string(),
                    port: addr.port(),
                };
                (svc, listener)
            }
            Cluster::Real(k) => {
                let svc = k.loopback_service(ns, name);
                let listener = TcpListener::bind(svc.addr()).unwrap();
                (svc, listener)
            }
        }
    }

    /// Marks the endpoint of a [`loopback_service`](Self::loopback_service) ready or not.
    pub fn set_ready(&self, svc: &LoopbackService, ready: bool) {
        match self {
            Cluster::Test(s) => {
                crate::tls_backend::set_ready_on(s, &svc.namespace, &svc.service, ready)
            }
            Cluster::Real(_) => svc.set_ready(ready),
        }
    }

    /// The `Available` condition of `name`: (status, reason, message); empty when none.
    pub fn available(&self, name: &str) -> (String, String, String) {
        let obj = self.get(name).unwrap_or_default();
        let c = obj["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
            .cloned()
            .unwrap_or_default();
        let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
        (s("status"), s("reason"), s("message"))
    }

    /// A kubeconfig for an identity that may get, list and watch APIServices and nothing
    /// else: on the real server a ServiceAccount `reader-<tag>` bound to such a
    /// ClusterRole, with a token from the TokenRequest API; on the test server (one per
    /// test) a user for whom every APIService write is denied.
    pub fn reader(&self, tag: &str) -> Kubeconfig {
        match self {
            Cluster::Test(s) => {
                s.add_user("reader-token", "reader");
                for verb in ["create", "update", "patch", "delete"] {
                    s.deny(verb, "apiservices", None, None);
                }
                Kubeconfig(s.kubeconfig_with_token(Some("reader-token")))
            }
            Cluster::Real(k) => {
                let sa = format!("reader-{tag}");
                k.apply(&format!(
                    "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {sa}\n  namespace: default\n---\n\
                     apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {sa}\n\
                     rules:\n- apiGroups: [apiregistration.k8s.io]\n  resources: [apiservices]\n  verbs: [get, list, watch]\n---\n\
                     apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {sa}\n\
                     roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {sa}\n\
                     subjects:\n- kind: ServiceAccount\n  name: {sa}\n  namespace: default\n"
                ));
                let (ok, token, err) = k.kubectl(&["-n", "default", "create", "token", &sa]);
                assert!(ok, "{err}");
                Kubeconfig(k.kubeconfig(token.trim()))
            }
        }
    }

    /// Every APIService whose name ends with `suffix`, reduced to what a write changes
    /// (UID, resourceVersion, labels, annotations, spec), by name. It first waits until
    /// each has its `Available` condition: kube-aggregator's availability controller
    /// writes it once, shortly after a create, and the snapshot must not catch that write.
    pub fn snapshot(&self, suffix: &str) -> BTreeMap<String, Value> {
        let list = || {
            self.api()
                .list(&ListParams::default())
                .unwrap()
                .items
                .into_iter()
                .map(|a| serde_json::to_value(a).unwrap())
                .filter(|v| v["metadata"]["name"].as_str().unwrap().ends_with(suffix))
                .collect::<Vec<Value>>()
        };
        let settled = |v: &Value| {
            v["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Available"))
        };
        assert!(
            wait_until(|| list().iter().all(settled)),
            "availability never written: {:#?}",
            list()
        );
        list()
            .into_iter()
            .map(|v| {
                let m = &v["metadata"];
                (
                    m["name"].as_str().unwrap().to_string(),
                    json!({
                        "uid": m["uid"], "resourceVersion": m["resourceVersion"],
                        "labels": m["labels"], "annotations": m["annotations"],
                        "spec": v["spec"],
                    }),
                )
            })
            .collect()
    }
}

/// A kubeconfig the binary can be pointed at.
pub struct Kubeconfig(pub String);

impl Target for Kubeconfig {
    fn kubeconfig_text(&self) -> String {
        self.0.clone()
    }
}

/// A unique tag per test (and run), for names and label keys that keep tests sharing one
/// real server apart.
pub fn tag(test: &str) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("{test}{n}")
}
