//! Object metadata shared by every Kubernetes kind (`metav1.ObjectMeta`, `ListMeta`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::extra::deserialize_keeping_extra;
use super::managed_fields::{shared_text, FieldOwnership};
use super::{Extra, StringMap};

/// `metav1.ObjectMeta`: the fields the controller reads, plus everything else verbatim.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Object name, unique per kind (and namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Box<str>>,
    /// Namespace of a namespaced object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Box<str>>,
    /// Server-assigned unique id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<Box<str>>,
    /// Opaque version used for optimistic concurrency and watches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<Box<str>>,
    /// Bumped by the server when the spec changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// RFC 3339 creation time, set by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Box<str>>,
    /// RFC 3339 time at which graceful deletion started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Box<str>>,
    /// Labels; the controller's ownership label marks managed objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<StringMap>,
    /// Annotations, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<StringMap>,
    /// `managedFields`, kept verbatim as compact JSON text: as a `Value` tree it was most of
    /// a cached object (8.8 KB per APIService instead of ~2 KB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_fields: Option<RawJson>,
    /// Who owns which field, by a dropped `managedFields` (one copy shared by every object
    /// written the same way), see [`strip_managed_fields`](Self::strip_managed_fields).
    /// Never sent, so a write of a stripped copy leaves the server's `managedFields` as
    /// they are.
    #[serde(skip)]
    pub field_owners: Option<Arc<FieldOwnership>>,
    /// Every other field (finalizers, ownerReferences, future fields).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A JSON value kept as its text (as the server sent it) and written back unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawJson(Box<str>);

impl RawJson {
    /// The compact text of `value`.
    pub fn from_value(value: &Value) -> RawJson {
        RawJson(value.to_string().into_boxed_str())
    }

    /// The value again (it was valid JSON when stored, so this cannot fail; `Null` if it did).
    pub fn to_value(&self) -> Value {
        serde_json::from_slice(self.0.as_bytes()).unwrap_or(Value::Null)
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
        // The text as it came, no tree built (the server sends it compact). This needs a
        // serde_json deserializer all the way down: no `#[serde(flatten)]` around it.
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        Ok(RawJson(raw.into()))
    }
}

deserialize_keeping_extra!(ObjectMeta {
    "name" => name,
    "namespace" => namespace,
    "uid" => uid,
    "resourceVersion" => resource_version,
    "generation" => generation,
    "creationTimestamp" => creation_timestamp,
    "deletionTimestamp" => deletion_timestamp,
    "labels" => labels,
    "annotations" => annotations,
    "managedFields" => managed_fields,
});

impl ObjectMeta {
    /// Metadata with only a name.
    pub fn named(name: impl Into<Box<str>>) -> Self {
        ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        }
    }

    /// The value of label `key`, if set.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key)
    }

    /// The managers named in `metadata.managedFields`, most recent write first (the ones
    /// kept by [`strip_managed_fields`](Self::strip_managed_fields) once they are dropped).
    pub fn field_managers(&self) -> Vec<String> {
        self.field_ownership()
            .map(|o| o.managers().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// Who owns which field: the summary kept by
    /// [`strip_managed_fields`](Self::strip_managed_fields), else read from
    /// `managedFields`; `None` when the object has neither.
    pub fn field_ownership(&self) -> Option<Arc<FieldOwnership>> {
        match (&self.field_owners, &self.managed_fields) {
            (Some(o), _) => Some(o.clone()),
            (None, Some(raw)) => Some(Arc::new(FieldOwnership::parse_text(raw.as_str()))),
            (None, None) => None,
        }
    }

    /// Replaces `managedFields` by who owns which field (for
    /// [`field_ownership`](Self::field_ownership) and
    /// [`field_managers`](Self::field_managers)), as controller-runtime's
    /// `TransformStripManagedFields` trims its caches: the encoded field sets and times were
    /// most of a cached APIService. A write of the stripped object omits `managedFields`,
    /// and the API server then keeps its own (apimachinery's `decodeLiveOrNew`; only a
    /// present `[]` or `[{}]` would reset them).
    pub fn strip_managed_fields(&mut self) {
        if let Some(raw) = self.managed_fields.take() {
            self.field_owners = Some(shared_text(raw.as_str()));
        }
    }

    /// Whether `new` is this metadata with nothing changed but what a write to the `status`
    /// subresource changes: the resourceVersion, and subresource entries of the field
    /// ownership. Every field is named, so a new one must be placed on a side.
    pub fn same_but_status_write(&self, new: &ObjectMeta) -> bool {
        let ObjectMeta {
            name,
            namespace,
            uid,
            resource_version: _,
            generation,
            creation_timestamp,
            deletion_timestamp,
            labels,
            annotations,
            managed_fields,
            field_owners,
            extra,
        } = self;
        let owners = match (field_owners, &new.field_owners) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a.same_on_main_resource(b),
            _ => false,
        };
        *name == new.name
            && *namespace == new.namespace
            && *uid == new.uid
            && *generation == new.generation
            && *creation_timestamp == new.creation_timestamp
            && *deletion_timestamp == new.deletion_timestamp
            && *labels == new.labels
            && *annotations == new.annotations
            && *managed_fields == new.managed_fields
            && owners
            && *extra == new.extra
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
            .get_or_insert_with(StringMap::new)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with_managers() -> ObjectMeta {
        serde_json::from_value(json!({
            "name": "v1.a",
            "managedFields": [
                {"manager": "autoregister", "operation": "Update", "time": "2026-01-01T00:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:group": {}}}},
                {"manager": "helm", "operation": "Update", "time": "2026-01-02T00:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:versionPriority": {}}}},
                {"manager": "autoregister", "operation": "Update", "subresource": "status",
                 "time": "2025-12-31T00:00:00Z"}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn stripping_managed_fields_keeps_the_managers_most_recent_first() {
        let mut meta = with_managers();
        let before = meta.field_managers();
        assert_eq!(before, ["helm", "autoregister"]);
        meta.strip_managed_fields();
        assert_eq!(meta.managed_fields, None);
        assert_eq!(meta.field_managers(), before);
        // Stripping twice keeps what the first one kept.
        meta.strip_managed_fields();
        assert_eq!(meta.field_managers(), before);
    }

    #[test]
    fn a_stripped_object_is_written_without_managed_fields() {
        let mut meta = with_managers();
        meta.strip_managed_fields();
        let out = serde_json::to_value(&meta).unwrap();
        // Absent, not `[]`: an API server keeps its own managedFields for an absent list
        // and resets them for an empty one.
        assert_eq!(out, json!({"name": "v1.a"}));
    }
}
