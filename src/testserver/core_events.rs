//! Events as kube-apiserver serves them: one store, two API versions. Events written
//! through `events.k8s.io/v1` (as the controller writes them) read through `core/v1` too,
//! at `/api/v1/events` and `/api/v1/namespaces/NS/events[/NAME]`, converted field by field
//! as kube-apiserver converts them (`regarding` → `involvedObject`, `note` → `message`,
//! `reportingController` → `reportingComponent`, the `deprecated*` fields back to their
//! old names). That is what `kubectl describe` lists, with field selectors on
//! `involvedObject.*`. The core view answers get and list; writes and watches are served
//! at `events.k8s.io/v1` only.

use serde_json::{json, Map, Value};

use super::errors::{self, ApiErr};
use super::http::{Request, Response};
use super::kinds::{self, Kind};
use super::selector::{metadata_fields, Selector};
use super::store::{ListRequest, Store};

/// Field labels of `events.k8s.io/v1` Events, resolved into the stored object.
pub(crate) fn event_fields(label: &str) -> Option<&'static str> {
    Some(match label {
        "regarding.kind" => "/regarding/kind",
        "regarding.namespace" => "/regarding/namespace",
        "regarding.name" => "/regarding/name",
        "regarding.uid" => "/regarding/uid",
        "regarding.apiVersion" => "/regarding/apiVersion",
        "regarding.resourceVersion" => "/regarding/resourceVersion",
        "regarding.fieldPath" => "/regarding/fieldPath",
        "reason" => "/reason",
        "type" => "/type",
        "reportingController" => "/reportingController",
        other => return metadata_fields(other),
    })
}

/// Field labels of `core/v1` Events (kube-apiserver's set), resolved into the stored
/// `events.k8s.io/v1` object.
fn core_fields(label: &str) -> Option<&'static str> {
    Some(match label {
        "involvedObject.kind" => "/regarding/kind",
        "involvedObject.namespace" => "/regarding/namespace",
        "involvedObject.name" => "/regarding/name",
        "involvedObject.uid" => "/regarding/uid",
        "involvedObject.apiVersion" => "/regarding/apiVersion",
        "involvedObject.resourceVersion" => "/regarding/resourceVersion",
        "involvedObject.fieldPath" => "/regarding/fieldPath",
        "reason" => "/reason",
        "type" => "/type",
        "reportingComponent" => "/reportingController",
        "source" => "/deprecatedSource/component",
        other => return metadata_fields(other),
    })
}

/// The stored kind (`events.k8s.io/v1`).
fn stored_kind() -> Result<&'static Kind, ApiErr> {
    kinds::find("events.k8s.io", "v1", "events")
        .ok_or_else(|| errors::internal("events.k8s.io/v1 events are not registered"))
}

/// A stored `events.k8s.io/v1` Event as `core/v1` shows it.
pub(crate) fn to_core(ev: &Value) -> Value {
    let field = |k: &str| ev.get(k).cloned();
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v.filter(|v| !v.is_null()) {
            out.insert(k.into(), v);
        }
    };
    put("metadata", field("metadata"));
    put(
        "involvedObject",
        Some(field("regarding").unwrap_or(json!({}))),
    );
    put("reason", field("reason"));
    put("message", field("note"));
    put(
        "source",
        Some(field("deprecatedSource").unwrap_or(json!({}))),
    );
    put("count", field("deprecatedCount"));
    put("type", field("type"));
    put("eventTime", field("eventTime"));
    put("series", field("series"));
    put("action", field("action"));
    put("related", field("related"));
    put(
        "reportingComponent",
        Some(field("reportingController").unwrap_or(json!(""))),
    );
    put(
        "reportingInstance",
        Some(field("reportingInstance").unwrap_or(json!(""))),
    );
    // Present and null when unset, as kube-apiserver writes them.
    out.insert(
        "firstTimestamp".into(),
        field("deprecatedFirstTimestamp").unwrap_or(Value::Null),
    );
    out.insert(
        "lastTimestamp".into(),
        field("deprecatedLastTimestamp").unwrap_or(Value::Null),
    );
    Value::Object(out)
}

/// `GET /api/v1/[namespaces/NS/]events[/NAME]`.
pub(crate) fn serve(
    store: &Store,
    req: &Request,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<Response, ApiErr> {
    if req.method != "GET" || req.query_bool("watch") {
        return Err(errors::method_not_allowed(&req.method));
    }
    let kind = stored_kind()?;
    if let Some(name) = name {
        let obj = store.get(kind, namespace.unwrap_or(""), name)?;
        return Ok(super::rest::object(200, &to_core(&obj)));
    }
    let selector = Selector::parse_with(
        req.query("labelSelector"),
        req.query("fieldSelector"),
        core_fields,
    )
    .map_err(errors::bad_request)?;
    let limit = match req.query("limit") {
        Some(l) if !l.is_empty() => Some(
            l.parse::<usize>()
                .map_err(|_| errors::bad_request(format!("invalid limit {l:?}")))?,
        ),
        _ => None,
    };
    let page = store.list(
        kind,
        &ListRequest {
            namespace,
            selector: &selector,
            limit,
            continue_token: req.query("continue"),
            resource_version: req.query("resourceVersion"),
        },
    )?;
    let mut meta = json!({"resourceVersion": page.rv.to_string()});
    if let Some(c) = &page.continue_token {
        meta["continue"] = json!(c);
    }
    if let Some(r) = page.remaining {
        meta["remainingItemCount"] = json!(r);
    }
    let items: Vec<Value> = page.items.iter().map(|e| to_core(e)).collect();
    let list = json!({"apiVersion": "v1", "kind": "EventList", "metadata": meta, "items": items});
    Ok(super::rest::object(200, &list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_k8s_io_event_reads_as_core_v1() {
        let ev = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "autoregister.dev/controller",
            "reportingInstance": "pod-1",
            "action": "Create", "reason": "Registered", "type": "Normal",
            "regarding": {"kind": "APIService", "name": "v1.x", "uid": "u1"},
            "note": "created"
        });
        let core = to_core(&ev);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "v1.x");
        assert_eq!(core["message"], "created");
        assert_eq!(core["reportingComponent"], "autoregister.dev/controller");
        assert_eq!(core["source"], json!({}));
        assert!(core["firstTimestamp"].is_null() && core.get("firstTimestamp").is_some());
        assert!(core.get("regarding").is_none() && core.get("note").is_none());
    }

    #[test]
    fn core_field_selectors_resolve_into_the_stored_event() {
        let ev = json!({"metadata": {"name": "e1"}, "regarding": {"kind": "APIService", "name": "v1.x", "uid": "u1"}, "reason": "Registered"});
        let sel = |f: &str| {
            Selector::parse_with(None, Some(f), core_fields)
                .unwrap()
                .matches(&ev)
        };
        assert!(sel("involvedObject.name=v1.x,involvedObject.namespace=,involvedObject.kind=APIService,involvedObject.uid=u1"));
        assert!(!sel("involvedObject.name=v1.y"));
        assert!(sel("reason=Registered"));
        assert!(Selector::parse_with(None, Some("spec.x=1"), core_fields).is_err());
        let kind = stored_kind().unwrap();
        assert!(kind.plural == "events" && kind.group == "events.k8s.io");
    }
}
