//! A JSON document that keeps its keys in the order they were written: what `mcp config
//! --write` reads from a client's configuration file and writes back, so that adding a server
//! leaves the rest of a user's file where the user put it (docs/mcp.md, "Client
//! configuration").
//!
//! `serde_json::Value` sorts an object's keys (the workspace builds serde_json without
//! `preserve_order`, which would change every map of every crate), so the file is read into
//! this instead: objects as lists of entries, everything else as `serde_json` reads it.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

/// A JSON value whose objects keep their entries in the order they were read or added.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ordered {
    /// An object: its entries in order, each key once.
    Object(Vec<(String, Ordered)>),
    /// An array.
    Array(Vec<Ordered>),
    /// A string, a number, a boolean or null, as `serde_json` reads it.
    Scalar(Value),
}

impl Ordered {
    /// An empty object.
    pub(crate) fn object() -> Self {
        Ordered::Object(Vec::new())
    }

    /// The entries of an object; `None` for anything else.
    pub(crate) fn as_object_mut(&mut self) -> Option<&mut Vec<(String, Ordered)>> {
        match self {
            Ordered::Object(entries) => Some(entries),
            _ => None,
        }
    }

    /// The value of `key` in an object's `entries`, added last as `make()` when missing.
    pub(crate) fn entry<'a>(
        entries: &'a mut Vec<(String, Ordered)>,
        key: &str,
        make: impl FnOnce() -> Ordered,
    ) -> &'a mut Ordered {
        let at = match entries.iter().position(|(k, _)| k == key) {
            Some(at) => at,
            None => {
                entries.push((key.to_owned(), make()));
                entries.len() - 1
            }
        };
        &mut entries[at].1
    }

    /// Sets `key` to `value` in an object's `entries`: where it is, or last when it is new.
    pub(crate) fn set(entries: &mut Vec<(String, Ordered)>, key: &str, value: Ordered) {
        *Self::entry(entries, key, || Ordered::Scalar(Value::Null)) = value;
    }
}

impl From<&str> for Ordered {
    fn from(s: &str) -> Self {
        Ordered::Scalar(Value::from(s))
    }
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Ordered::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
            Ordered::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Ordered::Scalar(value) => value.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(OrderedVisitor)
    }
}

/// Reads any JSON value, objects in order.
struct OrderedVisitor;

impl<'de> Visitor<'de> for OrderedVisitor {
    type Value = Ordered;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::from(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::from(v)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::from(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::from(v)))
    }

    fn visit_string<E>(self, v: String) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::String(v)))
    }

    fn visit_unit<E>(self) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::Null))
    }

    fn visit_none<E>(self) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ordered, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Ordered::Array(items))
    }

    /// A key twice is refused: a parser keeps one of the two, so writing the object back would
    /// silently drop the other.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
        let mut entries: Vec<(String, Ordered)> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {}",
                    key.escape_debug()
                )));
            }
            let value = map.next_value()?;
            entries.push((key, value));
        }
        Ok(Ordered::Object(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Ordered {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn a_document_is_written_back_as_it_was_read() {
        for text in [
            r#"{"z":1,"a":{"y":[true,null,{"q":"s","b":-3}],"b":1.5},"m":18446744073709551615}"#,
            r#"[{"b":1,"a":2},"x",[]]"#,
            r#""just a string""#,
            "{}",
        ] {
            assert_eq!(serde_json::to_string(&read(text)).unwrap(), text);
        }
    }

    #[test]
    fn entries_are_updated_in_place_and_new_ones_go_last() {
        let mut doc = read(r#"{"b":1,"a":{"y":1,"x":2}}"#);
        let entries = doc.as_object_mut().unwrap();
        Ordered::set(entries, "b", Ordered::from("two"));
        let inner = Ordered::entry(entries, "a", Ordered::object);
        Ordered::set(inner.as_object_mut().unwrap(), "w", Ordered::from("new"));
        Ordered::entry(entries, "c", Ordered::object);
        assert_eq!(
            serde_json::to_string(&doc).unwrap(),
            r#"{"b":"two","a":{"y":1,"x":2,"w":"new"},"c":{}}"#
        );
        assert!(Ordered::from("s").as_object_mut().is_none());
    }

    #[test]
    fn a_key_twice_at_any_depth_is_refused() {
        for text in [r#"{"a":1,"a":2}"#, r#"{"s":{"x":[{"k":1,"k":1}]}}"#] {
            let err = serde_json::from_str::<Ordered>(text).unwrap_err();
            assert!(err.to_string().contains("duplicate key"), "{text}: {err}");
        }
    }

    #[test]
    fn hostile_input_gets_an_error() {
        let deep = "[".repeat(100_000);
        for text in ["{", r#"{"a" 1}"#, "[1,]", &deep, "\"\\ud800\"", "{} {}"] {
            assert!(serde_json::from_str::<Ordered>(text).is_err(), "{text:.40}");
        }
    }
}
