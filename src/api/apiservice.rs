//! `apiregistration.k8s.io/v1` APIService: how the aggregator routes an API group version.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{ObjectMeta, Resource};

/// Label that marks an APIService as owned by autoregister.
pub const AUTO_MANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";
/// Label value: synced once, when the controller starts.
pub const AUTO_MANAGED_ON_START: &str = "onstart";
/// Label value: synced continuously.
pub const AUTO_MANAGED_ALWAYS: &str = "true";

/// An APIService; fields the code does not model are kept verbatim in `extra`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIService {
    /// `apiregistration.k8s.io/v1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `APIService`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired routing.
    #[serde(default)]
    pub spec: APIServiceSpec,
    /// Observed availability; written by the aggregator, never by us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<APIServiceStatus>,
    /// Unknown top-level fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `APIServiceSpec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceSpec {
    /// The service that serves this API; none means served locally by kube-apiserver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    /// API group name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// API version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Skip TLS verification towards the service (discouraged).
    #[serde(
        default,
        rename = "insecureSkipTLSVerify",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub insecure_skip_tls_verify: bool,
    /// PEM CA bundle for the service's serving certificate (base64 on the wire).
    #[serde(
        default,
        with = "base64_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub ca_bundle: Option<Vec<u8>>,
    /// Priority of the group, higher first (1..=20000).
    #[serde(default)]
    pub group_priority_minimum: i32,
    /// Priority of the version within its group (1..=1000).
    #[serde(default)]
    pub version_priority: i32,
    /// Unknown spec fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `ServiceReference`: a service by namespace, name and port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    /// Namespace of the service.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the service.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Port (the server defaults it to 443).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `APIServiceStatus`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceStatus {
    /// Current conditions, e.g. `Available`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<APIServiceCondition>>,
    /// Unknown status fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
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
    pub extra: Map<String, Value>,
}

impl APIService {
    /// An APIService with apiVersion/kind set and the given name and spec.
    pub fn new(name: impl Into<String>, spec: APIServiceSpec) -> Self {
        APIService {
            api_version: Self::api_version(),
            kind: Self::KIND.to_string(),
            metadata: ObjectMeta::named(name),
            spec,
            status: None,
            extra: Map::new(),
        }
    }

    /// The automanaged label's value, if any.
    pub fn auto_managed(&self) -> Option<&str> {
        self.metadata.label(AUTO_MANAGED_LABEL)
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

    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(bytes) => {
                s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
            }
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        let Some(text) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map(Some)
            .map_err(|e| serde::de::Error::custom(format!("caBundle is not base64: {e}")))
    }
}
