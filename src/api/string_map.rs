//! `StringMap`: labels and annotations as a sorted vector of pairs.
//!
//! A `BTreeMap` allocates a node of eleven slots (~540 bytes) for an object's one or two
//! labels; every cached object has labels, so that node was a third of its cost. Objects
//! carry a handful of labels, so a sorted vector is as fast to search and a tenth the size.
//! It is a boxed slice (no spare capacity, 16 bytes inline): these maps are read far more
//! often than changed, and each change rebuilds them exactly.
//!
//! The ownership labels' keys and values are on nearly every object and always the same
//! few strings: they are kept as `&'static str`, not one allocation each per object.

use std::borrow::Cow;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{AUTO_MANAGED_ALWAYS, AUTO_MANAGED_LABEL, AUTO_MANAGED_ON_START, DEFAULT_LABEL_KEY};

/// A key or value: one of [`WELL_KNOWN`] without an allocation, else owned.
type Text = Cow<'static, str>;

/// Strings nearly every cached and desired APIService carries in its labels.
const WELL_KNOWN: [&str; 4] = [
    DEFAULT_LABEL_KEY,
    AUTO_MANAGED_LABEL,
    AUTO_MANAGED_ALWAYS,
    AUTO_MANAGED_ON_START,
];

fn well_known(s: &str) -> Option<Text> {
    WELL_KNOWN
        .iter()
        .find(|w| **w == s)
        .map(|w| Cow::Borrowed(*w))
}

fn text(s: String) -> Text {
    well_known(&s).unwrap_or(Cow::Owned(s))
}

/// A string-to-string map kept sorted by key; on the wire a JSON object.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StringMap(Box<[(Text, Text)]>);

type Pairs<'a> =
    std::iter::Map<std::slice::Iter<'a, (Text, Text)>, fn(&'a (Text, Text)) -> (&'a str, &'a str)>;

impl StringMap {
    /// An empty map.
    pub fn new() -> Self {
        StringMap(Box::default())
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_ref().cmp(key))
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.find(key).ok().map(|i| self.0[i].1.as_ref())
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; answers the value it replaced.
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, text(value)).into_owned()),
            Err(i) => {
                let mut pairs = std::mem::take(&mut self.0).into_vec();
                pairs.insert(i, (text(key), text(value)));
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
        Some(value.into_owned())
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
        self.0.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))
    }
}

impl<'a> IntoIterator for &'a StringMap {
    type Item = (&'a str, &'a str);
    type IntoIter = Pairs<'a>;
    fn into_iter(self) -> Pairs<'a> {
        self.iter()
    }
}

impl FromIterator<(String, String)> for StringMap {
    /// A later entry for the same key replaces an earlier one, as in a `BTreeMap`.
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        iter.into_iter().map(|(k, v)| (text(k), text(v))).collect()
    }
}

impl FromIterator<(Text, Text)> for StringMap {
    fn from_iter<I: IntoIterator<Item = (Text, Text)>>(iter: I) -> Self {
        let mut pairs: Vec<(Text, Text)> = iter.into_iter().collect();
        // Stable: equal keys keep their order, so the last is the one to keep.
        crate::sort::sort_by(&mut pairs, |a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Text, Text)> = Vec::with_capacity(pairs.len());
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
            map.serialize_entry(k.as_ref(), v.as_ref())?;
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
                // Borrowed from the input where it can be: a well-known string is then
                // never allocated at all.
                while let Some((Str(k), Str(v))) = map.next_entry::<Str, Str>()? {
                    pairs.push((k, v));
                }
                Ok(pairs.into_iter().collect())
            }
        }
        d.deserialize_map(V)
    }
}

/// A key or value as decoded: a well-known string without an allocation, another copied
/// once from the input (never through a `String` first).
struct Str(Text);

impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Str, E> {
                Ok(Str(
                    well_known(s).unwrap_or_else(|| Cow::Owned(s.to_string()))
                ))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Str, E> {
                Ok(Str(text(s)))
            }
        }
        d.deserialize_str(V)
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
        assert_eq!(m.get("a"), Some("4"), "last wins");
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"a":"4","b":"2","c":"3"}"#
        );
        assert_eq!(m.insert("0".into(), "z".into()), None);
        assert_eq!(m.insert("b".into(), "x".into()), Some("2".into()));
        assert_eq!(m.remove("c"), Some("3".into()));
        assert!(!m.contains_key("c"));
        let keys: Vec<&str> = m.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["0", "a", "b"]);
        assert!(serde_json::from_str::<StringMap>(r#"{"a":1}"#).is_err());
    }

    #[test]
    fn ownership_labels_are_kept_without_an_allocation() {
        let text = format!(r#"{{"{DEFAULT_LABEL_KEY}":"true","team":"{AUTO_MANAGED_ON_START}"}}"#);
        let m: StringMap = serde_json::from_str(&text).unwrap();
        let borrowed = |t: &Text| matches!(t, Cow::Borrowed(_));
        assert!(borrowed(&m.0[0].0) && borrowed(&m.0[0].1), "{:?}", m.0);
        assert!(!borrowed(&m.0[1].0) && borrowed(&m.0[1].1), "{:?}", m.0);
        assert_eq!(m.get(DEFAULT_LABEL_KEY), Some(AUTO_MANAGED_ALWAYS));
        assert_eq!(serde_json::to_string(&m).unwrap(), text);
        // Built from owned strings too.
        let mut n = StringMap::new();
        n.insert(AUTO_MANAGED_LABEL.to_string(), "true".to_string());
        assert!(borrowed(&n.0[0].0) && borrowed(&n.0[0].1));
        assert_eq!(n.remove(AUTO_MANAGED_LABEL).as_deref(), Some("true"));
        let err = serde_json::from_str::<StringMap>(r#"{"a":1}"#).unwrap_err();
        assert!(err.to_string().contains("expected a string"), "{err}");
    }
}
