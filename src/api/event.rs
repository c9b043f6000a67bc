//! `events.k8s.io/v1` Event: what a controller did to an object, for `kubectl describe`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{ObjectMeta, Resource};

/// An Event; fields the code does not model are kept verbatim in `extra`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// `events.k8s.io/v1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `Event`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Standard object metadata (name `<regarding>.<hex nanoseconds>`, as client-go names them).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// When it happened (`MicroTime`, RFC 3339 with microseconds); required.
    #[serde(default)]
    pub event_time: String,
    /// The controller that wrote it, e.g. `autoregister`; required.
    #[serde(default)]
    pub reporting_controller: String,
    /// Which instance of it (the leader-election identity); required.
    #[serde(default)]
    pub reporting_instance: String,
    /// What was done, e.g. `Create`; required.
    #[serde(default)]
    pub action: String,
    /// Why, in one CamelCase word, e.g. `Registered`; required.
    #[serde(default)]
    pub reason: String,
    /// The object it is about.
    #[serde(default)]
    pub regarding: ObjectReference,
    /// Human-readable detail, at most 1 kB.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// `Normal` or `Warning`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Unknown top-level fields (series, related, deprecated*).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `v1.ObjectReference`: enough to find the object an Event is about.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// e.g. `apiregistration.k8s.io/v1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// e.g. `APIService`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Object name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Namespace; empty for a cluster-scoped object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// UID, when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Unknown fields (resourceVersion, fieldPath).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Resource for Event {
    const GROUP: &'static str = "events.k8s.io";
    const VERSION: &'static str = "v1";
    const KIND: &'static str = "Event";
    const PLURAL: &'static str = "events";
    const NAMESPACED: bool = true;

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_with_unknown_fields_and_type_renamed() {
        let v = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "v1.foo.17a", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000001Z",
            "reportingController": "autoregister", "reportingInstance": "host_1",
            "action": "Create", "reason": "Registered",
            "regarding": {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "name": "v1.foo"},
            "note": "created", "type": "Normal",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}
        });
        let e: Event = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(e.type_, "Normal");
        assert_eq!(e.regarding.kind, "APIService");
        assert_eq!(serde_json::to_value(&e).unwrap(), v);
    }
}
