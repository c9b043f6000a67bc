//! kube-aggregator's availability controller for APIServices backed by a Service.
//!
//! A port of `AvailableConditionController.sync` (kube-aggregator,
//! `pkg/controllers/status/remote`): the Service must exist, listen on the APIService's port
//! (ClusterIP Services), and have an EndpointSlice with a ready endpoint on that port's name;
//! then the backend is dialled where upstream's `proxy.ResolveCluster` points (the ClusterIP
//! and port, which the test server allocates on loopback) and must answer its discovery
//! document over TLS ([`discovery_check`](super::discovery_check)). Reasons and messages are
//! upstream's.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::{Instant, SystemTime};

use base64::Engine as _;
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::discovery_check::Target;
use super::prober::Prober;
use super::KUBE_APISERVER_MANAGER;
use crate::testserver::kinds;
use crate::testserver::server::Shared;

/// The `Available` condition upstream would write: (status, reason, message).
pub(crate) type Condition = (&'static str, &'static str, String);

/// What the store holds that the check reads, for one namespace's Services and slices.
pub(crate) struct Backends<'a> {
    /// `(namespace, name)` → Service.
    pub(crate) services: &'a BTreeMap<(String, String), Arc<Value>>,
    /// Every EndpointSlice, with its namespace.
    pub(crate) slices: &'a [(String, Arc<Value>)],
}

/// What the checks before the dial decide.
pub(crate) enum Check {
    /// The condition to write.
    Done(Condition),
    /// Every check before the dial passed: the discovery check of this target decides.
    Dial(Target),
    /// Upstream's transport cannot be built (a `caBundle` with no certificate): it returns
    /// an error and writes nothing.
    Unwritable,
}

/// Upstream's checks for an APIService whose `spec.service` is `svc` (`port` defaulted);
/// `None` for a local APIService.
pub(crate) fn condition(spec: &Value, backends: &Backends<'_>) -> Option<Check> {
    let svc = spec.get("service").filter(|s| !s.is_null())?;
    let ns = svc.get("namespace").and_then(Value::as_str).unwrap_or("");
    let name = svc.get("name").and_then(Value::as_str).unwrap_or("");
    let port = svc.get("port").and_then(Value::as_i64).unwrap_or(443);
    let Some(service) = backends.services.get(&(ns.to_string(), name.to_string())) else {
        return Some(Check::Done((
            "False",
            "ServiceNotFound",
            format!("service/{name} in {ns:?} is not present"),
        )));
    };
    let type_ = service
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    let cluster_ip = type_ == "ClusterIP";
    if cluster_ip {
        let ports = service.pointer("/spec/ports").and_then(Value::as_array);
        let Some(port_name) = ports
            .into_iter()
            .flatten()
            .find(|p| p.get("port").and_then(Value::as_i64) == Some(port))
            .map(|p| p.get("name").and_then(Value::as_str).unwrap_or(""))
        else {
            return Some(Check::Done((
                "False",
                "ServicePortError",
                format!("service/{name} in {ns:?} is not listening on port {port}"),
            )));
        };
        let slices: Vec<&Value> = backends
            .slices
            .iter()
            .filter(|(sns, s)| {
                sns == ns
                    && s.pointer("/metadata/labels/kubernetes.io~1service-name")
                        .and_then(Value::as_str)
                        == Some(name)
            })
            .map(|(_, s)| s.as_ref())
            .collect();
        if slices.is_empty() {
            return Some(Check::Done((
                "False",
                "EndpointsNotFound",
                format!("cannot find endpointslices for service/{name} in {ns:?}"),
            )));
        }
        if !slices.iter().any(|s| has_available_endpoint(s, port_name)) {
            return Some(Check::Done((
                "False",
                "MissingEndpoints",
                format!(
                    "endpointslices for service/{name} in {ns:?} have no addresses with port name {port_name:?}"
                ),
            )));
        }
    }
    let host_port = match resolve(service, type_, port) {
        Ok(h) => h,
        // Each of upstream's attempts reports the resolver's error as it is.
        Err(e) => return Some(Check::Done(("False", "FailedDiscoveryCheck", e))),
    };
    let group = spec.get("group").and_then(Value::as_str).unwrap_or("");
    let version = spec.get("version").and_then(Value::as_str).unwrap_or("");
    let insecure = spec
        .get("insecureSkipTLSVerify")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let ca_bundle = spec
        .get("caBundle")
        .and_then(Value::as_str)
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .unwrap_or_default();
    let target = Target {
        host_port,
        // The legacy core group's discovery lives under /api (upstream names it "v1.").
        path: if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        },
        server_name: format!("{name}.{ns}.svc"),
        ca_bundle,
        insecure,
    };
    if target.tls_config().is_err() {
        return Some(Check::Unwritable);
    }
    Some(Check::Dial(target))
}

