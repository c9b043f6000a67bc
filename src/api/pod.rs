//! Core `v1` Pod, read only: what `explain` needs to say why a backend has no ready
//! endpoint (readiness, restarts, container ports) and where its serving certificate is
//! mounted from (secret volumes). Fields it does not read are dropped.

use serde::{Deserialize, Serialize};

use super::{ObjectMeta, Resource};

/// A Pod, as far as `explain` reads it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Containers, volumes, service account.
    #[serde(default)]
    pub spec: PodSpec,
    /// Phase, conditions, container statuses.
    #[serde(default)]
    pub status: PodStatus,
}

/// `PodSpec`, the fields `explain` reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// The ServiceAccount the pod runs as (`default` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Its containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<Container>,
    /// Its volumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
}

/// One container: its name and ports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    /// Container name.
    #[serde(default)]
    pub name: String,
    /// Declared ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPort>,
}

/// A declared container port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    /// Its name, which a Service's `targetPort` may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The port number.
    #[serde(default)]
    pub container_port: i32,
}

/// A volume; only Secret volumes are read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// Volume name.
    #[serde(default)]
    pub name: String,
    /// Set for a Secret volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretVolume>,
}

/// A Secret volume's source.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretVolume {
    /// The Secret's name, in the pod's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
}

/// `PodStatus`, the fields `explain` reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    /// `Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// `Ready`, `ContainersReady`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<PodCondition>,
    /// One per container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_statuses: Vec<ContainerStatus>,
}

/// One condition of a pod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCondition {
    /// e.g. `Ready`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// `True`, `False`, `Unknown`.
    #[serde(default)]
    pub status: String,
    /// Why, in one word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A container's readiness and restarts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    /// Container name.
    #[serde(default)]
    pub name: String,
    /// Whether it passes its readiness probe.
    #[serde(default)]
    pub ready: bool,
    /// How often it restarted.
    #[serde(default)]
    pub restart_count: i64,
}

impl Pod {
    /// Whether its `Ready` condition is `True`.
    pub fn is_ready(&self) -> bool {
        self.status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    }
}

impl Resource for Pod {
    const GROUP: &'static str = "";
    const VERSION: &'static str = "v1";
    const KIND: &'static str = "Pod";
    const PLURAL: &'static str = "pods";
    const NAMESPACED: bool = true;

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
