//! Translator configuration decided by the command-line flags. Port lists
//! (`--default-opaque-ports` and the pod annotations) are parsed by
//! `k8s_api::ports`, the lenient parser.

use k8s_api::ports::PortRanges;
use serde::Deserialize;

/// Controller namespace used when the flag is not given.
pub const DEFAULT_CONTROLLER_NAMESPACE: &str = "linkerd";
/// Trust domain and cluster domain used when their flags are empty.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

/// Errors from turning raw flag values into a [`TranslatorConfig`].
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `--meshed-http2-client-params` is not valid JSON of the expected shape.
    #[error("invalid --meshed-http2-client-params: {0}")]
    Http2Params(#[source] serde_json::Error),
}

/// How meshed traffic is carried to a destination proxy (`--outbound-transport-mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutboundTransportMode {
    /// TLS straight to the application port; the transport header is used only
    /// for opaque ports.
    #[default]
    Transparent,
    /// Always route meshed traffic to the proxy's inbound port with a transport
    /// header (forces `opaque_transport`).
    TransportHeader,
}

impl OutboundTransportMode {
    /// Parses the flag value; an unknown value falls back to `transparent` with a log line.
    pub fn parse(value: &str) -> Self {
        match value {
            "transport-header" => Self::TransportHeader,
            "transparent" => Self::Transparent,
            other => {
                tracing::error!(
                    value = other,
                    "unknown outbound transport mode, defaulting to \"transparent\""
                );
                Self::Transparent
            }
        }
    }
}

/// Everything the destination flags decide about translating endpoints.
#[derive(Clone, Debug, PartialEq)]
pub struct TranslatorConfig {
    /// `--controller-namespace`: pods whose `linkerd.io/control-plane-ns` label
    /// equals it get a TLS identity.
    pub controller_namespace: String,
    /// `--identity-trust-domain` (empty flag → `cluster.local`).
    pub identity_trust_domain: String,
    /// `--cluster-domain` (empty flag → `cluster.local`).
    pub cluster_domain: String,
    /// `--enable-h2-upgrade`: hint `H2` for meshed, non-opaque endpoints.
    pub enable_h2_upgrade: bool,
    /// `--outbound-transport-mode`.
    pub outbound_transport_mode: OutboundTransportMode,
    /// `--default-opaque-ports`, used for pods without the opaque-ports annotation.
    pub default_opaque_ports: PortRanges,
    /// `--meshed-http2-client-params`, sent as `http2` on meshed endpoints.
    pub meshed_http2_client_params: Option<Http2Params>,
    /// `--enable-ipv6`: offer IPv6 endpoints and prefer them for dual-stack pods.
    pub enable_ipv6: bool,
    /// `--ext-endpoint-zone-weights`: weight endpoints in the client's zone ×10.
    pub ext_endpoint_zone_weights: bool,
}

impl Default for TranslatorConfig {
    fn default() -> Self {
        Self {
            controller_namespace: DEFAULT_CONTROLLER_NAMESPACE.to_string(),
            identity_trust_domain: DEFAULT_CLUSTER_DOMAIN.to_string(),
            cluster_domain: DEFAULT_CLUSTER_DOMAIN.to_string(),
            enable_h2_upgrade: true,
            outbound_transport_mode: OutboundTransportMode::Transparent,
            default_opaque_ports: PortRanges::new(),
            meshed_http2_client_params: None,
            enable_ipv6: true,
            ext_endpoint_zone_weights: false,
        }
    }
}

/// Raw flag values as given on the command line (empty string = flag unset).
#[derive(Clone, Debug)]
pub struct TranslatorFlags<'a> {
    /// `--controller-namespace`.
    pub controller_namespace: &'a str,
    /// `--identity-trust-domain`.
    pub identity_trust_domain: &'a str,
    /// `--cluster-domain`.
    pub cluster_domain: &'a str,
    /// `--enable-h2-upgrade`.
    pub enable_h2_upgrade: bool,
    /// `--outbound-transport-mode`.
    pub outbound_transport_mode: &'a str,
    /// `--default-opaque-ports`.
    pub default_opaque_ports: &'a str,
    /// `--meshed-http2-client-params`.
    pub meshed_http2_client_params: &'a str,
    /// `--enable-ipv6`.
    pub enable_ipv6: bool,
    /// `--ext-endpoint-zone-weights`.
    pub ext_endpoint_zone_weights: bool,
}

