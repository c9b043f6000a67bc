//! Watch events (`metav1.WatchEvent`) as they arrive on a watch stream.

use serde::{Deserialize, Serialize};

use super::Status;

/// One event of a watch stream, decoded for kind `K`.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent<K> {
    /// The object was created (or is new to this watch).
    Added(K),
    /// The object changed.
    Modified(K),
    /// The object was deleted; this is its last state.
    Deleted(K),
    /// A progress marker: only `metadata.resourceVersion` is meaningful.
    Bookmark(String),
    /// The server ended the watch with an error, e.g. 410 Expired.
    Error(Box<Status>),
}

/// The wire form: `{"type": "...", "object": {...}}`.
#[derive(Debug, Serialize, Deserialize)]
pub struct RawWatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The object, a bookmark stub or a Status.
    pub object: serde_json::Value,
}

/// Bookmark objects carry only metadata.resourceVersion.
#[derive(Deserialize)]
struct BookmarkObject {
    metadata: BookmarkMeta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BookmarkMeta {
    #[serde(default)]
    resource_version: String,
}

/// The wire form borrowed from the line: the object is decoded once, straight into its
/// type, instead of into a `Value` tree first (one allocation per field, then a copy).
#[derive(Deserialize)]
struct BorrowedWatchEvent<'a> {
    #[serde(rename = "type", borrow)]
    type_: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    object: &'a serde_json::value::RawValue,
}

impl<K: serde::de::DeserializeOwned> WatchEvent<K> {
    /// Decodes one newline-delimited JSON event.
    pub fn from_json(line: &[u8]) -> Result<Self, serde_json::Error> {
        use serde::de::Error as _;
        let raw: BorrowedWatchEvent<'_> = serde_json::from_slice(line)?;
        let object = raw.object.get();
        Ok(match raw.type_.as_ref() {
            "ADDED" => WatchEvent::Added(serde_json::from_str(object)?),
            "MODIFIED" => WatchEvent::Modified(serde_json::from_str(object)?),
            "DELETED" => WatchEvent::Deleted(serde_json::from_str(object)?),
            "BOOKMARK" => {
                let b: BookmarkObject = serde_json::from_str(object)?;
                WatchEvent::Bookmark(b.metadata.resource_version)
            }
            "ERROR" => WatchEvent::Error(Box::new(serde_json::from_str(object)?)),
            other => {
                return Err(serde_json::Error::custom(format!(
                    "unknown watch event type {other:?}"
                )))
            }
        })
    }

    /// Converts the wire form into a typed event.
    pub fn from_raw(raw: RawWatchEvent) -> Result<Self, serde_json::Error> {
        use serde::de::Error as _;
        Ok(match raw.type_.as_str() {
            "ADDED" => WatchEvent::Added(serde_json::from_value(raw.object)?),
            "MODIFIED" => WatchEvent::Modified(serde_json::from_value(raw.object)?),
            "DELETED" => WatchEvent::Deleted(serde_json::from_value(raw.object)?),
            "BOOKMARK" => {
                let b: BookmarkObject = serde_json::from_value(raw.object)?;
                WatchEvent::Bookmark(b.metadata.resource_version)
            }
            "ERROR" => WatchEvent::Error(Box::new(serde_json::from_value(raw.object)?)),
            other => {
                return Err(serde_json::Error::custom(format!(
                    "unknown watch event type {other:?}"
                )))
            }
        })
    }
}
