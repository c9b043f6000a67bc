//! `Deserialize` for objects that keep their unknown fields, without serde's `flatten`.
//!
//! `#[serde(flatten)]` makes serde buffer the whole object as a generic tree (every key
//! and string copied), then decode the fields from that tree: decoding a watch event cost
//! twice what it needs, and a field kept as raw JSON text could not be read straight from
//! the input. The macro here decodes known fields in place and moves every other field
//! into the struct's `extra` map, in the order they arrive.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// A map key, borrowed from the input when it can be (no escapes), else owned.
pub(crate) enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    /// The key's text.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }

    /// The key as an owned string (for the `extra` map).
    pub(crate) fn into_string(self) -> String {
        match self {
            Key::Borrowed(s) => s.to_string(),
            Key::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(s))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(s.to_string()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(s))
            }
        }
        d.deserialize_str(V)
    }
}

/// `impl Deserialize for $ty` (which must be `Default` and have an
/// `extra: serde_json::Map<String, Value>` field): each listed JSON name decodes into its
/// field (through `$wrap` and `Into` when given), any other key goes to `extra`. A field
/// missing from the input keeps its default, as `#[serde(default)]`.
macro_rules! deserialize_keeping_extra {
    ($ty:ident { $($json:literal => $field:ident $(as $wrap:ty)?),* $(,)? }) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("a ", stringify!($ty), " object"))
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> Result<$ty, A::Error> {
                        let mut out = <$ty>::default();
                        while let Some(key) = map.next_key::<$crate::api::extra::Key<'de>>()? {
                            match key.as_str() {
                                $($json => {
                                    out.$field = $crate::api::extra::deserialize_keeping_extra!(
                                        @value map $(, $wrap)?
                                    );
                                })*
                                _ => {
                                    let value = map.next_value()?;
                                    out.extra.insert(key.into_string(), value);
                                }
                            }
                        }
                        Ok(out)
                    }
                }
                d.deserialize_map(V)
            }
        }
    };
    (@value $map:ident) => {
        $map.next_value()?
    };
    (@value $map:ident, $wrap:ty) => {
        $map.next_value::<$wrap>()?.into()
    };
}

pub(crate) use deserialize_keeping_extra;
