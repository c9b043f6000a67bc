//! `discovery.k8s.io/v1` EndpointSlice, read only: which endpoints of a Service are ready.

use serde::{Deserialize, Serialize};

use super::{ObjectMeta, Resource};

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// An EndpointSlice, as far as an APIService's backend check reads it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSlice {
    /// `discovery.k8s.io/v1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `EndpointSlice`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Standard object metadata (the Service is named by [`SERVICE_NAME_LABEL`]).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The endpoints (the API requires the field; a missing one reads as none).
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    /// The ports every endpoint of the slice serves.
    #[serde(default)]
    pub ports: Vec<EndpointPort>,
}

/// One endpoint of a slice.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// Its addresses.
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Readiness.
    #[serde(default)]
    pub conditions: EndpointConditions,
}

/// `EndpointConditions`: only readiness matters here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointConditions {
    /// Ready to serve; absent means ready (as the API documents and upstream reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Shutting down (its pod is being deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating: Option<bool>,
}

/// One port of a slice.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPort {
    /// The Service port's name (`""` for an unnamed one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The port number endpoints listen on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

impl EndpointSlice {
    /// The Service this slice belongs to, from its label.
    pub fn service_name(&self) -> Option<&str> {
        self.metadata.label(SERVICE_NAME_LABEL)
    }

    /// Upstream's `hasAvailableEndpoint` for one slice: a ready endpoint, and a port named
    /// `port_name` with a number.
    pub fn serves(&self, port_name: &str) -> bool {
        self.endpoints
            .iter()
            .any(|e| e.conditions.ready.unwrap_or(true))
            && self
                .ports
                .iter()
                .any(|p| p.name.as_deref().unwrap_or("") == port_name && p.port.is_some())
    }
}

impl Resource for EndpointSlice {
    const GROUP: &'static str = "discovery.k8s.io";
    const VERSION: &'static str = "v1";
    const KIND: &'static str = "EndpointSlice";
    const PLURAL: &'static str = "endpointslices";
    const NAMESPACED: bool = true;

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
