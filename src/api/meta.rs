//! Object metadata shared by every Kubernetes kind (`metav1.ObjectMeta`, `ListMeta`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `metav1.ObjectMeta`: the fields the controller reads, plus everything else verbatim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Object name, unique per kind (and namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace of a namespaced object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Server-assigned unique id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Opaque version used for optimistic concurrency and watches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Bumped by the server when the spec changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// RFC 3339 creation time, set by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// RFC 3339 time at which graceful deletion started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    /// Labels; the controller's ownership label marks managed objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// `managedFields`, kept verbatim as compact JSON text: as a `Value` tree it was most of
    /// a cached object (8.8 KB per APIService instead of ~2 KB), for a field read only to
    /// name who wrote an object we do not own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_fields: Option<RawJson>,
    /// Every other field (finalizers, ownerReferences, future fields).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A JSON value kept as its compact text and written back unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawJson(Box<str>);

impl RawJson {
    /// The compact text of `value`.
    pub fn from_value(value: &Value) -> RawJson {
        RawJson(value.to_string().into_boxed_str())
    }

    /// The value again (it was valid JSON when stored, so this cannot fail; `Null` if it did).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }

    /// The compact JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Serialize for RawJson {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Through a Value, so any serializer (not only serde_json's) writes it; this runs
        // only when an object is written back, never per watch event.
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The tree lives only while the text is made (ObjectMeta's flatten buffers the
        // field anyway, so a borrowed RawValue is not available here).
        Ok(RawJson::from_value(&Value::deserialize(d)?))
    }
}

impl ObjectMeta {
    /// Metadata with only a name.
    pub fn named(name: impl Into<String>) -> Self {
        ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        }
    }

    /// The value of label `key`, if set.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key).map(String::as_str)
    }

    /// The managers named in `metadata.managedFields`, most recent write first.
    pub fn field_managers(&self) -> Vec<String> {
        let managed = self.managed_fields.as_ref().map(RawJson::to_value);
        let mut entries: Vec<(String, String)> = managed
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let manager = e.get("manager")?.as_str()?.to_string();
                let time = e.get("time").and_then(Value::as_str).unwrap_or("");
                Some((time.to_string(), manager))
            })
            .collect();
        // RFC 3339 times in UTC sort as strings; the stable sort keeps the server's order on ties.
        entries.sort_by(|a, b| b.0.cmp(&a.0));
        let mut out: Vec<String> = Vec::new();
        for (_, m) in entries {
            if !out.contains(&m) {
                out.push(m);
            }
        }
        out
    }

    /// Removes label `key`.
    pub fn remove_label(&mut self, key: &str) {
        if let Some(labels) = &mut self.labels {
            labels.remove(key);
            if labels.is_empty() {
                self.labels = None;
            }
        }
    }

    /// Sets label `key` to `value`.
    pub fn set_label(&mut self, key: &str, value: &str) {
        self.labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
    }
}

/// `metav1.ListMeta`: the list's resourceVersion and the pagination token.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    /// Collection version to watch from after this list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Token for the next page; absent or empty on the last page.
    #[serde(default, rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_: Option<String>,
    /// Objects left after this page, when the server knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_item_count: Option<i64>,
}

/// A list response (`<Kind>List`) for any kind `K`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "K: Deserialize<'de>"))]
pub struct ObjectList<K> {
    /// `apiVersion` of the list.
    #[serde(default)]
    pub api_version: String,
    /// `kind` of the list, e.g. `APIServiceList`.
    #[serde(default)]
    pub kind: String,
    /// resourceVersion and continue token.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The objects of this page (`null` is read as empty).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub items: Vec<K>,
}

fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}
