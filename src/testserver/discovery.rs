//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/<group>[/<version>]`.

use serde_json::{json, Value};

use super::kinds::{Kind, KINDS};

/// The Kubernetes version the server claims to be.
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-autoregister-testserver",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`: the core group's versions (v1: Services, and a read-only view of Events).
pub(crate) fn core_versions(addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}]
    })
}

/// `/api/v1`: the core kinds served, and Events (the `events.k8s.io/v1` ones read as
/// `core/v1`, get and list only).
pub(crate) fn core_resources() -> Value {
    let mut resources: Vec<Value> = KINDS
        .iter()
        .filter(|k| k.group.is_empty())
        .flat_map(resource_doc)
        .collect();
    resources.push(json!({
        "name": "events",
        "singularName": "event",
        "namespaced": true,
        "kind": "Event",
        "verbs": ["get", "list"],
        "shortNames": ["ev"],
    }));
    json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": resources})
}

fn groups() -> Vec<&'static str> {
    let mut gs: Vec<&str> = Vec::new();
    for k in KINDS {
        if !k.group.is_empty() && !gs.contains(&k.group) {
            gs.push(k.group);
        }
    }
    gs
}

fn group_doc(group: &str) -> Value {
    let mut versions: Vec<&str> = Vec::new();
    for k in KINDS.iter().filter(|k| k.group == group) {
        if !versions.contains(&k.version) {
            versions.push(k.version);
        }
    }
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`: every group served.
pub(crate) fn group_list() -> Value {
    let groups: Vec<Value> = groups().into_iter().map(group_doc).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub(crate) fn group(group: &str) -> Option<Value> {
    groups().contains(&group).then(|| group_doc(group))
}

fn resource_doc(k: &Kind) -> Vec<Value> {
    let mut main = json!({
        "name": k.plural,
        "singularName": k.singular,
        "namespaced": k.namespaced,
        "kind": k.kind,
        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
    });
    if !k.short_names.is_empty() {
        main["shortNames"] = json!(k.short_names);
    }
    if !k.categories.is_empty() {
        main["categories"] = json!(k.categories);
    }
    let mut out = vec![main];
    if k.status_subresource {
        out.push(json!({
            "name": format!("{}/status", k.plural),
            "singularName": "",
            "namespaced": k.namespaced,
            "kind": k.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    out
}

/// `/apis/<group>/<version>`.
pub(crate) fn resource_list(group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = KINDS
        .iter()
        .filter(|k| k.group == group && k.version == version)
        .flat_map(resource_doc)
        .collect();
    (!resources.is_empty()).then(|| {
        json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{group}/{version}"),
            "resources": resources,
        })
    })
}

/// `/openapi/v3`: where each group version's document is.
pub(crate) fn openapi_v3_root() -> Value {
    let mut paths = serde_json::Map::new();
    // Core kinds have no document here (kubectl validates them without one).
    for k in KINDS.iter().filter(|k| !k.group.is_empty()) {
        let gv = format!("apis/{}/{}", k.group, k.version);
        paths.insert(
            gv.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash=0")}),
        );
    }
    json!({ "paths": paths })
}

/// `/openapi/v3/apis/<group>/<version>`: just enough for kubectl to learn that PATCH takes
/// `fieldValidation` (so it validates server-side and needs no schemas).
pub(crate) fn openapi_v3_group_version(group: &str, version: &str) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    for k in KINDS
        .iter()
        .filter(|k| k.group == group && k.version == version)
    {
        let gvk = json!({"group": k.group, "version": k.version, "kind": k.kind});
        let prefix = if k.namespaced {
            format!(
                "/apis/{group}/{version}/namespaces/{{namespace}}/{}",
                k.plural
            )
        } else {
            format!("/apis/{group}/{version}/{}", k.plural)
        };
        let param = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string"}});
        let op = |action: &str| {
            json!({
                "operationId": format!("{action}{}", k.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [param("dryRun"), param("fieldManager"), param("fieldValidation")],
                "responses": {"200": {"description": "OK"}}
            })
        };
        paths.insert(
            format!("{prefix}/{{name}}"),
            json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}),
        );
        paths.insert(prefix, json!({"get": op("list"), "post": op("post")}));
    }
    (!paths.is_empty()).then(|| {
        json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": paths,
            "components": {"schemas": {}}
        })
    })
}
