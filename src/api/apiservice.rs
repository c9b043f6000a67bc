//! `apiregistration.k8s.io/v1` APIService: how the aggregator routes an API group version.

use serde::{Deserialize, Serialize};

use super::extra::deserialize_keeping_extra;
use super::{Extra, ObjectMeta, Resource};

/// Upstream's ownership label. On a real cluster it belongs to kube-apiserver, whose own
/// autoregister controller registers the built-in groups with it: only a program that *is*
/// the cluster's aggregator may use it as its key.
pub const AUTO_MANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";
/// This project's ownership label: a key of its own, outside the `kubernetes.io`/`k8s.io`
/// prefixes Kubernetes reserves, so it never collides with kube-apiserver's.
pub const DEFAULT_LABEL_KEY: &str = "autoregister.dev/automanaged";
/// Label value: synced once, when the controller starts.
pub const AUTO_MANAGED_ON_START: &str = "onstart";
/// Label value: synced continuously.
pub const AUTO_MANAGED_ALWAYS: &str = "true";

/// An APIService; fields the code does not model are kept verbatim in `extra`.
///
/// # Example
///
/// Built in code, or read from a manifest ([`parse_api_services`](crate::parse_api_services)):
///
/// ```
/// use autoregister::{APIService, APIServiceSpec, ServiceReference};
///
/// let api = APIService::new(
///     "v1alpha1.example.com",
///     APIServiceSpec {
///         service: Some(ServiceReference {
///             namespace: "example".into(),
///             name: "api".into(),
///             port: Some(443),
///             ..Default::default()
///         }),
///         group: "example.com".into(),
///         version: "v1alpha1".into(),
///         insecure_skip_tls_verify: true,
///         group_priority_minimum: 1000,
///         version_priority: 15,
///         ..Default::default()
///     },
/// );
/// let parsed = autoregister::parse_api_services(
///     "apiVersion: apiregistration.k8s.io/v1
/// kind: APIService
/// metadata: {name: v1alpha1.example.com}
/// spec:
///   service: {namespace: example, name: api, port: 443}
///   group: example.com
///   version: v1alpha1
///   insecureSkipTLSVerify: true
///   groupPriorityMinimum: 1000
///   versionPriority: 15
/// ",
/// )
/// .map_err(|e| format!("{e:?}"))?;
/// assert_eq!(parsed[0].spec, api.spec);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct APIService {
    /// `apiregistration.k8s.io/v1`.
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub api_version: Box<str>,
    /// `APIService`.
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub kind: Box<str>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired routing.
    #[serde(default)]
    pub spec: APIServiceSpec,
    /// Observed availability; written by the aggregator, never by us (boxed: most cached
    /// and every desired copy have none, and inline it was 48 bytes of each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Box<APIServiceStatus>>,
    /// Unknown top-level fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `APIServiceSpec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceSpec {
    /// The service that serves this API; none means served locally by kube-apiserver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    /// API group name.
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub group: Box<str>,
    /// API version.
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub version: Box<str>,
    /// Skip TLS verification towards the service (discouraged).
    #[serde(
        default,
        rename = "insecureSkipTLSVerify",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub insecure_skip_tls_verify: bool,
    /// PEM CA bundle for the service's serving certificate (base64 on the wire; boxed, no
    /// spare capacity: 8 bytes less in every copy).
    #[serde(
        default,
        with = "base64_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub ca_bundle: Option<Box<[u8]>>,
    /// Priority of the group, higher first (1..=20000).
    #[serde(default)]
    pub group_priority_minimum: i32,
    /// Priority of the version within its group (1..=1000).
    #[serde(default)]
    pub version_priority: i32,
    /// Unknown spec fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `ServiceReference`: a service by namespace, name and port.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    /// Namespace of the service.
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub namespace: Box<str>,
    /// Name of the service.
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub name: Box<str>,
    /// Port (the server defaults it to 443).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `APIServiceStatus`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceStatus {
    /// Current conditions, e.g. `Available`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<APIServiceCondition>>,
    /// Unknown status fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One APIService condition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceCondition {
    /// Condition type, e.g. `Available`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