impl Default for TranslatorFlags<'_> {
    fn default() -> Self {
        Self {
            controller_namespace: DEFAULT_CONTROLLER_NAMESPACE,
            identity_trust_domain: "",
            cluster_domain: "",
            enable_h2_upgrade: true,
            outbound_transport_mode: "transparent",
            default_opaque_ports: "",
            meshed_http2_client_params: "",
            enable_ipv6: true,
            ext_endpoint_zone_weights: false,
        }
    }
}

impl TranslatorConfig {
    /// Builds the configuration from raw flags, applying the original's defaults.
    /// Only malformed HTTP/2 client params are fatal.
    pub fn from_flags(flags: &TranslatorFlags<'_>) -> Result<Self, ConfigError> {
        let or_default = |value: &str, what: &str| {
            if value.is_empty() {
                tracing::warn!(
                    "expected {what} through args (falling back to {DEFAULT_CLUSTER_DOMAIN})"
                );
                DEFAULT_CLUSTER_DOMAIN.to_string()
            } else {
                value.to_string()
            }
        };
        Ok(Self {
            controller_namespace: flags.controller_namespace.to_string(),
            identity_trust_domain: or_default(flags.identity_trust_domain, "trust domain"),
            cluster_domain: or_default(flags.cluster_domain, "cluster domain"),
            enable_h2_upgrade: flags.enable_h2_upgrade,
            outbound_transport_mode: OutboundTransportMode::parse(flags.outbound_transport_mode),
            default_opaque_ports: PortRanges::parse(flags.default_opaque_ports),
            meshed_http2_client_params: parse_http2_client_params(
                flags.meshed_http2_client_params,
            )?,
            enable_ipv6: flags.enable_ipv6,
            ext_endpoint_zone_weights: flags.ext_endpoint_zone_weights,
        })
    }

    /// Whether meshed endpoints always get `opaque_transport`
    /// (`--outbound-transport-mode=transport-header`).
    pub fn force_opaque_transport(&self) -> bool {
        self.outbound_transport_mode == OutboundTransportMode::TransportHeader
    }
}

/// Parses `--meshed-http2-client-params`: JSON with snake_case keys and
/// durations as `{"seconds":N,"nanos":N}`, unknown keys ignored. An empty
/// string means "not configured".
pub fn parse_http2_client_params(json: &str) -> Result<Option<Http2Params>, ConfigError> {
    if json.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(json)
        .map(Some)
        .map_err(ConfigError::Http2Params)
}

/// `--meshed-http2-client-params`: the HTTP/2 settings meshed clients are
/// told to use (the proxy API's `Http2ClientParams`, field for field).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Http2Params {
    pub flow_control: Option<Http2FlowControl>,
    pub keep_alive: Option<Http2KeepAlive>,
    pub internals: Option<Http2Internals>,
}

/// Window sizes and adaptive flow control.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Http2FlowControl {
    pub initial_connection_window_size: u32,
    pub initial_stream_window_size: u32,
    pub adaptive_flow_control: bool,
}

/// HTTP/2 PINGs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Http2KeepAlive {
    pub interval: Option<JsonDuration>,
    pub timeout: Option<JsonDuration>,
    pub while_idle: bool,
}

/// Limits of the HTTP/2 implementation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Http2Internals {
    pub max_concurrent_reset_streams: u32,
    pub max_frame_size: u32,
    pub max_send_buf_size: u32,
}

