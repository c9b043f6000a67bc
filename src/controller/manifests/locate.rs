//! Where a field is in a document's text: line and column of its key or its value.
//!
//! The parsed value has no positions (keeping them would slow every document down for the
//! rare bad one). So a document found wrong is read once more, walking only down the
//! problem's path and skipping everything else; on arriving, the walk stops with an error,
//! which the parser stamps with the position of the node it was reading.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::schema::Seg;

/// The stop signal; any other error is the parser's own.
const HERE: &str = "\u{0}autoregister-here";

/// 1-based line and column of the field at `path` (its key when `at_key`) in a YAML
/// document's text; of its nearest present parent when it is absent (a defaulted field).
pub(super) fn in_yaml(text: &str, path: &[Seg], at_key: bool) -> Option<(usize, usize)> {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    match (Walk { path, at_key }).deserialize(de) {
        Err(e) if e.to_string().contains(HERE) => e
            .location()
            .map(|l| (crate::yaml::newline_line(text, l.line()), l.column())),
        _ => None,
    }
}

/// As [`in_yaml`], for a JSON text.
pub(super) fn in_json(text: &str, path: &[Seg], at_key: bool) -> Option<(usize, usize)> {
    let mut de = serde_json::Deserializer::from_slice(text.as_bytes());
    match (Walk { path, at_key }).deserialize(&mut de) {
        Err(e) if e.to_string().contains(HERE) => Some((e.line(), e.column())),
        _ => None,
    }
}

/// Walks down `path`; arriving, it fails with [`HERE`].
#[derive(Clone, Copy)]
struct Walk<'p> {
    path: &'p [Seg],
    at_key: bool,
}

fn here<E: de::Error>() -> E {
    E::custom(HERE)
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// Reads a key: `Ok(true)` when it is the one looked for, failing with [`HERE`] on it when
/// the key itself is the target.
struct Key<'p> {
    want: &'p str,
    stop: bool,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<bool, E> {
        match (s == self.want, self.stop) {
            (true, true) => Err(here()),
            (matched, _) => Ok(matched),
        }
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Seg::Key(want), rest)) = self.path.split_first() else {
            return Err(here());
        };
        let stop = rest.is_empty() && self.at_key;
        while let Some(matched) = map.next_key_seed(Key { want, stop })? {
            if matched {
                map.next_value_seed(Walk {
                    path: rest,
                    at_key: self.at_key,
                })?;
                // Arrived without stopping (cannot happen): point at this mapping.
                return Err(here());
            }
            map.next_value::<IgnoredAny>()?;
        }
        // The field is absent: the mapping that would hold it.
        Err(here())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Seg::Index(want), rest)) = self.path.split_first() else {
            return Err(here());
        };
        for _ in 0..*want {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Err(here());
            }
        }
        seq.next_element_seed(Walk {
            path: rest,
            at_key: self.at_key,
        })?;
        Err(here())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(here())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(here())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(here())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(here())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(here())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(here())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Err(here())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::manifests::schema::FieldPath;

    const DOC: &str = "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.a\nspec:\n  group: a\n  servce:\n    name: x\n  groupPriorityMinimum: \"high\"\n  list: [1, {deep: 2}]\n";

    fn path(p: &str) -> Vec<Seg> {
        FieldPath::parse(p).0
    }

    #[test]
    fn keys_and_values_of_yaml() {
        assert_eq!(in_yaml(DOC, &path("spec.servce"), true), Some((7, 3)));
        assert_eq!(
            in_yaml(DOC, &path("spec.groupPriorityMinimum"), false),
            Some((9, 25))
        );
        let mut deep = path("spec.list");
        deep.extend([Seg::Index(1), Seg::Key("deep".into())]);
        assert_eq!(in_yaml(DOC, &deep, true), Some((10, 14)));
        // Absent: the mapping that would hold it.
        assert_eq!(
            in_yaml(DOC, &path("spec.service.port"), false),
            Some((6, 3))
        );
    }

    #[test]
    fn keys_of_json() {
        let json = "{\n  \"spec\": {\n    \"servce\": 1\n  }\n}";
        assert_eq!(
            in_json(json, &path("spec.servce"), true).map(|l| l.0),
            Some(3)
        );
    }
}
