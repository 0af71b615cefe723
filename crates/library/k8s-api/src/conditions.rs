//! Status condition types and reasons the policy controller writes (the
//! Gateway API's and Linkerd's names), defined once: the status writer
//! writes them and the index reads `Accepted` back.

/// The condition type a route's or policy's acceptance is written under.
pub const ACCEPTED: &str = "Accepted";
/// The condition type telling whether the backends exist.
pub const RESOLVED_REFS: &str = "ResolvedRefs";
/// The reason of `Accepted=False` when the parent does not exist.
pub const NO_MATCHING_PARENT: &str = "NoMatchingParent";
/// The reason of `Accepted=False` when a route of a preferred kind has the
/// same parent (GRPCRoute over HTTPRoute).
pub const ROUTE_CONFLICTED: &str = "RouteConflicted";
/// The reason of `ResolvedRefs=False` when a backend Service is missing.
pub const BACKEND_NOT_FOUND: &str = "BackendNotFound";
/// The reason of `ResolvedRefs=False` for a backend of an unsupported kind.
pub const INVALID_KIND: &str = "InvalidKind";
/// The reason of `Accepted=False` when a route holds a value the
/// implementation does not support (the Gateway API's
/// `RouteReasonUnsupportedValue`): a filter Meridian does not apply, a
/// Server parent with a port, … The index ignores such a route.
pub const UNSUPPORTED_VALUE: &str = "UnsupportedValue";
