//! `coordination.k8s.io/v1` Lease: the lock object of leader election.

use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::{Map, Value};

use super::extra::deserialize_keeping_extra;
use super::{time, ObjectMeta, Resource};

/// A Lease; fields the code does not model are kept verbatim in `extra`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// `coordination.k8s.io/v1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `Lease`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Who holds the lease and until when.
    #[serde(default)]
    pub spec: LeaseSpec,
    /// Unknown top-level fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `LeaseSpec`: the leader-election record.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseSpec {
    /// Identity of the holder; empty or absent means nobody holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_identity: Option<String>,
    /// How long, after a renewal is observed, others must wait before taking over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<i32>,
    /// When the current holder acquired the lease (`MicroTime`, RFC 3339 with microseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquire_time: Option<String>,
    /// When the holder last renewed (`MicroTime`); informative only, expiry uses local clocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_time: Option<String>,
    /// How many times the lease changed hands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_transitions: Option<i32>,
    /// Unknown spec fields (e.g. `strategy`, `preferredHolder`).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

deserialize_keeping_extra!(Lease {
    "apiVersion" => api_version,
    "kind" => kind,
    "metadata" => metadata,
    "spec" => spec,
});

deserialize_keeping_extra!(LeaseSpec {
    "holderIdentity" => holder_identity,
    "leaseDurationSeconds" => lease_duration_seconds,
    "acquireTime" => acquire_time,
    "renewTime" => renew_time,
    "leaseTransitions" => lease_transitions,
});

impl Lease {
    /// A Lease with apiVersion/kind set and the given name and spec.
    pub fn new(name: impl Into<Box<str>>, spec: LeaseSpec) -> Self {
        Lease {
            api_version: Self::api_version(),
            kind: Self::KIND.to_string(),
            metadata: ObjectMeta::named(name),
            spec,
            extra: Map::new(),
        }
    }
}

impl LeaseSpec {
    /// The holder's identity, or `""` when nobody holds the lease.
    pub fn holder(&self) -> &str {
        self.holder_identity.as_deref().unwrap_or("")
    }

    /// `leaseDurationSeconds` as a duration, when set and positive.
    pub fn lease_duration(&self) -> Option<Duration> {
        self.lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .filter(|&s| s > 0)
            .map(Duration::from_secs)
    }

    /// `renewTime` parsed, when present and well-formed.
    pub fn renewed_at(&self) -> Option<SystemTime> {
        time::parse_rfc3339(self.renew_time.as_deref()?)
    }

    /// `acquireTime` parsed, when present and well-formed.
    pub fn acquired_at(&self) -> Option<SystemTime> {
        time::parse_rfc3339(self.acquire_time.as_deref()?)
    }
}

impl Resource for Lease {
    const GROUP: &'static str = "coordination.k8s.io";
    const VERSION: &'static str = "v1";
    const KIND: &'static str = "Lease";
    const PLURAL: &'static str = "leases";
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

    /// A Lease as kube-apiserver returns it, plus fields a newer server might add.
    fn full_object() -> Value {
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": "autoregister",
                "namespace": "kube-system",
                "uid": "5b1c8a2e-1111-4000-8000-000000000002",
                "resourceVersion": "4711",
                "creationTimestamp": "2024-05-01T10:00:00Z",
                "managedFields": [{"manager": "autoregister", "operation": "Update"}]
            },
            "spec": {
                "holderIdentity": "node-a_4f2c",
                "leaseDurationSeconds": 15,
                "acquireTime": "2024-05-01T10:00:00.123456Z",
                "renewTime": "2024-05-01T10:05:02.654321Z",
                "leaseTransitions": 3,
                "strategy": "OldestEmulationVersion",
                "preferredHolder": "node-b_1a2b"
            },
            "futureTopLevelField": [1, 2]
        })
    }

    #[test]
    fn full_object_round_trips_unchanged() {
        let input = full_object();
        let lease: Lease = serde_json::from_value(input.clone()).unwrap();
        assert_eq!(lease.spec.holder(), "node-a_4f2c");
        assert_eq!(lease.spec.lease_duration(), Some(Duration::from_secs(15)));
        assert_eq!(lease.spec.lease_transitions, Some(3));
        let renewed = lease.spec.renewed_at().unwrap();
        let acquired = lease.spec.acquired_at().unwrap();
        assert_eq!(
            renewed.duration_since(acquired).unwrap(),
            Duration::from_micros(302_530_865)
        );
        assert_eq!(serde_json::to_value(&lease).unwrap(), input);
    }

    #[test]
    fn empty_lease_has_no_holder_and_no_duration() {
        let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
        assert_eq!(lease.spec.holder(), "");
        assert_eq!(lease.spec.lease_duration(), None);
        let zero = LeaseSpec {
            lease_duration_seconds: Some(0),
            ..Default::default()
        };
        assert_eq!(zero.lease_duration(), None);
    }

    #[test]
    fn new_lease_names_its_kind() {
        let v = serde_json::to_value(Lease::new("lock", LeaseSpec::default())).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "lock"}, "spec": {}})
        );
    }
}
