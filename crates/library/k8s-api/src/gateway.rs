//! The Gateway API route kinds (`gateway.networking.k8s.io`) that the
//! policy controller reads: HTTPRoute, GRPCRoute, TLSRoute and TCPRoute,
//! with the API versions each may be read at ([`GatewayRoute::VERSIONS`]).
//! Only the fields Meridian uses are typed, and they are the same in every
//! listed version; the CRDs themselves are the upstream manifests (bundle
//! v1.1.1, experimental channel, as the original's chart ships them), so
//! nothing here generates a schema.
//!
//! A Gateway HTTPRoute has the same shape as Linkerd's policy HTTPRoute
//! for everything Meridian reads, so its spec and status are the
//! [`crate::policy::http_route`] types.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::policy::http_route::{
    HttpBackendRef, HttpHeaderMatch, HttpRouteFilter, HttpRouteSpec, HttpRouteStatus, ParentRef,
};

/// The API group of the Gateway API kinds.
pub const GROUP: &str = "gateway.networking.k8s.io";

/// A Gateway API route kind: its names and the API versions Meridian can
/// read it at, most preferred first. The policy controller watches the
/// kind at the first of these its CRD serves.
pub trait GatewayRoute:
    kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The kind, as in manifests (`HTTPRoute`).
    const KIND: &'static str;
    /// The resource name (`httproutes`).
    const PLURAL: &'static str;
    /// Readable versions, most preferred first (the original's first).
    const VERSIONS: &'static [&'static str];

    /// The name of the kind's CustomResourceDefinition
    /// (`httproutes.gateway.networking.k8s.io`).
    fn crd_name() -> String {
        format!("{}.{GROUP}", Self::PLURAL)
    }
}

macro_rules! gateway_kind {
    ($(#[$doc:meta])* $ty:ident, $kind:literal, [$version:literal $(, $other:literal)*], $plural:literal, $spec:ty) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
        pub struct $ty {
            pub metadata: ObjectMeta,
            pub spec: $spec,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub status: Option<HttpRouteStatus>,
        }

        impl $ty {
            /// The object's kind, as in manifests.
            pub const KIND: &'static str = $kind;
        }

        impl GatewayRoute for $ty {
            const KIND: &'static str = $kind;
            const PLURAL: &'static str = $plural;
            const VERSIONS: &'static [&'static str] = &[$version $(, $other)*];
        }

        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = kube::core::NamespaceResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(GROUP)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($version)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

gateway_kind!(
    /// A Gateway API HTTPRoute.
    HTTPRoute, "HTTPRoute", ["v1", "v1beta1"], "httproutes", HttpRouteSpec
);
gateway_kind!(
    /// A Gateway API GRPCRoute.
    GRPCRoute, "GRPCRoute", ["v1", "v1alpha2"], "grpcroutes", GrpcRouteSpec
);
gateway_kind!(
    /// A Gateway API TLSRoute (routing by SNI, the TLS left to the app).
    TLSRoute, "TLSRoute", ["v1alpha2", "v1alpha3", "v1"], "tlsroutes", TlsRouteSpec
);
gateway_kind!(
    /// A Gateway API TCPRoute.
    TCPRoute, "TCPRoute", ["v1alpha2"], "tcproutes", TcpRouteSpec
);

/// The spec of a TLSRoute.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsRouteSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_refs: Option<Vec<ParentRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostnames: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<L4RouteRule>>,
}

/// The spec of a TCPRoute.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TcpRouteSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_refs: Option<Vec<ParentRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<L4RouteRule>>,
}

/// A rule of a TLSRoute or TCPRoute: only backends.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct L4RouteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_refs: Option<Vec<HttpBackendRef>>,
}

/// The spec of a GRPCRoute.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_refs: Option<Vec<ParentRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostnames: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<GrpcRouteRule>>,
}

/// Matches, filters and backends of one GRPCRoute rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<GrpcRouteMatch>>,
    /// `RequestHeaderModifier`, `ResponseHeaderModifier`, `RequestMirror`
    /// or `ExtensionRef` (the same filter shape as HTTP's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<Vec<HttpRouteFilter>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_refs: Option<Vec<HttpBackendRef>>,
}

/// A gRPC request match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<GrpcMethodMatch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<HttpHeaderMatch>>,
}

/// A gRPC service/method match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcMethodMatch {
    /// `Exact` (default) or `RegularExpression`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_parse_from_manifests() {
        let route: GRPCRoute = serde_json::from_value(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GRPCRoute",
            "metadata": {"namespace": "ns", "name": "r"},
            "spec": {
                "parentRefs": [{"kind": "Service", "group": "core", "name": "svc", "port": 8080}],
                "rules": [{
                    "matches": [{"method": {"service": "a.B", "method": "C"}, "headers": [{"name": "x", "value": "y"}]}],
                    "backendRefs": [{"name": "svc", "port": 8080, "weight": 3, "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "a", "value": "b"}]}}]}]
                }]
            }
        }))
        .expect("GRPCRoute");
        let rule = &route.spec.rules.as_ref().expect("rules")[0];
        let backend = &rule.backend_refs.as_ref().expect("backends")[0];
        assert_eq!((backend.port, backend.weight), (Some(8080), Some(3)));
        assert_eq!(backend.filters.as_ref().map(Vec::len), Some(1));
        assert_eq!(<GRPCRoute as kube::Resource>::plural(&()), "grpcroutes");
        let http: HTTPRoute = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "ns", "name": "h"},
            "spec": {"rules": [{"timeouts": {"request": "5s"}, "filters": [{"type": "URLRewrite", "urlRewrite": {}}]}]}
        }))
        .expect("HTTPRoute");
        assert_eq!(
            http.spec.rules.expect("rules")[0]
                .filters
                .as_ref()
                .expect("filters")[0]
                .kind,
            "URLRewrite"
        );
    }
}