deserialize_keeping_extra!(APIService {
    "apiVersion" => api_version,
    "kind" => kind,
    "metadata" => metadata,
    "spec" => spec,
    "status" => status,
});

deserialize_keeping_extra!(APIServiceSpec {
    "service" => service,
    "group" => group,
    "version" => version,
    "insecureSkipTLSVerify" => insecure_skip_tls_verify,
    "caBundle" => ca_bundle as base64_bytes::Base64,
    "groupPriorityMinimum" => group_priority_minimum,
    "versionPriority" => version_priority,
});

deserialize_keeping_extra!(ServiceReference {
    "namespace" => namespace,
    "name" => name,
    "port" => port,
});

deserialize_keeping_extra!(APIServiceStatus {
    "conditions" => conditions,
});

impl APIService {
    /// An APIService with apiVersion/kind set and the given name and spec.
    pub fn new(name: impl Into<Box<str>>, spec: APIServiceSpec) -> Self {
        APIService {
            api_version: Self::api_version().into(),
            kind: Self::KIND.into(),
            metadata: ObjectMeta::named(name),
            spec,
            status: None,
            extra: Extra::new(),
        }
    }

    /// Upstream's automanaged label's value, if any.
    pub fn auto_managed(&self) -> Option<&str> {
        self.metadata.label(AUTO_MANAGED_LABEL)
    }

    /// The value of the ownership label `key`, if any.
    pub fn ownership(&self, key: &str) -> Option<&str> {
        self.metadata.label(key)
    }

    /// Whether `new` is this object changed only by a write to its `status` (kube-aggregator's
    /// availability controller): spec, labels, annotations, unknown fields and ownership of
    /// the main resource are the same.
    pub fn changed_only_in_status(&self, new: &APIService) -> bool {
        self.api_version == new.api_version
            && self.kind == new.kind
            && self.spec == new.spec
            && self.extra == new.extra
            && self.metadata.same_but_status_write(&new.metadata)
    }

    /// Trims a copy kept in a cache to what a reader needs and a write sends back: drops
    /// `managedFields` but the managers they name (see
    /// [`ObjectMeta::strip_managed_fields`]), and apiVersion/kind when they are the usual
    /// ones (a write fills them in again). Every other field stays.
    pub fn compact_for_cache(&mut self) {
        self.metadata.strip_managed_fields();
        if self.api_version.split_once('/') == Some((Self::GROUP, Self::VERSION)) {
            self.api_version = Box::default();
        }
        if &*self.kind == Self::KIND {
            self.kind = Box::default();
        }
    }
}

impl Resource for APIService {
    const GROUP: &'static str = "apiregistration.k8s.io";
    const VERSION: &'static str = "v1";
    const KIND: &'static str = "APIService";
    const PLURAL: &'static str = "apiservices";
    const NAMESPACED: bool = false;

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// `[]byte` fields travel as standard base64 strings.
mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Box<[u8]>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(bytes) => {
                s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
            }
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<[u8]>>, D::Error> {
        let Some(text) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map(|b| Some(b.into_boxed_slice()))
            .map_err(|e| serde::de::Error::custom(format!("caBundle is not base64: {e}")))
    }

    /// The field's decoded form, for `deserialize_keeping_extra!`.
    pub struct Base64(Option<Box<[u8]>>);

