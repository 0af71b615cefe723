//! Translator configuration decided by the command-line flags, and the port-list
//! parser shared by `--default-opaque-ports` and the pod annotations
//! `config.linkerd.io/opaque-ports` / `config.linkerd.io/skip-inbound-ports`.

use linkerd2_proxy_api::destination::{Http2ClientParams, http2_client_params};
use serde::Deserialize;
use std::fmt;

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
    /// A port-list entry is neither a port, a range nor a known name.
    #[error("invalid port list entry {entry:?}: {reason}")]
    PortEntry {
        /// The offending entry, trimmed.
        entry: String,
        /// Why it was rejected.
        reason: &'static str,
    },
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

/// A set of TCP ports, stored as sorted, merged inclusive ranges so that
/// `0-65535` stays small.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PortSet {
    ranges: Vec<(u16, u16)>,
}

impl PortSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a set from inclusive ranges (in any order, possibly overlapping).
    pub fn from_ranges(ranges: impl IntoIterator<Item = (u16, u16)>) -> Self {
        let mut ranges: Vec<(u16, u16)> = ranges
            .into_iter()
            .map(|(a, b)| if a <= b { (a, b) } else { (b, a) })
            .collect();
        ranges.sort_unstable();
        let mut merged: Vec<(u16, u16)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if u32::from(lo) <= u32::from(last.1) + 1 => {
                    last.1 = last.1.max(hi);
                }
                _ => merged.push((lo, hi)),
            }
        }
        Self { ranges: merged }
    }

    /// Parses a flag such as `"25,587,3306-3310"`. Invalid entries are skipped
    /// with a warning, as the original does; named ports are not allowed here.
    pub fn parse(list: &str) -> Self {
        parse_port_list(list, &|_| None)
    }

    /// Whether `port` is in the set.
    pub fn contains(&self, port: u16) -> bool {
        self.ranges
            .binary_search_by(|&(lo, hi)| {
                if hi < port {
                    std::cmp::Ordering::Less
                } else if lo > port {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }

    /// Whether the set has no port.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The merged inclusive ranges, ascending.
    pub fn ranges(&self) -> &[(u16, u16)] {
        &self.ranges
    }
}

impl fmt::Display for PortSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (lo, hi)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

/// Parses one entry of a port list: a port (`80`) or an inclusive range
/// (`3306-3310`). Ports are 0..=65535, as in the original.
pub fn parse_port_range(entry: &str) -> Result<(u16, u16), ConfigError> {
    let err = |reason| ConfigError::PortEntry {
        entry: entry.to_string(),
        reason,
    };
    let mut bounds = entry.split('-');
    let lower = bounds.next().unwrap_or_default();
    let upper = bounds.next();
    if bounds.next().is_some() {
        return Err(err("ranges are written <lower>-<upper>"));
    }
    let lower = parse_port_number(lower).ok_or_else(|| err("lower bound is not a valid port"))?;
    let upper = match upper {
        None => lower,
        Some(upper) => {
            parse_port_number(upper).ok_or_else(|| err("upper bound is not a valid port"))?
        }
    };
    if upper < lower {
        return Err(err("upper bound is below lower bound"));
    }
    Ok((lower, upper))
}

/// A decimal port number, with an optional leading `+` like Go's `Atoi`.
fn parse_port_number(s: &str) -> Option<u16> {
    let digits = s.strip_prefix('+').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u16>().ok()
}

/// Parses a comma-separated port list as used by `--default-opaque-ports` and
/// the `config.linkerd.io/opaque-ports` / `skip-inbound-ports` annotations.
///
/// Entries are trimmed, one trailing comma is tolerated, an entry that names a
/// port (`named` returns its number) is taken as that port, and anything else
/// must be a port or range; invalid entries are skipped with a warning. An empty
/// list is the empty set.
pub fn parse_port_list(list: &str, named: &dyn Fn(&str) -> Option<u16>) -> PortSet {
    if list.is_empty() {
        return PortSet::new();
    }
    let list = list.strip_suffix(',').unwrap_or(list);
    let mut ranges = Vec::new();
    for entry in list.split(',').map(str::trim) {
        if let Some(port) = named(entry) {
            ranges.push((port, port));
            continue;
        }
        match parse_port_range(entry) {
            Ok(range) => ranges.push(range),
            Err(error) => tracing::warn!(%error, "skipping invalid port list entry"),
        }
    }
    PortSet::from_ranges(ranges)
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
    pub default_opaque_ports: PortSet,
    /// `--meshed-http2-client-params`, sent as `http2` on meshed endpoints.
    pub meshed_http2_client_params: Option<Http2ClientParams>,
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
            default_opaque_ports: PortSet::new(),
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
            default_opaque_ports: PortSet::parse(flags.default_opaque_ports),
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
pub fn parse_http2_client_params(json: &str) -> Result<Option<Http2ClientParams>, ConfigError> {
    if json.is_empty() {
        return Ok(None);
    }
    let raw: RawHttp2Params = serde_json::from_str(json).map_err(ConfigError::Http2Params)?;
    Ok(Some(raw.into()))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawHttp2Params {
    flow_control: Option<RawFlowControl>,
    keep_alive: Option<RawKeepAlive>,
    internals: Option<RawInternals>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawFlowControl {
    initial_connection_window_size: u32,
    initial_stream_window_size: u32,
    adaptive_flow_control: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawKeepAlive {
    interval: Option<RawDuration>,
    timeout: Option<RawDuration>,
    while_idle: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawInternals {
    max_concurrent_reset_streams: u32,
    max_frame_size: u32,
    max_send_buf_size: u32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawDuration {
    seconds: i64,
    nanos: i32,
}

impl From<RawDuration> for prost_types::Duration {
    fn from(d: RawDuration) -> Self {
        Self {
            seconds: d.seconds,
            nanos: d.nanos,
        }
    }
}

impl From<RawHttp2Params> for Http2ClientParams {
    fn from(raw: RawHttp2Params) -> Self {
        Self {
            flow_control: raw.flow_control.map(|f| http2_client_params::FlowControl {
                initial_connection_window_size: f.initial_connection_window_size,
                initial_stream_window_size: f.initial_stream_window_size,
                adaptive_flow_control: f.adaptive_flow_control,
            }),
            keep_alive: raw.keep_alive.map(|k| http2_client_params::KeepAlive {
                interval: k.interval.map(Into::into),
                timeout: k.timeout.map(Into::into),
                while_idle: k.while_idle,
            }),
            internals: raw.internals.map(|i| http2_client_params::Internals {
                max_concurrent_reset_streams: i.max_concurrent_reset_streams,
                max_frame_size: i.max_frame_size,
                max_send_buf_size: i.max_send_buf_size,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_set_parses_ports_and_ranges() {
        let set = PortSet::parse("25,587,3306-3310");
        for p in [25, 587, 3306, 3308, 3310] {
            assert!(set.contains(p), "{p}");
        }
        for p in [24, 26, 3305, 3311, 0] {
            assert!(!set.contains(p), "{p}");
        }
        assert_eq!(set.to_string(), "25,587,3306-3310");
    }

    #[test]
    fn port_set_merges_and_tolerates_noise() {
        let set = PortSet::parse(" 10-20 , 15-30,31,abc,5-1,1-2-3,,99999,");
        assert_eq!(set.ranges(), &[(10, 31)]);
        assert!(PortSet::parse("").is_empty());
        assert!(PortSet::parse(",").is_empty());
        let all = PortSet::parse("0-65535");
        assert!(all.contains(0) && all.contains(65535));
        assert_eq!(all.ranges().len(), 1);
    }

    #[test]
    fn port_list_resolves_names() {
        let named = |n: &str| match n {
            "http" => Some(8080),
            "admin" => Some(9990),
            _ => None,
        };
        let set = parse_port_list("http, 3306, admin, nope", &named);
        assert_eq!(set.ranges(), &[(3306, 3306), (8080, 8080), (9990, 9990)]);
    }

    #[test]
    fn port_range_errors_name_the_entry() {
        let err = parse_port_range("9-3").expect_err("inverted range");
        assert!(err.to_string().contains("\"9-3\""), "{err}");
        assert!(parse_port_range("").is_err());
        assert!(parse_port_range("-5").is_err());
        assert_eq!(parse_port_range("+80").expect("plus sign"), (80, 80));
    }

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
            Some(Http2ClientParams::default())
        );
        let err = parse_http2_client_params(r#"{"keep_alive":{"interval":"10s"}}"#)
            .expect_err("string duration");
        assert!(err.to_string().contains("meshed-http2-client-params"));
    }
}
