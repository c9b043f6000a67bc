//! `Extra`: an object's unknown fields, kept to be written back unchanged.
//!
//! Nearly every object has none, yet a `serde_json::Map` costs 24 bytes inline even when
//! empty, and an APIService holds five of them (top level, metadata, spec, service,
//! status) in each cached and each desired copy. An empty `Extra` is one null pointer.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Unknown fields by name; reads and writes as a `Map<String, Value>` (through `Deref`).
#[derive(Clone, Default)]
pub struct Extra(Option<Box<Map<String, Value>>>);

impl Extra {
    /// No fields.
    pub fn new() -> Self {
        Extra(None)
    }
}

fn empty() -> &'static Map<String, Value> {
    static EMPTY: OnceLock<Map<String, Value>> = OnceLock::new();
    EMPTY.get_or_init(Map::new)
}

impl Deref for Extra {
    type Target = Map<String, Value>;
    fn deref(&self) -> &Map<String, Value> {
        match &self.0 {
            Some(map) => map,
            None => empty(),
        }
    }
}

impl DerefMut for Extra {
    /// Allocates the map on first write.
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        self.0.get_or_insert_with(Box::default)
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Self {
        Extra((!map.is_empty()).then(|| Box::new(map)))
    }
}

impl PartialEq for Extra {
    /// Equal fields, however stored (never written and emptied again compare equal).
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl fmt::Debug for Extra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(map) => map.serialize(s),
            None => s.serialize_map(Some(0))?.end(),
        }
    }
}

impl<'de> Deserialize<'de> for Extra {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Map::deserialize(d).map(Extra::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_and_writes_as_a_map_and_costs_a_pointer_when_empty() {
        assert_eq!(std::mem::size_of::<Extra>(), std::mem::size_of::<usize>());
        let mut e = Extra::new();
        assert!(e.is_empty());
        assert_eq!(serde_json::to_value(&e).unwrap(), json!({}));
        e.insert("future".into(), json!([1]));
        assert_eq!(e.get("future"), Some(&json!([1])));
        assert_eq!(serde_json::to_value(&e).unwrap(), json!({"future": [1]}));
        e.remove("future");
        assert_eq!(e, Extra::new(), "emptied equals never written");
        let back: Extra = serde_json::from_value(json!({"a": 1})).unwrap();
        assert_eq!(back.len(), 1);
    }
}
