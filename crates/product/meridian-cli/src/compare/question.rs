//! What compare asks and what it gets back: one question per API call a
//! proxy makes (with the context token or workload the proxy sends), and
//! each side's answer.

use std::{net::SocketAddr, time::Duration};

use super::tree::Node;

/// The API called.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Api {
    /// `Destination.Get` for a Service name or a pod's hostname.
    Get,
    /// `Destination.GetProfile` for a Service name, a ClusterIP, a pod's
    /// hostname or `ip:port` of a pod or an ExternalWorkload.
    GetProfile,
    /// `OutboundPolicies.Watch` for a ClusterIP or an egress address.
    Outbound,
    /// `InboundServerPolicies.WatchPort` for a port of a meshed pod or an
    /// ExternalWorkload.
    Inbound,
}

impl Api {
    pub const ALL: [Api; 4] = [Api::Get, Api::GetProfile, Api::Outbound, Api::Inbound];

    /// The gRPC method, as written in reports.
    pub fn method(self) -> &'static str {
        match self {
            Api::Get => "Destination.Get",
            Api::GetProfile => "Destination.GetProfile",
            Api::Outbound => "OutboundPolicies.Watch",
            Api::Inbound => "InboundServerPolicies.WatchPort",
        }
    }
}

/// The request's parts, as a proxy fills them.
#[derive(Clone, Debug)]
pub enum Request {
    /// `GetDestination{scheme: "k8s", path, context_token}`.
    Destination { path: String, token: String },
    /// `TrafficSpec{source_workload, target: Addr}`.
    Outbound { addr: SocketAddr, workload: String },
    /// `PortSpec{workload, port}`.
    Inbound { workload: String, port: u32 },
}

/// One call, asked of both sides.
#[derive(Clone, Debug)]
pub struct Question {
    pub api: Api,
    /// What it asks about: the authority, `ip:port`, or `<ns>/<pod>:<port>`.
    pub target: String,
    pub request: Request,
    /// The client it is asked as (`<ns>/<pod>`).
    pub client: String,
    /// How long before the question the object asked about was created.
    pub age: Option<Duration>,
}

impl Question {
    /// `Destination.Get web.demo.svc.cluster.local:80`.
    pub fn title(&self) -> String {
        format!("{} {}", self.api.method(), self.target)
    }
}

/// What one side answered.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The first complete answer (for `Get`, the endpoint state it
    /// describes; a `Get` stream that stays silent describes no endpoints).
    Value(Node),
    /// The call ended with this status before a complete answer (an
    /// error, or OK).
    Status { code: tonic::Code, message: String },
    /// No message within the wait.
    Silent(Duration),
    /// The call could not be made (connection refused or lost, a
    /// port-forward that failed): not an answer.
    Unreachable(String),
}

impl Answer {
    /// As a tree, for reports and differences.
    pub fn to_node(&self) -> Node {
        match self {
            Answer::Value(node) => node.clone(),
            Answer::Status { code, message } => Node::Fields(
                [
                    ("code".to_string(), Node::Enum(code_name(*code).into())),
                    ("message".to_string(), Node::Str(message.clone())),
                ]
                .into(),
            ),
            Answer::Silent(wait) => Node::Enum(format!("(no message within {wait:?})")),
            Answer::Unreachable(error) => Node::Enum(format!("(not asked: {error})")),
        }
    }

    /// The gRPC code of a failed call.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            Answer::Status { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// A gRPC code as the protocol names it (`NotFound`, `InvalidArgument`).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match code {
        C::Ok => "OK",
        C::Cancelled => "Cancelled",
        C::Unknown => "Unknown",
        C::InvalidArgument => "InvalidArgument",
        C::DeadlineExceeded => "DeadlineExceeded",
        C::NotFound => "NotFound",
        C::AlreadyExists => "AlreadyExists",
        C::PermissionDenied => "PermissionDenied",
        C::ResourceExhausted => "ResourceExhausted",
        C::FailedPrecondition => "FailedPrecondition",
        C::Aborted => "Aborted",
        C::OutOfRange => "OutOfRange",
        C::Unimplemented => "Unimplemented",
        C::Internal => "Internal",
        C::Unavailable => "Unavailable",
        C::DataLoss => "DataLoss",
        C::Unauthenticated => "Unauthenticated",
    }
}

/// The time since the epoch.
pub fn now_since_epoch() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// How long before `now` (since the epoch) an object was created.
pub fn age(
    created: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    now: Duration,
) -> Option<Duration> {
    let created = created.as_ref()?.0.as_second();
    let created = Duration::from_secs(u64::try_from(created).ok()?);
    Some(now.saturating_sub(created))
}
