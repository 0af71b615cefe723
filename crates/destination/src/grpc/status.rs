//! Every way a Destination request is refused, and the one mapping from those
//! errors to gRPC statuses (codes and messages as the original's, since
//! proxies decide whether to retry by the code).

use tonic::Status;

use crate::{
    core::{authority::AuthorityError, discovery::DiscoveryError},
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
    Subscribe(SubscribeError),
    /// `GetProfile`'s target does not resolve.
    Profile(ProfileLookupError),
    /// A remote-discovery Service that cannot be followed.
    Discovery { path: String, error: DiscoveryError },
    /// A remote-discovery Service names a cluster that is not linked.
    UnknownCluster(String),
}

impl RequestError {
    /// Whether the request counts as invalid in the metrics (malformed or
    /// unfollowable targets, not lookups that found nothing).
    pub fn is_invalid_request(&self) -> bool {
        matches!(self, Self::Authority { .. } | Self::Subscribe(_))
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
            Self::Authority { path, error } => invalid_authority(&path, &error),
            Self::Subscribe(error @ SubscribeError::ExternalName(_)) => {
                Status::invalid_argument(error.to_string())
            }
            // A target that does not exist is `InvalidArgument`, not
            // `NotFound`: linkerd2-proxy's profile client retries every code
            // but `InvalidArgument` and `FailedPrecondition` forever, so a
            // `NotFound` would leave a proxy (ingress mode) waiting on a name
            // that cannot resolve. With this answer it goes on without a
            // profile at once, and the outbound policy API's `NotFound` for
            // the same name (which the proxy does not retry either) then
            // fails the request fast.
            Self::Profile(
                error @ (ProfileLookupError::ServiceNotFound(_)
                | ProfileLookupError::NoSuchInstance { .. }
                | ProfileLookupError::InstanceWithoutPod { .. }
                | ProfileLookupError::ExternalName(_)),
            ) => Status::invalid_argument(error.to_string()),
            Self::Profile(
                error @ (ProfileLookupError::Ambiguous(_)
                | ProfileLookupError::AmbiguousExternalWorkload { .. }),
            ) => Status::failed_precondition(error.to_string()),
        }
    }
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
