//! Linkerd's label and annotation names, defined once for every crate.

/// The label of meshed pods and control-plane objects: the namespace of
/// their control plane.
pub const CONTROL_PLANE_NS: &str = "linkerd.io/control-plane-ns";
/// On control-plane objects: which component they belong to (`destination`).
pub const CONTROL_PLANE_COMPONENT: &str = "linkerd.io/control-plane-component";
/// The [`CONTROL_PLANE_COMPONENT`] value of the destination Deployment and
/// its pods (the `destination`, `sp-validator` and `policy` containers).
pub const DESTINATION_COMPONENT: &str = "destination";
/// The name the chart gives the destination Deployment.
pub const DESTINATION_DEPLOYMENT: &str = "linkerd-destination";
/// The controller containers of the destination pod, by the chart's names
/// (the pod's other containers are the proxy and its init containers).
pub const DESTINATION_CONTAINERS: [&str; 3] = ["destination", "sp-validator", "policy"];

/// Pod or Service annotation listing opaque ports (`"25,587,3000-3010"`).
pub const OPAQUE_PORTS: &str = "config.linkerd.io/opaque-ports";
/// Pod annotation naming the default inbound policy.
pub const DEFAULT_INBOUND_POLICY: &str = "config.linkerd.io/default-inbound-policy";
/// Pod annotation listing ports whose default policy requires identity.
pub const REQUIRE_IDENTITY_INBOUND_PORTS: &str =
    "config.linkerd.io/proxy-require-identity-inbound-ports";

/// Service annotation turning on failure accrual (`consecutive`).
pub const FAILURE_ACCRUAL: &str = "balancer.linkerd.io/failure-accrual";
/// Consecutive failures before an endpoint is ejected (default 7).
pub const FAILURE_ACCRUAL_MAX_FAILURES: &str =
    "balancer.linkerd.io/failure-accrual-consecutive-max-failures";
/// Longest ejection (default 1m).
pub const FAILURE_ACCRUAL_MAX_PENALTY: &str =
    "balancer.linkerd.io/failure-accrual-consecutive-max-penalty";
/// Shortest ejection (default 1s).
pub const FAILURE_ACCRUAL_MIN_PENALTY: &str =
    "balancer.linkerd.io/failure-accrual-consecutive-min-penalty";
/// Jitter of the ejection backoff (default 0.5).
pub const FAILURE_ACCRUAL_JITTER_RATIO: &str =
    "balancer.linkerd.io/failure-accrual-consecutive-jitter-ratio";

/// Unified accrual: the success rate below which an endpoint is ejected
/// (0-1, default 0.8; 0 turns the success-rate dimension off).
pub const FAILURE_ACCRUAL_SUCCESS_RATE_THRESHOLD: &str =
    "balancer.alpha.linkerd.io/failure-accrual-success-rate-threshold";
/// Unified accrual: the success-rate window (default 10s).
pub const FAILURE_ACCRUAL_SUCCESS_RATE_WINDOW: &str =
    "balancer.alpha.linkerd.io/failure-accrual-success-rate-window";
/// Unified accrual: requests in the window before it can trip (default 5).
pub const FAILURE_ACCRUAL_SUCCESS_RATE_MIN_REQUESTS: &str =
    "balancer.alpha.linkerd.io/failure-accrual-success-rate-min-requests";
/// Unified accrual: whether the backoff honors `Retry-After`.
pub const FAILURE_ACCRUAL_HONOR_RETRY_AFTER: &str =
    "balancer.alpha.linkerd.io/failure-accrual-honor-retry-after";
/// Whether the balancer penalizes failing endpoints' load estimate.
pub const PENALIZE_FAILURES: &str = "balancer.alpha.linkerd.io/penalize-failures";
/// The load penalty of a failure (default 5s).
pub const LOAD_BIASER_PENALTY: &str = "balancer.alpha.linkerd.io/load-biaser-penalty";
/// The ceiling of a `Retry-After` hint in the load estimate (default 5m).
pub const LOAD_BIASER_MAX_RETRY_AFTER: &str =
    "balancer.alpha.linkerd.io/load-biaser-max-retry-after";

/// Route or Service annotation: request timeout.
pub const TIMEOUT_REQUEST: &str = "timeout.linkerd.io/request";
/// Route or Service annotation: response timeout.
pub const TIMEOUT_RESPONSE: &str = "timeout.linkerd.io/response";
/// Route or Service annotation: idle timeout.
pub const TIMEOUT_IDLE: &str = "timeout.linkerd.io/idle";