    impl<'de> Deserialize<'de> for Base64 {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            deserialize(d).map(Base64)
        }
    }

    impl From<Base64> for Option<Box<[u8]>> {
        fn from(b: Base64) -> Self {
            b.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::WatchEvent;
    use serde_json::{json, Value};

    /// An APIService as a recent kube-apiserver returns it, plus fields a newer one might add
    /// at every level the code models (top level, metadata, spec, service, status, condition).
    fn full_object() -> Value {
        json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {
                "name": "v1beta1.metrics.k8s.io",
                "uid": "0b6d8f1e-5a43-4e0c-9d8b-1f1a9a3b2c7d",
                "resourceVersion": "918273",
                "generation": 3,
                "creationTimestamp": "2024-05-01T10:00:00Z",
                "labels": {
                    "kube-aggregator.kubernetes.io/automanaged": "onstart",
                    "app.kubernetes.io/name": "metrics-server"
                },
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"apiregistration.k8s.io/v1\"}\n",
                    "example.com/empty": ""
                },
                "finalizers": ["example.com/keep", "foregroundDeletion"],
                "ownerReferences": [{
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "metrics-server",
                    "uid": "7f1c1a52-0000-4000-8000-000000000001",
                    "controller": true,
                    "blockOwnerDeletion": true
                }],
                "managedFields": [{
                    "manager": "kube-apiserver",
                    "operation": "Update",
                    "apiVersion": "apiregistration.k8s.io/v1",
                    "time": "2024-05-01T10:00:05Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:status": {"f:conditions": {
                            ".": {},
                            "k:{\"type\":\"Available\"}": {
                                ".": {}, "f:lastTransitionTime": {}, "f:message": {},
                                "f:reason": {}, "f:status": {}, "f:type": {}
                            }
                        }}
                    },
                    "subresource": "status"
                }, {
                    "manager": "autoregister",
                    "operation": "Update",
                    "apiVersion": "apiregistration.k8s.io/v1",
                    "time": "2024-05-01T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:kube-aggregator.kubernetes.io/automanaged": {}}},
                                 "f:spec": {"f:caBundle": {}, "f:group": {}, "f:service": {".": {}, "f:name": {}}}}
                }],
                "deletionGracePeriodSeconds": 30,
                "futureMetadataField": {"nested": [1, 2.5, null, "x"]}
            },
            "spec": {
                "service": {
                    "namespace": "kube-system",
                    "name": "metrics-server",
                    "port": 443,
                    "futureServiceField": "v"
                },
                "group": "metrics.k8s.io",
                "version": "v1beta1",
                "insecureSkipTLSVerify": true,
                "caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJrVENCK3dJSkFLSGh3PT0KLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=",
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "futureSpecField": {"mode": "strict", "weights": [3, 1]}
            },
            "status": {
                "conditions": [{
                    "type": "Available",
                    "status": "False",
                    "lastTransitionTime": "2024-05-01T10:00:05Z",
                    "reason": "FailedDiscoveryCheck",
                    "message": "failing or missing response from https://10.96.0.10:443/apis/metrics.k8s.io/v1beta1",
                    "observedGeneration": 3
                }],
                "futureStatusField": true
            },
            "futureTopLevelField": {"a": "b"}
        })
    }

    #[test]
    fn full_object_round_trips_unchanged() {
        let input = full_object();
        let obj: APIService = serde_json::from_value(input.clone()).unwrap();
        // What the code reads is typed...
        assert_eq!(obj.metadata.name.as_deref(), Some("v1beta1.metrics.k8s.io"));
        assert_eq!(obj.auto_managed(), Some(AUTO_MANAGED_ON_START));
        assert_eq!(obj.spec.group_priority_minimum, 100);
        assert!(obj.spec.insecure_skip_tls_verify);
        assert!(obj
            .spec
            .ca_bundle
            .as_deref()
            .unwrap()
            .starts_with(b"-----BEGIN CERTIFICATE-----"));
        // ...and everything else survives a decode/encode, byte for byte as JSON values.
        assert_eq!(serde_json::to_value(&obj).unwrap(), input);
        // Also through the text form an update would send.
        let text = serde_json::to_string(&obj).unwrap();
        let back: APIService = serde_json::from_str(&text).unwrap();
        assert_eq!(back, obj);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), input);
    }

    #[test]
    fn full_object_round_trips_through_a_watch_event() {
        let input = full_object();
        let line = serde_json::to_vec(&json!({"type": "MODIFIED", "object": input})).unwrap();
        let ev = WatchEvent::<APIService>::from_json(&line).unwrap();
        let WatchEvent::Modified(obj) = ev else {
            panic!("expected MODIFIED, got {ev:?}")
        };
        assert_eq!(serde_json::to_value(&obj).unwrap(), input);
    }

    #[test]
    fn replacing_the_spec_keeps_everything_else() {
        let input = full_object();
        let mut obj: APIService = serde_json::from_value(input.clone()).unwrap();
        obj.spec = APIServiceSpec {
            group: "metrics.k8s.io".into(),
            version: "v1beta1".into(),
            group_priority_minimum: 200,
            version_priority: 10,
            ..Default::default()
        };
        let mut out = serde_json::to_value(&obj).unwrap();
        assert_eq!(out["spec"]["groupPriorityMinimum"], 200);
        out["spec"] = input["spec"].clone();
        assert_eq!(out, input);
    }

    #[test]
    fn ca_bundle_that_is_not_base64_is_a_decode_error() {
        let mut input = full_object();
        input["spec"]["caBundle"] = json!("not base64!");
        let err = serde_json::from_value::<APIService>(input).unwrap_err();
        assert!(err.to_string().contains("caBundle"), "{err}");
    }
    /// A cached copy (compacted) of an APIService with `managed` as its managedFields.
    fn cached(status: Value, managed: Value, labels: Value) -> APIService {
        let mut o: APIService = serde_json::from_value(json!({
            "metadata": {"name": "v1.a.example.com", "uid": "u", "resourceVersion": "1",
                         "labels": labels, "managedFields": managed},
            "spec": {"group": "a.example.com", "version": "v1", "groupPriorityMinimum": 100,
                     "versionPriority": 10},
            "status": status,
        }))
        .unwrap();
        o.compact_for_cache();
        o
    }

    #[test]
    fn a_status_write_is_told_from_every_other_change() {
        let ours = json!([{"manager": "autoregister", "operation": "Apply",
                           "time": "2026-01-01T00:00:00Z",
                           "fieldsV1": {"f:spec": {"f:group": {}}}}]);
        let mut with_status = ours.clone();
        with_status.as_array_mut().unwrap().push(json!({
            "manager": "kube-apiserver", "operation": "Update", "subresource": "status",
            "time": "2026-01-01T00:00:01Z", "fieldsV1": {"f:status": {"f:conditions": {}}}}));
        let unavailable = json!({"conditions": [{"type": "Available", "status": "False"}]});
        let labels = json!({"owner": "true"});
        let before = cached(Value::Null, ours.clone(), labels.clone());
        let mut after = cached(unavailable.clone(), with_status.clone(), labels.clone());
        after.metadata.resource_version = Some("2".into());
        assert!(before.changed_only_in_status(&after));
        // Changes a decision reads are not status-only.
        let mut spec = after.clone();
        spec.spec.version_priority = 11;
        assert!(!before.changed_only_in_status(&spec));
        let relabelled = cached(
            unavailable.clone(),
            with_status.clone(),
            json!({"owner": "x"}),
        );
        assert!(!before.changed_only_in_status(&relabelled));
        let mut taken = with_status.clone();
        taken.as_array_mut().unwrap().push(json!({
            "manager": "kubectl", "operation": "Update", "time": "2026-01-01T00:00:02Z",
            "fieldsV1": {"f:spec": {"f:versionPriority": {}}}}));
        let owned = cached(unavailable.clone(), taken, labels.clone());
        assert!(
            !before.changed_only_in_status(&owned),
            "ownership of the spec moved"
        );
        let mut extra = after.clone();
        extra.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
        assert!(!before.changed_only_in_status(&extra));
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    /// Every cached and every desired APIService is one allocation of this size, most of
    /// it empty `Option`s and maps: a field that grows it grows two copies per object.
    #[test]
    fn an_apiservice_stays_small_inline() {
        let size = std::mem::size_of::<APIService>();
        // 560 before unknown fields took a pointer when empty, status went behind a Box,
        // the timestamps and caBundle lost their spare capacity and the identity and spec
        // strings became `Box<str>`. With the `Arc` header this is 368 bytes: mimalloc's
        // 384-byte class (the static binary), not its 448.
        assert!(size <= 352, "{size} bytes");
    }
}
