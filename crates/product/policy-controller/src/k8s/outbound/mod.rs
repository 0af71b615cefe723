//! The outbound side's Kubernetes objects → core values: Services
//! ([`service`]), EgressNetworks ([`egress`]), the route kinds attached to
//! them ([`routes`]) and the annotations that tune outbound policy on all
//! of these ([`annotations`]).

pub mod annotations;
pub mod egress;
pub mod routes;
pub mod service;

pub use self::{
    routes::{AnyRoute, OutboundBinding, ServiceParent},
    service::ServiceInfo,
};
