//! What the direct decoders of pods and slices share: reading only chosen
//! keys of a label or annotation map, skipping the rest unallocated.

use std::borrow::Cow;

use serde::{Deserializer, de::IgnoredAny};

/// The values of the label or annotation keys read, in the order of the
/// key list; every other key is skipped without being kept.
#[derive(Default)]
pub struct Kept(Vec<Option<String>>);

impl Kept {
    pub fn get(&self, i: usize) -> Option<&str> {
        self.0.get(i).and_then(|v| v.as_deref())
    }
}

/// The values of `keys` in a map of strings (`null` or absent: none).
pub fn read_keys<'de, D: Deserializer<'de>>(
    d: D,
    keys: &'static [&'static str],
) -> Result<Kept, D::Error> {
    struct Visitor(&'static [&'static str]);
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Kept;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map of strings")
        }
        fn visit_unit<E>(self) -> Result<Kept, E> {
            Ok(Kept::default())
        }
        fn visit_none<E>(self) -> Result<Kept, E> {
            Ok(Kept::default())
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Kept, D::Error> {
            d.deserialize_map(self)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Kept, A::Error> {
            let mut kept = vec![None; self.0.len()];
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                match self.0.iter().position(|k| *k == key) {
                    Some(i) => kept[i] = map.next_value::<Option<String>>()?,
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(Kept(kept))
        }
    }
    d.deserialize_option(Visitor(keys))
}