/// Route or Service annotation: maximum retries.
pub const RETRY_LIMIT: &str = "retry.linkerd.io/limit";
/// Route or Service annotation: timeout of each retried attempt.
pub const RETRY_TIMEOUT: &str = "retry.linkerd.io/timeout";
/// Route or Service annotation: HTTP statuses to retry (`5xx,gateway-error,429,500-504`).
pub const RETRY_HTTP: &str = "retry.linkerd.io/http";
/// Route or Service annotation: gRPC statuses to retry (`cancelled,unavailable,…`).
pub const RETRY_GRPC: &str = "retry.linkerd.io/grpc";

/// Every annotation that configures outbound timeouts and retries.
pub const TIMEOUT_AND_RETRY: [&str; 7] = [
    TIMEOUT_REQUEST,
    TIMEOUT_RESPONSE,
    TIMEOUT_IDLE,
    RETRY_LIMIT,
    RETRY_TIMEOUT,
    RETRY_HTTP,
    RETRY_GRPC,
];

/// Pod annotation listing inbound ports the proxy does not handle.
pub const SKIP_INBOUND_PORTS: &str = "config.linkerd.io/skip-inbound-ports";
/// Pod label set by the Deployment controller (a metric label of endpoints).
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// EndpointSlice label naming its Service.
pub const SERVICE_NAME: &str = "kubernetes.io/service-name";
/// Node label with the node's zone.
pub const TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// EndpointSlice label set on mirrored (multicluster) slices.
pub const REMOTE_CLUSTER_NAME: &str = "mirror.linkerd.io/cluster-name";
/// EndpointSlice annotation with the remote Service's FQDN.
pub const REMOTE_SVC_FQ_NAME: &str = "mirror.linkerd.io/remote-svc-fq-name";
/// EndpointSlice annotation with the remote gateway's TLS identity.
pub const REMOTE_GATEWAY_IDENTITY: &str = "mirror.linkerd.io/remote-gateway-identity";

/// `type` of the Secrets holding a linked cluster's kubeconfig.
pub const REMOTE_KUBECONFIG_SECRET_TYPE: &str = "mirror.linkerd.io/remote-kubeconfig";
/// Key of the kubeconfig in such a Secret's data.
pub const REMOTE_KUBECONFIG_KEY: &str = "kubeconfig";
/// Label of such a Secret naming the linked cluster.
pub const MULTICLUSTER_CLUSTER_NAME: &str = "multicluster.linkerd.io/cluster-name";
/// Annotation of such a Secret with the linked cluster's trust domain.
pub const MULTICLUSTER_TRUST_DOMAIN: &str = "multicluster.linkerd.io/trust-domain";
/// Annotation of such a Secret with the linked cluster's cluster domain.
pub const MULTICLUSTER_CLUSTER_DOMAIN: &str = "multicluster.linkerd.io/cluster-domain";
/// Service label: discover this Service's endpoints in the named linked
/// cluster. As a Service annotation: the `service@cluster,…` members of a
/// federated Service.
pub const REMOTE_DISCOVERY: &str = "multicluster.linkerd.io/remote-discovery";
/// Service label naming the Service to discover in the linked cluster.
pub const REMOTE_SERVICE: &str = "multicluster.linkerd.io/remote-service";
/// Service annotation naming the local Service a federated Service also
/// takes its endpoints from.
pub const LOCAL_DISCOVERY: &str = "multicluster.linkerd.io/local-discovery";

/// Name of the injected proxy container.
pub const PROXY_CONTAINER: &str = "linkerd-proxy";
/// Name of an ExternalWorkload's port that its proxy accepts inbound
/// (opaque transport) connections on.
pub const PROXY_PORT_NAME: &str = "linkerd-proxy";
/// Proxy env var with the inbound listen address.
pub const ENV_PROXY_INBOUND_LISTEN_ADDR: &str = "LINKERD2_PROXY_INBOUND_LISTEN_ADDR";
/// Proxy env var with the admin listen address.
pub const ENV_PROXY_ADMIN_LISTEN_ADDR: &str = "LINKERD2_PROXY_ADMIN_LISTEN_ADDR";
/// Proxy env var with the control listen address.
pub const ENV_PROXY_CONTROL_LISTEN_ADDR: &str = "LINKERD2_PROXY_CONTROL_LISTEN_ADDR";

/// EndpointSlice label naming the controller that writes the slice.
pub const ENDPOINT_SLICE_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// The `managed-by` value of the EndpointSlices the destination writes for
/// Services selecting ExternalWorkloads.
pub const EXTERNAL_WORKLOADS_CONTROLLER: &str = "linkerd-external-workloads-controller";
/// EndpointSlice label of headless Services' slices (value empty).
pub const SERVICE_HEADLESS: &str = "service.kubernetes.io/headless";
