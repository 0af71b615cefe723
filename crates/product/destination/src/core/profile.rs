//! What a ServiceProfile tells proxies about one Service port, as plain
//! values: its routes (request conditions, response classes, retryability,
//! timeout), its retry budget and its traffic-split destinations. The k8s
//! floor builds them from the CRD (validating it); the proto floor turns them
//! into a `DestinationProfile`.

/// The rules of the ServiceProfile that applies to a Service port.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileRules {
    /// The ServiceProfile they come from (namespace, name), for `profile_ref`.
    pub source: (String, String),
    pub routes: Vec<RouteRule>,
    /// `None`: the profile sets none (proxies get the default budget).
    pub retry_budget: Option<RetryBudget>,
    pub dst_overrides: Vec<WeightedDst>,
}

/// One route.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteRule {
    /// The route's name (its `route` metric label).
    pub name: String,
    pub condition: RequestMatch,
    pub response_classes: Vec<ResponseClass>,
    pub is_retryable: bool,
    /// In nanoseconds, signed as Go's `time.Duration` (kept as written);
    /// `None` when unset or unparsable (an invalid timeout is ignored).
    pub timeout_nanos: Option<i64>,
}

/// A request condition. Several fields of one CRD condition are already
/// combined with `All`, in the CRD's field order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestMatch {
    All(Vec<RequestMatch>),
    Any(Vec<RequestMatch>),
    /// An HTTP method, upper-cased.
    Method(String),
    Not(Box<RequestMatch>),
    /// A path regular expression.
    Path(String),
}

/// A response condition and whether it is a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseClass {
    pub condition: ResponseMatch,
    pub is_failure: bool,
}

/// A response condition (fields combined with `All`, as for requests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponseMatch {
    All(Vec<ResponseMatch>),
    Any(Vec<ResponseMatch>),
    /// An inclusive status range; `0` leaves a bound open.
    Status {
        min: u32,
        max: u32,
    },
    Not(Box<ResponseMatch>),
}

/// How many retries proxies may add.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryBudget {
    pub retry_ratio: f32,
    pub min_retries_per_second: u32,
    /// In nanoseconds, signed as Go's `time.Duration`.
    pub ttl_nanos: i64,
}

/// A traffic-split destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightedDst {
    /// `host:port` (the Service port is added when the CRD gives none).
    pub authority: String,
    /// The weight as proxies get it (the quantity's milli-value × 10).
    pub weight: u32,
}
