//! Core `v1` Secret and ConfigMap, read (never written) as sources of CA bundles.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ObjectMeta, Resource};

/// A Secret as the CA injection reads it: metadata and `data` (values base64 on the wire,
/// decoded when read). Unmodelled fields are dropped: this program never writes one back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Key → base64 of the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<BTreeMap<String, String>>,
    /// e.g. `kubernetes.io/tls`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

/// A ConfigMap as the CA injection reads it: metadata, `data` and `binaryData`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMap {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Key → UTF-8 value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<BTreeMap<String, String>>,
    /// Key → base64 of a binary value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_data: Option<BTreeMap<String, String>>,
}

impl Resource for Secret {
    const GROUP: &'static str = "";
    const VERSION: &'static str = "v1";
    const KIND: &'static str = "Secret";
    const PLURAL: &'static str = "secrets";
    const NAMESPACED: bool = true;
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Resource for ConfigMap {
    const GROUP: &'static str = "";
    const VERSION: &'static str = "v1";
    const KIND: &'static str = "ConfigMap";
    const PLURAL: &'static str = "configmaps";
    const NAMESPACED: bool = true;
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Secret {
    /// Keeps only `key`'s value in `data`: other values (a TLS secret's `tls.key`) are
    /// emptied, so only their names stay in memory (to say which keys there are).
    pub fn trim_to_key(&mut self, key: &str) {
        if let Some(d) = self.data.as_mut() {
            d.iter_mut()
                .filter(|(k, _)| k.as_str() != key)
                .for_each(|(_, v)| v.clear());
        }
        self.metadata.managed_fields = None;
        self.metadata.annotations = None;
    }
}

impl ConfigMap {
    /// Keeps only `key`'s value in `data` and `binaryData` (other values emptied).
    pub fn trim_to_key(&mut self, key: &str) {
        for d in [self.data.as_mut(), self.binary_data.as_mut()]
            .into_iter()
            .flatten()
        {
            d.iter_mut()
                .filter(|(k, _)| k.as_str() != key)
                .for_each(|(_, v)| v.clear());
        }
        self.metadata.managed_fields = None;
        self.metadata.annotations = None;
    }
}
