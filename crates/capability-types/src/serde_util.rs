//! Serde helpers shared by the declaration types and `capability-policy` (which calls the macro
//! as `capability_types::__map_only!`; it is not part of the plugin contract).

/// Derived struct deserialisers also accept a sequence (`[]` becomes `{}`, `[["*"]]` fills
/// fields by position). Declarations and policies are reviewed as maps, so anything else must
/// be refused. For a type that derives with `#[serde(remote = "Self")]`, this implements
/// `Serialize` and a map-only `Deserialize` that forward to the derived code.
#[doc(hidden)]
#[macro_export]
macro_rules! __map_only {
    ($($ty:ident),* $(,)?) => {$(
        impl $crate::__serde::Serialize for $ty {
            fn serialize<S: $crate::__serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                $ty::serialize(self, s)
            }
        }

        impl<'de> $crate::__serde::Deserialize<'de> for $ty {
            fn deserialize<D: $crate::__serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct MapVisitor;
                impl<'de> $crate::__serde::de::Visitor<'de> for MapVisitor {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a map")
                    }
                    fn visit_map<A: $crate::__serde::de::MapAccess<'de>>(self, map: A) -> Result<$ty, A::Error> {
                        $ty::deserialize($crate::__serde::de::value::MapAccessDeserializer::new(map))
                    }
                }
                d.deserialize_map(MapVisitor)
            }
        }
    )*};
}