/// `proxy.ResolveCluster`: where the aggregator dials a Service's backend (`host:port`).
fn resolve(service: &Value, type_: &str, port: i64) -> Result<String, String> {
    let name = service
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let cluster_ip = service
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap_or("");
    let join = |host: &str, port: i64| {
        if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        }
    };
    match type_ {
        "ClusterIP" if cluster_ip == "None" => {
            Err(r#"cannot route to service with ClusterIP "None""#.into())
        }
        "ClusterIP" | "LoadBalancer" | "NodePort" => {
            let found = service
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|p| p.get("port").and_then(Value::as_i64) == Some(port));
            if !found {
                return Err(format!("no service port {port} found for service {name:?}"));
            }
            Ok(join(cluster_ip, port))
        }
        "ExternalName" => {
            let host = service
                .pointer("/spec/externalName")
                .and_then(Value::as_str)
                .unwrap_or("");
            Ok(join(host, port))
        }
        other => Err(format!("unsupported service type {other:?}")),
    }
}

/// Upstream's `hasAvailableEndpoint` for one slice.
fn has_available_endpoint(slice: &Value, port_name: &str) -> bool {
    let ready = slice
        .get("endpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|e| {
            e.pointer("/conditions/ready")
                .and_then(Value::as_bool)
                .unwrap_or(true)
        });
    let port = slice
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|p| {
            p.get("name").and_then(Value::as_str) == Some(port_name)
                && p.get("port").is_some_and(Value::is_i64)
        });
    ready && port
}

/// The `Available` condition `obj` carries: (status, reason, message).
fn current(obj: &Value) -> Option<(&str, &str, &str)> {
    let c = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Available"))?;
    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
    Some((s("status"), s("reason"), s("message")))
}

/// The availability controller's memory between passes.
#[derive(Default)]
pub(crate) struct Availability {
    /// Since when each APIService `(name, uid)` has passed every check before the dial: only
    /// a discovery check started since counts for it (upstream dials on each such event).
    since: Mutex<HashMap<(String, String), Instant>>,
    /// The discovery checks and their results.
    pub(crate) prober: Prober,
}

/// One pass over every APIService with a service: writes the conditions that changed.
/// Returns whether a write failed for a reason worth a retry.
pub(super) fn pass(shared: &Shared, weak: &Weak<Shared>, state: &Availability) -> bool {
    let (apiservices, services, slices) = {
        let st = shared.store.state.lock();
        let mut apiservices = Vec::new();
        let mut services = BTreeMap::new();
        let mut slices = Vec::new();
        for ((plural, ns, name), o) in &st.objects {
            match *plural {
                "apiservices" => apiservices.push((name.clone(), o.clone())),
                "services" => {
                    services.insert((ns.clone(), name.clone()), o.clone());
                }
                "endpointslices" => slices.push((ns.clone(), o.clone())),
                _ => {}
            }
        }
        (apiservices, services, slices)
    };
    let backends = Backends {
        services: &services,
        slices: &slices,
    };
    let mut failed = false;
    let mut since = state.since.lock();
    let mut dialled = HashSet::new();
    let mut targets = HashSet::new();
    for (name, obj) in apiservices {
        let Some(check) = obj.get("spec").and_then(|s| condition(s, &backends)) else {
            continue;
        };
        let uid = obj
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let key = (name.clone(), uid);
        let (status, reason, message) = match check {
            Check::Done(c) => c,
            Check::Unwritable => continue,
            Check::Dial(target) => {
                let fresh = *since.entry(key.clone()).or_insert_with(Instant::now);
                dialled.insert(key);
                let result = state.prober.result(&target, fresh, weak);
                targets.insert(target);
                match result {
                    // Upstream writes once its check has ended.
                    None => continue,
                    Some(Ok(())) => ("True", "Passed", "all checks passed".to_string()),
                    Some(Err(m)) => ("False", "FailedDiscoveryCheck", m),
                }
            }
        };
        let before = current(&obj);
        if before == Some((status, reason, message.as_str())) {
            continue;
        }
        // The transition time moves only when the status does (SetAPIServiceCondition).
        let transition = match (before, obj.pointer("/status/conditions")) {
            (Some((s, _, _)), Some(cs)) if s == status => cs
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Available"))
                .and_then(|c| c.get("lastTransitionTime").cloned()),
            _ => None,
        }
        .unwrap_or_else(|| json!(crate::api::time::format_rfc3339(SystemTime::now())));
        let condition = json!({
            "type": "Available",
            "status": status,
            "lastTransitionTime": transition,
            "reason": reason,
            "message": message,
        });
        let Some(kind) = kinds::by_plural("apiservices") else {
            continue;
        };
        let r = shared.store.update(
            kind,
            "",
            &name,
            true,
            KUBE_APISERVER_MANAGER,
            false,
            |cur| {
                let mut new = cur.clone();
                let mut conditions: Vec<Value> = cur
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|c| c.get("type").and_then(Value::as_str) != Some("Available"))
                    .cloned()
                    .collect();
                conditions.push(condition);
                new["status"] = json!({ "conditions": conditions });
                Ok(new)
            },
        );
        // Gone or changed meanwhile: the store change brings another pass.
        if let Err(e) = r {
            failed |= !matches!(e.code(), 404 | 409);
        }
    }
    // An APIService that fails a check before the dial (or is gone) is dialled afresh when
    // it passes them again.
    since.retain(|k, _| dialled.contains(k));
    state.prober.retain(&targets);
    failed
}
