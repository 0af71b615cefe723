//! The kinds Meridian watches, with the watcher configuration each needs.
//! Binaries pick the ones they use and point them at their indexes.

use k8s_api::{
    gateway,
    policy::{
        AuthorizationPolicy, EgressNetwork, HTTPLocalRateLimitPolicy, HTTPRoute,
        MeshTLSAuthentication, NetworkAuthentication, Server, ServerAuthorization,
    },
    service_profile::ServiceProfile,
    workload::ExternalWorkload,
};
use k8s_openapi::api::{
    apps::v1::ReplicaSet,
    batch::v1::Job,
    core::v1::{Node, Pod, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Client,
    core::{DeserializeGuard, PartialObjectMeta},
    runtime::watcher,
};

use crate::{Index, IndexMetrics, SharedIndex, WatchTask};

/// The label the meshed pods carry (the policy controller watches only those).
pub const CONTROL_PLANE_NS_LABEL: &str = k8s_api::labels::CONTROL_PLANE_NS;

/// The watcher configuration of every watched kind (its lists streamed
/// where the API server allows it: [`crate::initial_list`]).
pub fn watch_config() -> watcher::Config {
    // Any resourceVersion is fine for lists: the apiserver's watch cache
    // answers without a quorum read (a streamed list starts from it too).
    watcher::Config::default().any_semantic()
}

/// All pods, or those matching `label_selector`.
pub fn pods<I>(
    client: Client,
    label_selector: Option<&str>,
    index: SharedIndex<I>,
    metrics: &IndexMetrics,
) -> WatchTask
where
    I: Index<Pod> + Send + Sync + 'static,
{
    let mut cfg = watch_config();
    if let Some(selector) = label_selector {
        cfg = cfg.labels(selector);
    }
    WatchTask::new("pods", Api::<Pod>::all(client), cfg, index, metrics)
}

/// All Services.
pub fn services<I>(client: Client, index: SharedIndex<I>, metrics: &IndexMetrics) -> WatchTask
where
    I: Index<Service> + Send + Sync + 'static,
{
    WatchTask::new(
        "services",
        Api::<Service>::all(client),
        watch_config(),
        index,
        metrics,
    )
}

/// All EndpointSlices (discovery.k8s.io/v1).
pub fn endpoint_slices<I>(
    client: Client,
    index: SharedIndex<I>,
    metrics: &IndexMetrics,
) -> WatchTask
where
    I: Index<EndpointSlice> + Send + Sync + 'static,
{
    WatchTask::new(
        "endpointslices",
        Api::<EndpointSlice>::all(client),
        watch_config(),
        index,
        metrics,
    )
}

/// The EndpointSlices matching `label_selector`, as `kind` (e.g. the slices
/// a writer manages: it reads only its own).
pub fn endpoint_slices_labelled<I>(
    client: Client,
    kind: &str,
    label_selector: &str,
    index: SharedIndex<I>,
    metrics: &IndexMetrics,
) -> WatchTask
where
    I: Index<EndpointSlice> + Send + Sync + 'static,
{
    WatchTask::new(
        kind,
        Api::<EndpointSlice>::all(client),
        watch_config().labels(label_selector),
        index,
        metrics,
    )
}

/// Node metadata (labels such as the zone are all Meridian reads).
pub fn nodes<I>(client: Client, index: SharedIndex<I>, metrics: &IndexMetrics) -> WatchTask
where
    I: Index<PartialObjectMeta<Node>> + Send + Sync + 'static,
{
    // `Api<PartialObjectMeta<_>>` makes metadata-only requests.
    WatchTask::new(
        "nodes",
        Api::<PartialObjectMeta<Node>>::all(client),
        watch_config(),
        index,
        metrics,
    )
}

/// ReplicaSet metadata (their owners name a pod's Deployment).
pub fn replica_sets<I>(client: Client, index: SharedIndex<I>, metrics: &IndexMetrics) -> WatchTask
where
    I: Index<PartialObjectMeta<ReplicaSet>> + Send + Sync + 'static,
{
    WatchTask::new(
        "replicasets",
        Api::<PartialObjectMeta<ReplicaSet>>::all(client),
        watch_config(),
        index,
        metrics,
    )
}

/// Job metadata (their owners name a pod's CronJob).
pub fn jobs<I>(client: Client, index: SharedIndex<I>, metrics: &IndexMetrics) -> WatchTask
where
    I: Index<PartialObjectMeta<Job>> + Send + Sync + 'static,
{
    WatchTask::new(
        "jobs",
        Api::<PartialObjectMeta<Job>>::all(client),
        watch_config(),
        index,
        metrics,
    )
}

macro_rules! crd_watch {
    ($(#[$doc:meta] $fn:ident => $ty:ty, $kind:literal;)*) => {$(
        #[$doc]
        pub fn $fn<I>(client: Client, index: SharedIndex<I>, metrics: &IndexMetrics) -> WatchTask
        where
            I: Index<$ty> + Send + Sync + 'static,
        {
            WatchTask::new($kind, Api::<DeserializeGuard<$ty>>::all(client), watch_config(), index, metrics)
        }
    )*};
}

crd_watch! {
    /// ServiceProfiles (linkerd.io/v1alpha2).
    service_profiles => ServiceProfile, "serviceprofiles";
    /// ExternalWorkloads (workload.linkerd.io).
    external_workloads => ExternalWorkload, "externalworkloads";
    /// Servers (policy.linkerd.io).
    servers => Server, "servers";
    /// ServerAuthorizations (policy.linkerd.io).
    server_authorizations => ServerAuthorization, "serverauthorizations";
    /// AuthorizationPolicies (policy.linkerd.io).
    authorization_policies => AuthorizationPolicy, "authorizationpolicies";
    /// MeshTLSAuthentications (policy.linkerd.io).
    mesh_tls_authentications => MeshTLSAuthentication, "meshtlsauthentications";
    /// NetworkAuthentications (policy.linkerd.io).
    network_authentications => NetworkAuthentication, "networkauthentications";
    /// HTTPRoutes (policy.linkerd.io).
    http_routes => HTTPRoute, "httproutes";
    /// HTTPLocalRateLimitPolicies (policy.linkerd.io).
    http_local_ratelimit_policies => HTTPLocalRateLimitPolicy, "httplocalratelimitpolicies";
    /// EgressNetworks (policy.linkerd.io).
    egress_networks => EgressNetwork, "egressnetworks";
    /// HTTPRoutes (gateway.networking.k8s.io).
    gateway_http_routes => gateway::HTTPRoute, "httproutes.gateway.networking.k8s.io";
    /// GRPCRoutes (gateway.networking.k8s.io).
    grpc_routes => gateway::GRPCRoute, "grpcroutes";
    /// TLSRoutes (gateway.networking.k8s.io/v1alpha2).
    tls_routes => gateway::TLSRoute, "tlsroutes";
    /// TCPRoutes (gateway.networking.k8s.io/v1alpha2).
    tcp_routes => gateway::TCPRoute, "tcproutes";
}
