//! kube-apiserver's writes, through the same store code paths as API requests.

use std::time::SystemTime;

use serde_json::{json, Value};

use super::rules::{Desired, LABEL};
use super::{label_of, KUBE_APISERVER_MANAGER};
use crate::testserver::errors::ApiErr;
use crate::testserver::kinds::{self, Kind};
use crate::testserver::server::Shared;
use crate::testserver::store::Preconditions;

fn apiservices() -> &'static Kind {
    match kinds::by_plural("apiservices") {
        Some(k) => k,
        None => unreachable!("apiservices is a served kind"),
    }
}

pub(super) fn create(shared: &Shared, name: &str, d: &Desired) -> Result<u16, ApiErr> {
    let obj = json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": name, "labels": {LABEL: d.label_value()}},
        "spec": d.spec,
    });
    shared
        .store
        .create(apiservices(), "", obj, KUBE_APISERVER_MANAGER, false)
        .map(|_| 201)
}

pub(super) fn update(shared: &Shared, name: &str, d: &Desired, cur: &Value) -> Result<u16, ApiErr> {
    // A copy of what it saw with the spec replaced: a change since is a Conflict, as upstream.
    let mut new = cur.clone();
    new["spec"] = d.spec.clone();
    shared
        .store
        .update(
            apiservices(),
            "",
            name,
            false,
            KUBE_APISERVER_MANAGER,
            false,
            |_| Ok(new),
        )
        .map(|_| 200)
}

pub(super) fn delete(shared: &Shared, name: &str, uid: &str) -> Result<u16, ApiErr> {
    let pre = Preconditions {
        uid: Some(uid.to_string()),
        resource_version: None,
    };
    shared
        .store
        .delete(apiservices(), "", name, &pre, false)
        .map(|_| 200)
}

/// A local APIService of its own without `Available=True` (the available controller's job).
pub(super) fn needs_available(cur: &Value, d: &Desired) -> bool {
    let local = cur.pointer("/spec/service").is_none_or(Value::is_null);
    let ours = label_of(cur) == Some(d.label_value());
    let available = cur
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type") == Some(&json!("Available"))
                    && c.get("status") == Some(&json!("True"))
            })
        });
    local && ours && !available
}

pub(super) fn mark_available(shared: &Shared, name: &str) -> Result<u16, ApiErr> {
    let status = json!({"conditions": [{
        "type": "Available",
        "status": "True",
        "lastTransitionTime": crate::api::time::format_rfc3339(SystemTime::now()),
        "reason": "Local",
        "message": "Local APIServices are always available",
    }]});
    shared
        .store
        .update(
            apiservices(),
            "",
            name,
            true,
            KUBE_APISERVER_MANAGER,
            false,
            |cur| {
                let mut new = cur.clone();
                new["status"] = status;
                Ok(new)
            },
        )
        .map(|_| 200)
}
