//! kube-aggregator's availability controller for APIServices backed by a Service.
//!
//! A port of the checks of `AvailableConditionController.sync` (kube-aggregator,
//! `pkg/controllers/status/remote`): the Service must exist, listen on the APIService's port
//! (ClusterIP Services), and have an EndpointSlice with a ready endpoint on that port's name;
//! then the discovery check, which the test server does not dial: a switch per Service
//! decides whether it passes (`Passed`) or fails (`FailedDiscoveryCheck`), modelling a backend
//! that listens but does not serve its API. Reasons and messages are upstream's.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;
use serde_json::{json, Value};

use super::KUBE_APISERVER_MANAGER;
use crate::testserver::kinds;
use crate::testserver::server::Shared;

/// Services (namespace, name) whose discovery check fails although endpoints are ready.
#[derive(Default)]
pub(crate) struct DiscoverySwitch {
    failing: Mutex<HashSet<(String, String)>>,
}

impl DiscoverySwitch {
    /// Makes the discovery check of `namespace/service` fail (`true`) or pass.
    pub(crate) fn set(&self, namespace: &str, service: &str, failing: bool) {
        let key = (namespace.to_string(), service.to_string());
        let mut f = self.failing.lock();
        if failing {
            f.insert(key);
        } else {
            f.remove(&key);
        }
    }

    fn is_failing(&self, namespace: &str, service: &str) -> bool {
        self.failing
            .lock()
            .contains(&(namespace.to_string(), service.to_string()))
    }
}

/// The `Available` condition upstream would write: (status, reason, message).
pub(crate) type Condition = (&'static str, &'static str, String);

/// What the store holds that the check reads, for one namespace's Services and slices.
pub(crate) struct Backends<'a> {
    /// `(namespace, name)` → Service.
    pub(crate) services: &'a BTreeMap<(String, String), Arc<Value>>,
    /// Every EndpointSlice, with its namespace.
    pub(crate) slices: &'a [(String, Arc<Value>)],
}

/// Upstream's checks for an APIService whose `spec.service` is `svc` (`port` defaulted).
pub(crate) fn condition(
    spec: &Value,
    backends: &Backends<'_>,
    switch: &DiscoverySwitch,
) -> Option<Condition> {
    let svc = spec.get("service").filter(|s| !s.is_null())?;
    let ns = svc.get("namespace").and_then(Value::as_str).unwrap_or("");
    let name = svc.get("name").and_then(Value::as_str).unwrap_or("");
    let port = svc.get("port").and_then(Value::as_i64).unwrap_or(443);
    let Some(service) = backends.services.get(&(ns.to_string(), name.to_string())) else {
        return Some((
            "False",
            "ServiceNotFound",
            format!("service/{name} in {ns:?} is not present"),
        ));
    };
    let cluster_ip = service
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .is_none_or(|t| t == "ClusterIP");
    if cluster_ip {
        let ports = service.pointer("/spec/ports").and_then(Value::as_array);
        let Some(port_name) = ports
            .into_iter()
            .flatten()
            .find(|p| p.get("port").and_then(Value::as_i64) == Some(port))
            .map(|p| p.get("name").and_then(Value::as_str).unwrap_or(""))
        else {
            return Some((
                "False",
                "ServicePortError",
                format!("service/{name} in {ns:?} is not listening on port {port}"),
            ));
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
            return Some((
                "False",
                "EndpointsNotFound",
                format!("cannot find endpointslices for service/{name} in {ns:?}"),
            ));
        }
        if !slices.iter().any(|s| has_available_endpoint(s, port_name)) {
            return Some((
                "False",
                "MissingEndpoints",
                format!(
                    "endpointslices for service/{name} in {ns:?} have no addresses with port name {port_name:?}"
                ),
            ));
        }
    }
    if switch.is_failing(ns, name) {
        let group = spec.get("group").and_then(Value::as_str).unwrap_or("");
        let version = spec.get("version").and_then(Value::as_str).unwrap_or("");
        let url = format!("https://{name}.{ns}.svc:{port}/apis/{group}/{version}");
        return Some((
            "False",
            "FailedDiscoveryCheck",
            format!("failing or missing response from {url}: bad status from {url}: 503"),
        ));
    }
    Some(("True", "Passed", "all checks passed".to_string()))
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

/// One pass over every APIService with a service: writes the conditions that changed.
/// Returns whether a write failed for a reason worth a retry.
pub(super) fn pass(shared: &Shared, switch: &DiscoverySwitch) -> bool {
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
    for (name, obj) in apiservices {
        let Some((status, reason, message)) = obj
            .get("spec")
            .and_then(|s| condition(s, &backends, switch))
        else {
            continue;
        };
        let before = current(&obj);
        if before == Some((status, reason, message.as_str())) {
            continue;
        }
        // The transition time moves only when the status does (SetAPIServiceCondition).
        let since = match (before, obj.pointer("/status/conditions")) {
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
            "lastTransitionTime": since,
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
    failed
}
