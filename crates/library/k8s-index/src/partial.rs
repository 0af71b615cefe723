//! Typed partial objects: a watched kind decoded straight from the API's
//! JSON into only the fields a controller reads (the idea of
//! `kube::core::PartialObjectMeta`, applied to spec and status too), so
//! that no full `k8s-openapi` object is built on the watch path.
//!
//! - [`partial_object!`](crate::partial_object) declares such an object:
//!   the struct (its `metadata` reduced to name, namespace and
//!   resourceVersion, beside the one field the controller keeps), its
//!   `Deserialize` through the kind's JSON reader, optionally the same
//!   decoding from a full `k8s-openapi` object, and the watchable
//!   [`kube::Resource`];
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

/// Declares a typed partial object of a namespaced kind:
///
/// ```ignore
/// k8s_index::partial_object! {
///     /// A pod as this controller watches it.
///     #[derive(Clone, Debug)]
///     pub struct PodObject {
///         /// What the index keeps.
///         pub facts: PodFacts,
///     }
///     kind = "Pod", group = "", version = "v1", plural = "pods";
///     decoded from PodJson by facts;
///     from Pod;
/// }
/// ```
///
/// makes the struct (with a private `metadata: ObjectMeta` field first),
/// its `Deserialize` (read a `PodJson`, whose `metadata` has `name`,
/// `namespace` and `resource_version`; keep those and `json.facts()`), a
/// namespaced [`kube::Resource`] always valid for the watch
/// ([`crate::watch::Checked`]), and with `from Pod;` a `From<&Pod>` that
/// decodes the full object's JSON the same way (tests, and objects that
/// arrive as one; one that does not decode becomes the empty reader's
/// value).
///
/// The short form `partial_object!(Type, kind = …, group = …, version = …,
/// plural = …)` makes an existing struct with a `metadata` field the
/// watchable resource alone.
#[macro_export]
macro_rules! partial_object {
    (
        $(#[$attr:meta])*
        $vis:vis struct $ty:ident {
            $(#[$field_attr:meta])*
            $field_vis:vis $field:ident : $field_ty:ty $(,)?
        }
        kind = $kind:literal, group = $group:literal, version = $version:literal, plural = $plural:literal;
        decoded from $json:ident by $method:ident;
        $(from $full:ty;)?
    ) => {
        $(#[$attr])*
        $vis struct $ty {
            metadata: ::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            $(#[$field_attr])*
            $field_vis $field: $field_ty,
        }

        $crate::partial_object!(
            $ty,
            kind = $kind,
            group = $group,
            version = $version,
            plural = $plural
        );

        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let json = <$json as ::serde::Deserialize>::deserialize(deserializer)?;
                let metadata = ::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: json.metadata.name.clone(),
                    namespace: json.metadata.namespace.clone(),
                    resource_version: json.metadata.resource_version.clone(),
                    ..Default::default()
                };
                Ok(Self {
                    metadata,
                    $field: json.$method(),
                })
            }
        }

        $(
            impl From<&$full> for $ty {
                fn from(full: &$full) -> Self {
                    ::serde_json::to_value(full)
                        .and_then(::serde_json::from_value)
                        .unwrap_or_else(|_| Self {
                            metadata: Default::default(),
                            $field: <$json as Default>::default().$method(),
                        })
                }
            }
        )?
    };
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
