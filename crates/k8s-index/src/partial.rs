//! Typed partial objects: a watched kind decoded straight from the API's
//! JSON into only the fields a controller reads (the idea of
//! `kube::core::PartialObjectMeta`, applied to spec and status too), so
//! that no full `k8s-openapi` object is built on the watch path.
//!
//! - [`partial_object!`](crate::partial_object) makes a struct with a
//!   `metadata: ObjectMeta` field a watchable [`kube::Resource`];
//! - [`read_keys`] reads chosen keys of a label or annotation map, skipping
//!   the others without allocating them.

use std::borrow::Cow;

use serde::{Deserializer, de::IgnoredAny};

/// The values of the keys read from a map of strings, in the order of the
/// key list; every other key was skipped without being kept.
#[derive(Clone, Debug, Default)]
pub struct Kept(Vec<Option<String>>);

impl Kept {
    /// The value of the `i`th key of the list, if the map had it.
    pub fn get(&self, i: usize) -> Option<&str> {
        self.0.get(i).and_then(|v| v.as_deref())
    }
}

/// The values of `keys` in a map of strings (`null` or absent: none), for
/// `#[serde(deserialize_with = …)]`.
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

/// Makes `$ty` (a struct with a `metadata: ObjectMeta` field) a namespaced
/// [`kube::Resource`] of kind `$kind` in `$group/$version` (plural
/// `$plural`), always valid for the watch ([`crate::watch::Checked`]).
#[macro_export]
macro_rules! partial_object {
    ($ty:ty, kind = $kind:literal, group = $group:literal, version = $version:literal, plural = $plural:literal) => {
        impl ::kube::Resource for $ty {
            type DynamicType = ();
            type Scope = ::k8s_openapi::NamespaceResourceScope;

            fn kind(_: &()) -> ::std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> ::std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> ::std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> ::std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut ::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }

        impl $crate::watch::Checked for $ty {
            type Object = $ty;
            fn checked(self) -> Result<Self, Box<::kube::core::error_boundary::InvalidObject>> {
                Ok(self)
            }
            fn trim(&mut self) {}
        }
    };
}
