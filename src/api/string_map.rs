//! `StringMap`: labels and annotations as a sorted vector of pairs.
//!
//! A `BTreeMap` allocates a node of eleven slots (~540 bytes) for an object's one or two
//! labels; every cached object has labels, so that node was a third of its cost. Objects
//! carry a handful of labels, so a sorted vector is as fast to search and a tenth the size.
//! It is a boxed slice (no spare capacity, 16 bytes inline): these maps are read far more
//! often than changed, and each change rebuilds them exactly.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A string-to-string map kept sorted by key; on the wire a JSON object.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StringMap(Box<[(String, String)]>);

type Pairs<'a> = std::iter::Map<
    std::slice::Iter<'a, (String, String)>,
    fn(&'a (String, String)) -> (&'a String, &'a String),
>;

impl StringMap {
    /// An empty map.
    pub fn new() -> Self {
        StringMap(Box::default())
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&String> {
        self.find(key).ok().map(|i| &self.0[i].1)
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; answers the value it replaced.
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                let mut pairs = std::mem::take(&mut self.0).into_vec();
                pairs.insert(i, (key, value));
                self.0 = pairs.into_boxed_slice();
                None
            }
        }
    }

    /// Removes `key`; answers its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.find(key).ok()?;
        let mut pairs = std::mem::take(&mut self.0).into_vec();
        let (_, value) = pairs.remove(i);
        self.0 = pairs.into_boxed_slice();
        Some(value)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries in key order.
    pub fn iter(&self) -> Pairs<'_> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl<'a> IntoIterator for &'a StringMap {
    type Item = (&'a String, &'a String);
    type IntoIter = Pairs<'a>;
    fn into_iter(self) -> Pairs<'a> {
        self.iter()
    }
}

impl FromIterator<(String, String)> for StringMap {
    /// A later entry for the same key replaces an earlier one, as in a `BTreeMap`.
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        let mut pairs: Vec<(String, String)> = iter.into_iter().collect();
        // Stable: equal keys keep their order, so the last is the one to keep.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, String)> = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            match out.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => out.push((k, v)),
            }
        }
        StringMap(out.into_boxed_slice())
    }
}

impl<const N: usize> From<[(String, String); N]> for StringMap {
    fn from(pairs: [(String, String); N]) -> Self {
        pairs.into_iter().collect()
    }
}

impl From<std::collections::BTreeMap<String, String>> for StringMap {
    fn from(map: std::collections::BTreeMap<String, String>) -> Self {
        map.into_iter().collect()
    }
}

impl fmt::Debug for StringMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for StringMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for StringMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StringMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings to strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StringMap, A::Error> {
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some(pair) = map.next_entry::<String, String>()? {
                    pairs.push(pair);
                }
                Ok(pairs.into_iter().collect())
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_a_sorted_map_and_round_trips_as_an_object() {
        let text = r#"{"b":"2","a":"1","c":"3","a":"4"}"#;
        let mut m: StringMap = serde_json::from_str(text).unwrap();
        assert_eq!(m.len(), 3, "the repeated key is one entry");
        assert_eq!(m.get("a").map(String::as_str), Some("4"), "last wins");
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"a":"4","b":"2","c":"3"}"#
        );
        assert_eq!(m.insert("0".into(), "z".into()), None);
        assert_eq!(m.insert("b".into(), "x".into()), Some("2".into()));
        assert_eq!(m.remove("c"), Some("3".into()));
        assert!(!m.contains_key("c"));
        let keys: Vec<&String> = m.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["0", "a", "b"]);
        assert!(serde_json::from_str::<StringMap>(r#"{"a":1}"#).is_err());
    }
}
