//! The UID of a created object, read from the server's answer without reading the rest.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

/// Said by the reader to stop once the UID is in hand (never seen outside this file).
const FOUND: &str = "uid found";

/// `metadata.uid` of the JSON object `body`, or none when it has none. The read stops at
/// the UID: servers write `metadata` first and the UID among its first fields, so the
/// kilobyte after it (`managedFields`, spec, status) is not even scanned, as skipping it
/// was most of the cost of reading a create's answer.
pub(super) fn created_uid(body: &[u8]) -> Result<Option<String>, serde_json::Error> {
    let mut uid = None;
    let reader = Reader {
        uid: &mut uid,
        in_metadata: false,
    };
    let read = reader.deserialize(&mut serde_json::Deserializer::from_slice(body));
    match (uid, read) {
        (Some(uid), _) => Ok(Some(uid)),
        (None, Ok(())) => Ok(None),
        (None, Err(e)) => Err(e),
    }
}

/// A key of the object, or of its metadata.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Key {
    Metadata,
    Uid,
    #[serde(other)]
    Other,
}

/// The object (`in_metadata` false) or its metadata, writing the UID it finds there.
struct Reader<'a> {
    uid: &'a mut Option<String>,
    in_metadata: bool,
}

impl<'de> DeserializeSeed<'de> for Reader<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Reader<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Metadata if !self.in_metadata => map.next_value_seed(Reader {
                    uid: &mut *self.uid,
                    in_metadata: true,
                })?,
                Key::Uid if self.in_metadata => {
                    *self.uid = map.next_value()?;
                    if self.uid.is_some() {
                        return Err(de::Error::custom(FOUND));
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uid_is_read_wherever_it_is_and_the_rest_is_not() {
        let uid = |body: &str| created_uid(body.as_bytes());
        assert_eq!(
            uid(r#"{"kind":"APIService","metadata":{"name":"a","uid":"u-1","managedFields":[]},"spec":{}}"#)
                .unwrap(),
            Some("u-1".into())
        );
        // After the UID nothing is read: a broken tail is not an error.
        assert_eq!(
            uid(r#"{"metadata":{"uid":"u-2","labels":{"uid":"x"}},"spec":[[[["#).unwrap(),
            Some("u-2".into())
        );
        // A `uid` outside `metadata` (a label, the top level) is not the object's.
        assert_eq!(
            uid(
                r#"{"uid":"no","metadata":{"labels":{"uid":"no"},"name":"a"},"spec":{"uid":"no"}}"#
            )
            .unwrap(),
            None
        );
        assert_eq!(uid(r#"{"metadata":{"uid":null}}"#).unwrap(), None);
        assert_eq!(uid("{}").unwrap(), None);
        for broken in [
            "",
            "[]",
            r#"{"metadata":{"uid":7}}"#,
            r#"{"metadata":{"name":"a""#,
        ] {
            assert!(uid(broken).is_err(), "{broken}");
        }
    }
}
