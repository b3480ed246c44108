//! Serde helpers shared by the declaration and policy types.

/// Derived struct deserialisers also accept a sequence (`[]` becomes `{}`, `[["*"]]` fills
/// fields by position). Declarations and policies are reviewed as maps, so anything else must
/// be refused. For a type that derives with `#[serde(remote = "Self")]`, this implements
/// `Serialize` and a map-only `Deserialize` that forward to the derived code.
macro_rules! map_only {
    ($($ty:ident),* $(,)?) => {$(
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                $ty::serialize(self, s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct MapVisitor;
                impl<'de> serde::de::Visitor<'de> for MapVisitor {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a map")
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<$ty, A::Error> {
                        $ty::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    }
                }
                d.deserialize_map(MapVisitor)
            }
        }
    )*};
}

pub(crate) use map_only;
