//! Conversion of a server's [`RateLimit`] into the proxy API's
//! `HttpLocalRateLimit`, sent with the HTTP/1, HTTP/2 and Detect
//! protocols.

use linkerd2_proxy_api::{
    inbound::{self as proto, http_local_rate_limit as limit},
    meta::{self, metadata},
};

use crate::core::RateLimit;

/// The proxy API view of `rl`: its policy as `Resource` metadata, the
/// total and per-identity limits, and one override per client list.
pub fn to_rate_limit(rl: &RateLimit) -> proto::HttpLocalRateLimit {
    let rate = |requests_per_second| limit::Limit {
        requests_per_second,
    };
    proto::HttpLocalRateLimit {
        metadata: Some(meta::Metadata {
            kind: Some(metadata::Kind::Resource(meta::Resource {
                group: k8s_api::policy::GROUP.to_string(),
                kind: "HTTPLocalRateLimitPolicy".to_string(),
                name: rl.name.clone(),
                ..Default::default()
            })),
        }),
        total: rl.total.map(rate),
        identity: rl.identity.map(rate),
        overrides: rl
            .overrides
            .iter()
            .map(|o| limit::Override {
                limit: Some(rate(o.requests_per_second)),
                clients: Some(limit::r#override::ClientIdentities {
                    identities: o
                        .client_identities
                        .iter()
                        .map(|name| proto::Identity { name: name.clone() })
                        .collect(),
                }),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::RateLimitOverride;

    #[test]
    fn every_field_is_sent() {
        let rl = RateLimit {
            name: "rl".into(),
            total: Some(100),
            identity: None,
            overrides: vec![RateLimitOverride {
                requests_per_second: 10,
                client_identities: vec!["a.b".into(), "c.d".into()],
            }],
        };
        let out = to_rate_limit(&rl);
        let Some(metadata::Kind::Resource(res)) = out.metadata.and_then(|m| m.kind) else {
            panic!("expected resource metadata");
        };
        assert_eq!(
            (res.group.as_str(), res.kind.as_str(), res.name.as_str()),
            ("policy.linkerd.io", "HTTPLocalRateLimitPolicy", "rl")
        );
        assert!(res.namespace.is_empty());
        assert_eq!(out.total.map(|l| l.requests_per_second), Some(100));
        assert_eq!(out.identity, None);
        let [ovr] = out.overrides.as_slice() else {
            panic!("expected one override");
        };
        assert_eq!(ovr.limit.map(|l| l.requests_per_second), Some(10));
        let names: Vec<_> = ovr
            .clients
            .iter()
            .flat_map(|c| &c.identities)
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(names, ["a.b", "c.d"]);
    }
}
