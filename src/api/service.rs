//! Core `v1` Service, read only: what the availability check and `explain` need (type,
//! ports, selector).
//!
//! The controller never writes a Service, so fields it does not read are dropped.

use serde::{Deserialize, Serialize};

use super::{ObjectMeta, Resource};

/// A Service, as far as an APIService's backend check reads it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    /// `v1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `Service`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Type and ports.
    #[serde(default)]
    pub spec: ServiceSpec,
}

/// `ServiceSpec`, the fields the availability check reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// `ClusterIP` (the default), `NodePort`, `LoadBalancer` or `ExternalName`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// The ports the Service exposes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ServicePort>,
    /// The labels of the pods it routes to; `None`: endpoints are written by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<std::collections::BTreeMap<String, String>>,
    /// The DNS name an `ExternalName` Service stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_name: Option<String>,
}

/// One port of a Service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// Port name; EndpointSlice ports carry the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The port the Service listens on.
    #[serde(default)]
    pub port: i32,
    /// The pods' port it forwards to: a number or a container port's name (default: `port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<serde_json::Value>,
}

impl Service {
    /// Whether the Service routes through a cluster IP (upstream checks endpoints only then).
    pub fn is_cluster_ip(&self) -> bool {
        matches!(self.spec.type_.as_deref(), None | Some("ClusterIP"))
    }

    /// The name of the port that listens on `port`, `Some("")` for an unnamed one.
    pub fn port_name(&self, port: i32) -> Option<&str> {
        self.spec
            .ports
            .iter()
            .find(|p| p.port == port)
            .map(|p| p.name.as_deref().unwrap_or(""))
    }
}

impl Resource for Service {
    const GROUP: &'static str = "";
    const VERSION: &'static str = "v1";
    const KIND: &'static str = "Service";
    const PLURAL: &'static str = "services";
    const NAMESPACED: bool = true;

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
