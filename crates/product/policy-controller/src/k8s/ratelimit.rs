//! `HTTPLocalRateLimitPolicy` resources as the index keeps them: the Server
//! they target, their limits with the override clients as ServiceAccount
//! references, their age and whether our status writer accepted them.
//! Admission runs [`ratelimit_policy`] too (plus [`check_limits`]), so a
//! policy the webhook admits is one the index uses.

use std::time::SystemTime;

use k8s_api::policy::{
    self, HTTPLocalRateLimitPolicy, HttpLocalRateLimitPolicySpec, target_ref::NamespacedTargetRef,
};

use super::InvalidResource;

/// Why a rate limit policy is refused (by admission) or ignored (by the
/// index). The messages name the fields as the original's do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRateLimit {
    #[error("invalid targetRef kind: {0}")]
    Target(String),
    #[error("{0}.requestsPerSecond must be greater than 0")]
    Zero(&'static str),
    #[error("{0}.requestsPerSecond must be less than or equal to total.requestsPerSecond")]
    AboveTotal(&'static str),
    #[error("overrides.clientRefs must target a ServiceAccount")]
    ClientRef,
    #[error("overrides.clientRefs: a ServiceAccount reference needs a name")]
    ClientName,
}

/// A ServiceAccount whose identity an override names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRef {
    /// `None`: the policy's namespace.
    pub namespace: Option<String>,
    pub name: String,
}

/// An override of a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverrideSpec {
    pub requests_per_second: u32,
    pub clients: Vec<ClientRef>,
}

/// The parts of an HTTPLocalRateLimitPolicy that matter to the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimitSpec {
    /// The Server it targets (the only supported kind).
    pub server: String,
    pub total: Option<u32>,
    pub identity: Option<u32>,
    pub overrides: Vec<OverrideSpec>,
    pub created_at: Option<SystemTime>,
    /// Whether our status says `Accepted=True`: only then does it apply.
    pub accepted: bool,
}

/// Checks what admission checks beyond the conversion: positive limits,
/// none above the total (as the original, the index itself applies a
/// policy that breaks these, should one get past the webhook).
pub fn check_limits(spec: &HttpLocalRateLimitPolicySpec) -> Result<(), InvalidRateLimit> {
    let total = spec.total.as_ref().map(|l| l.requests_per_second);
    let identity = spec.identity.as_ref().map(|l| l.requests_per_second);
    let overrides = spec.overrides.as_deref().unwrap_or_default();
    if total == Some(0) {
        return Err(InvalidRateLimit::Zero("total"));
    }
    if let Some(total) = total {
        if identity.is_some_and(|i| i > total) {
            return Err(InvalidRateLimit::AboveTotal("identity"));
        }
        if overrides.iter().any(|o| o.requests_per_second > total) {
            return Err(InvalidRateLimit::AboveTotal("override"));
        }
    }
    if identity == Some(0) {
        return Err(InvalidRateLimit::Zero("identity"));
    }
    if overrides.iter().any(|o| o.requests_per_second == 0) {
        return Err(InvalidRateLimit::Zero("override"));
    }
    Ok(())
}

/// Converts a policy spec: its target must be a Server and its override
/// clients ServiceAccounts (the index ignores a policy that breaks these).
pub fn ratelimit_policy(
    spec: &HttpLocalRateLimitPolicySpec,
) -> Result<RateLimitSpec, InvalidRateLimit> {
    let target = &spec.target_ref;
    if !target.targets_kind(policy::GROUP, "Server") {
        let group = target.group.as_deref().filter(|g| !g.is_empty());
        return Err(InvalidRateLimit::Target(format!(
            "{}/{}",
            group.unwrap_or("core"),
            target.kind
        )));
    }
    let overrides = spec
        .overrides
        .iter()
        .flatten()
        .map(|o| {
            let clients = o
                .client_refs
                .iter()
                .map(client_ref)
                .collect::<Result<_, _>>()?;
            Ok(OverrideSpec {
                requests_per_second: o.requests_per_second,
                clients,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(RateLimitSpec {
        server: target.name.clone(),
        total: spec.total.as_ref().map(|l| l.requests_per_second),
        identity: spec.identity.as_ref().map(|l| l.requests_per_second),
        overrides,
        created_at: None,
        accepted: false,
    })
}

fn client_ref(r: &NamespacedTargetRef) -> Result<ClientRef, InvalidRateLimit> {
    if !r.targets_kind("core", "ServiceAccount") {
        return Err(InvalidRateLimit::ClientRef);
    }
    let name = r.name.clone().ok_or(InvalidRateLimit::ClientName)?;
    Ok(ClientRef {
        namespace: r.namespace.clone().filter(|n| !n.is_empty()),
        name,
    })
}

/// Whether the status of a policy says our controller accepted it.
fn accepted(policy: &HTTPLocalRateLimitPolicy) -> bool {
    policy
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .any(|c| c.type_ == k8s_api::conditions::ACCEPTED && c.status == "True")
}

/// Converts a policy resource.
pub fn ratelimit_from_resource(
    policy: &HTTPLocalRateLimitPolicy,
) -> Result<RateLimitSpec, InvalidRateLimit> {
    let mut spec = ratelimit_policy(&policy.spec)?;
    spec.created_at = policy
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| SystemTime::from(t.0));
    spec.accepted = accepted(policy);
    Ok(spec)
}

/// Objects with a creation time sort before those without.
pub(crate) fn by_age(a: Option<SystemTime>, b: Option<SystemTime>) -> std::cmp::Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.cmp(&b),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    }
}

impl From<InvalidRateLimit> for InvalidResource {
    fn from(e: InvalidRateLimit) -> Self {
        InvalidResource::RateLimit(e)
    }
}