/// A duration as the flag spells it (a protobuf `Duration`'s two fields,
/// kept as given: the proxy, not the flag parser, judges them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct JsonDuration {
    pub seconds: i64,
    pub nanos: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_mode() {
        assert_eq!(
            OutboundTransportMode::parse("transport-header"),
            OutboundTransportMode::TransportHeader
        );
        assert_eq!(
            OutboundTransportMode::parse("transparent"),
            OutboundTransportMode::Transparent
        );
        assert_eq!(
            OutboundTransportMode::parse("bogus"),
            OutboundTransportMode::Transparent
        );
    }

    #[test]
    fn defaults_from_empty_flags() {
        let cfg = TranslatorConfig::from_flags(&TranslatorFlags::default()).expect("config");
        assert_eq!(cfg, TranslatorConfig::default());
        assert_eq!(cfg.identity_trust_domain, "cluster.local");
        assert_eq!(cfg.cluster_domain, "cluster.local");
        assert_eq!(cfg.controller_namespace, "linkerd");
        assert!(cfg.enable_h2_upgrade && cfg.enable_ipv6 && !cfg.ext_endpoint_zone_weights);
        assert!(!cfg.force_opaque_transport());
    }

    #[test]
    fn flags_are_applied() {
        let cfg = TranslatorConfig::from_flags(&TranslatorFlags {
            controller_namespace: "l5d",
            identity_trust_domain: "example.org",
            cluster_domain: "k8s.local",
            enable_h2_upgrade: false,
            outbound_transport_mode: "transport-header",
            default_opaque_ports: "25,587,3306,4444,5432,6379,9300,11211",
            meshed_http2_client_params: r#"{"keep_alive":{"interval":{"seconds":10},"timeout":{"seconds":3},"while_idle":true}}"#,
            enable_ipv6: false,
            ext_endpoint_zone_weights: true,
        })
        .expect("config");
        assert_eq!(cfg.controller_namespace, "l5d");
        assert_eq!(cfg.identity_trust_domain, "example.org");
        assert_eq!(cfg.cluster_domain, "k8s.local");
        assert!(cfg.force_opaque_transport());
        assert!(cfg.default_opaque_ports.contains(11211));
        assert!(!cfg.default_opaque_ports.contains(80));
        let ka = cfg
            .meshed_http2_client_params
            .and_then(|p| p.keep_alive)
            .expect("keep alive");
        assert_eq!(ka.interval.expect("interval").seconds, 10);
        assert_eq!(ka.timeout.expect("timeout").seconds, 3);
        assert!(ka.while_idle);
    }

    #[test]
    fn http2_params_full_shape() {
        let p = parse_http2_client_params(
            r#"{"flow_control":{"initial_connection_window_size":1048576,"initial_stream_window_size":65535,"adaptive_flow_control":true},
                "internals":{"max_concurrent_reset_streams":10,"max_frame_size":16384,"max_send_buf_size":409600},
                "keep_alive":{"interval":{"seconds":1,"nanos":500000000}},
                "unknown_key":1}"#,
        )
        .expect("valid")
        .expect("configured");
        let fc = p.flow_control.expect("flow control");
        assert_eq!(fc.initial_connection_window_size, 1_048_576);
        assert_eq!(fc.initial_stream_window_size, 65535);
        assert!(fc.adaptive_flow_control);
        let i = p.internals.expect("internals");
        assert_eq!(
            (
                i.max_concurrent_reset_streams,
                i.max_frame_size,
                i.max_send_buf_size
            ),
            (10, 16384, 409_600)
        );
        let ka = p.keep_alive.expect("keep alive");
        assert_eq!(ka.interval.expect("interval").nanos, 500_000_000);
        assert!(ka.timeout.is_none());
        assert!(!ka.while_idle);

        assert_eq!(parse_http2_client_params("").expect("empty"), None);
        assert_eq!(
            parse_http2_client_params("{}").expect("empty object"),
            Some(Http2Params::default())
        );
        let err = parse_http2_client_params(r#"{"keep_alive":{"interval":"10s"}}"#)
            .expect_err("string duration");
        assert!(err.to_string().contains("meshed-http2-client-params"));
    }
}
