//! Proxy-API messages the unit tests of several commands build.

use linkerd2_proxy_api::meta::{Metadata, Resource, metadata};

/// The metadata of the authorization of AuthorizationPolicy `name`.
pub fn authorization_policy(name: &str) -> Metadata {
    Metadata {
        kind: Some(metadata::Kind::Resource(Resource {
            group: "policy.linkerd.io".into(),
            kind: "AuthorizationPolicy".into(),
            name: name.into(),
            ..Default::default()
        })),
    }
}
