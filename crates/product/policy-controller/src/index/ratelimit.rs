//! The rate limit of a Server in the inbound index: the oldest accepted
//! `HTTPLocalRateLimitPolicy` targeting it ([`crate::k8s::ratelimit`] reads
//! the policies), its override clients resolved to mesh identities.

use k8s_api::policy::HTTPLocalRateLimitPolicy;

use super::{ClusterInfo, Index, Indexed, PolicyNs, Touched, warn_invalid};
use crate::{
    core::{IdentityMatch, RateLimit, RateLimitOverride},
    k8s::ratelimit::{RateLimitSpec, by_age, ratelimit_from_resource},
};

impl PolicyNs {
    /// The rate limit of Server `server`: the oldest accepted policy that
    /// targets it (the status writer accepts only that one).
    pub(super) fn server_ratelimit(
        &self,
        server: &str,
        cluster: &ClusterInfo,
    ) -> Option<RateLimit> {
        let (name, spec) = self
            .ratelimits
            .iter()
            .filter(|(_, p)| p.accepted && p.server == server)
            .min_by(|(an, a), (bn, b)| {
                by_age(a.created_at, b.created_at).then_with(|| an.cmp(bn))
            })?;
        let overrides = spec
            .overrides
            .iter()
            .map(|o| RateLimitOverride {
                requests_per_second: o.requests_per_second,
                client_identities: o
                    .clients
                    .iter()
                    .filter_map(|c| {
                        let ns = c.namespace.as_deref().unwrap_or(&self.namespace);
                        match cluster.service_account_identity(&c.name, ns) {
                            IdentityMatch::Exact(id) => Some(id),
                            IdentityMatch::Suffix(_) => None,
                        }
                    })
                    .collect(),
            })
            .collect();
        Some(RateLimit {
            name: name.clone(),
            total: spec.total,
            identity: spec.identity,
            overrides,
        })
    }
}

impl Indexed for HTTPLocalRateLimitPolicy {
    fn upsert(index: &mut Index, ns: &str, name: String, policy: Self) -> Touched {
        let spec = ratelimit_from_resource(&policy)
            .map_err(|e| warn_invalid("HTTPLocalRateLimitPolicy", ns, &name, &e.into()))
            .ok();
        index.set_policy(ns, name, spec, |p| &mut p.ratelimits)
    }

    fn remove(index: &mut Index, ns: &str, name: String) -> Touched {
        index.set_policy(ns, name, None::<RateLimitSpec>, |p| &mut p.ratelimits)
    }
}
