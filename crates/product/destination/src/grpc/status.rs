//! Every way a Destination request is refused, and the one mapping from those
//! errors to gRPC statuses (codes and messages as the original's, since
//! proxies decide whether to retry by the code).

use tonic::Status;

use crate::{
    core::{ServiceId, authority::AuthorityError, discovery::DiscoveryError},
    index::{SubscribeError, profiles::ProfileLookupError},
};

/// Trailer carrying why an authority was refused.
pub const REASON_HEADER: &str = "meridian-reason";

/// Why a stream was not opened.
#[derive(Debug)]
pub enum RequestError {
    /// The path is not a destination the controller can parse.
    Authority { path: String, error: AuthorityError },
    /// The target cannot be followed (an ExternalName Service).
    Subscribe { path: String, error: SubscribeError },
    /// `GetProfile`'s target does not resolve.
    Profile {
        path: String,
        error: ProfileLookupError,
    },
    /// A remote-discovery Service that cannot be followed.
    Discovery { path: String, error: DiscoveryError },
    /// A remote-discovery Service names a cluster that is not linked.
    UnknownCluster(String),
    /// `Get` of a Service that does not exist (checked with the API server
    /// when the index missed it).
    NoSuchService(ServiceId),
    /// The lookup missed the index and the request budget of such misses
    /// is spent: no answer that may depend on a lagging watch is given.
    MissBudget { path: String },
}

impl RequestError {
    /// Whether the request counts as invalid in the metrics (malformed or
    /// unfollowable targets, not lookups that found nothing).
    pub fn is_invalid_request(&self) -> bool {
        matches!(self, Self::Authority { .. } | Self::Subscribe { .. })
    }

    /// The status the client receives.
    pub fn into_status(self) -> Status {
        match self {
            Self::Discovery { path, error } => {
                Status::failed_precondition(format!("{error} {path}"))
            }
            Self::UnknownCluster(cluster) => {
                Status::not_found(format!("Remote cluster not found: {cluster}"))
            }
            Self::NoSuchService(id) => {
                Status::not_found(format!("Service {}.{} not found", id.name, id.namespace))
            }
            Self::MissBudget { path } => Status::unavailable(format!(
                "too many lookups missed the index; retry {path} later"
            )),
            Self::Authority { path, error } => invalid_authority(&path, &error),
            // An ExternalName Service has no endpoints to discover: the
            // original's words, the reason in the log.
            Self::Subscribe {
                path,
                error: error @ SubscribeError::ExternalName(_),
            } => external_name(&path, &error),
            Self::Profile {
                path,
                error: error @ ProfileLookupError::ExternalName(_),
            } => external_name(&path, &error),
            // As the original: an instance endpoint without a pod cannot be
            // profiled (the proxy does not ask again); an unknown instance
            // is `NotFound`, which the proxy retries until it appears.
            Self::Profile {
                error: error @ ProfileLookupError::InstanceWithoutPod { .. },
                ..
            } => Status::invalid_argument(error.to_string()),
            Self::Profile {
                error: error @ ProfileLookupError::NoSuchInstance { .. },
                ..
            } => Status::not_found(error.to_string()),
            Self::Profile {
                error:
                    error @ (ProfileLookupError::Ambiguous(_)
                    | ProfileLookupError::AmbiguousExternalWorkload { .. }),
                ..
            } => Status::failed_precondition(error.to_string()),
        }
    }
}

/// `InvalidArgument` for an ExternalName Service, in the original's words
/// (the reason goes to the log).
fn external_name(path: &str, error: &dyn std::error::Error) -> Status {
    tracing::debug!(%path, %error, "refusing an ExternalName Service");
    Status::invalid_argument(format!("Invalid authority: {path}"))
}

/// `InvalidArgument` for a malformed request path. The message is the
/// original's (`Invalid authority: <path>`, or its IP-query message), which
/// clients such as `linkerd diagnostics endpoints` print and match; the
/// precise reason travels in the `meridian-reason` trailer and the log.
fn invalid_authority(path: &str, error: &AuthorityError) -> Status {
    tracing::debug!(%path, %error, "refusing an invalid authority");
    let message = match error {
        AuthorityError::IpQuery { .. } => error.to_string(),
        _ => format!("Invalid authority: {path}"),
    };
    let mut status = Status::invalid_argument(message);
    if let Ok(reason) = error.to_string().parse() {
        status.metadata_mut().insert(REASON_HEADER, reason);
    }
    status
}
