//! A JSON value decoded straight from a YAML document, refusing duplicate keys.
//!
//! Going through serde_yaml_ng's own `Value` (which refuses duplicates) and then converting
//! it built every node twice; at 10,000 documents that was a third of start-up.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A document as a JSON value; a key repeated in one mapping is an error (the last one
/// silently winning would hide a typo).
pub(super) struct JsonValue(pub Value);

impl<'de> Deserialize<'de> for JsonValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor).map(JsonValue)
    }
}

struct ValueVisitor;

fn float(v: f64) -> Value {
    // As serde_json converts them: a non-finite number (`.nan`, `.inf`) has no JSON form.
    Number::from_f64(v).map_or(Value::Null, Value::Number)
}

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        JsonValue::deserialize(d).map(|v| v.0)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(JsonValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(MapKey(key)) = map.next_key()? {
            if out.contains_key(&key) {
                // serde_yaml_ng's own wording, which `crate::yaml` finds the line of.
                return Err(de::Error::custom(format_args!(
                    "duplicate entry with key {key:?}"
                )));
            }
            let JsonValue(value) = map.next_value()?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<Value, A::Error> {
        Err(de::Error::custom(
            "YAML tags (`!tag value`) are not supported in manifests",
        ))
    }
}

/// A mapping key as JSON spells it: a string, or a number or boolean written as text.
struct MapKey(String);

impl<'de> Deserialize<'de> for MapKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = String;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number or boolean as a mapping key")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
                Ok(v)
            }
        }
        d.deserialize_any(V).map(MapKey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Result<Value, String> {
        crate::yaml::from_str::<JsonValue>(text)
            .map(|v| v.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn yaml_becomes_the_json_it_means() {
        let got = parse(
            "a: 1\nb: -2\nc: 2.5\nd: true\ne: ~\nf: [x, 'y']\ng: {h: .nan}\n3: k\nl: \"007\"\n",
        )
        .unwrap();
        let want = json!({"a": 1, "b": -2, "c": 2.5, "d": true, "e": null,
            "f": ["x", "y"], "g": {"h": null}, "3": "k", "l": "007"});
        assert_eq!(got, want);
    }

    #[test]
    fn repeated_keys_and_tags_are_refused() {
        let e = parse("a: 1\nb:\n  c: 1\n  c: 2\n").unwrap_err();
        assert!(e.contains("duplicate entry with key \"c\""), "{e}");
        let e = parse("a: !custom 1\n").unwrap_err();
        assert!(e.contains("tags"), "{e}");
    }
}
