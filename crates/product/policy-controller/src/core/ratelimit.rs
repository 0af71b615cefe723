//! Local rate limits of an inbound HTTP server: an overall limit, a limit
//! per client identity, and overrides for named client identities.

/// The rate limit a proxy enforces on one server's HTTP requests.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RateLimit {
    /// The HTTPLocalRateLimitPolicy it comes from.
    pub name: String,
    /// Requests per second of all clients together.
    pub total: Option<u32>,
    /// Requests per second of each client identity.
    pub identity: Option<u32>,
    pub overrides: Vec<RateLimitOverride>,
}

/// A limit for the requests of specific clients.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RateLimitOverride {
    pub requests_per_second: u32,
    /// Exact mesh identities.
    pub client_identities: Vec<String>,
}
