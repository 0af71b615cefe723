//! Endpoint → `WeightedAddr`: the address, weight, metric labels, protocol
//! hint, TLS identity and HTTP/2 parameters a proxy receives for one endpoint.

use std::net::SocketAddr;

use linkerd2_proxy_api::destination::{
    AuthorityOverride, Http2ClientParams, ProtocolHint, TlsIdentity, WeightedAddr,
    http2_client_params, protocol_hint, tls_identity,
};
use linkerd2_proxy_api::net::TcpAddress;

use crate::config::{Http2Params, JsonDuration, TranslatorConfig};
use crate::core::endpoint::{Endpoint, ExternalWorkloadInfo, PodInfo, ProxyPortError, Workload};

/// Weight of every endpoint (×10 with zone weights in the client's zone).
pub const DEFAULT_WEIGHT: u32 = 10_000;

/// Why an endpoint cannot be sent (it is dropped, with a log line).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// A meshed pod's proxy ports could not be read.
    #[error("pod {namespace}/{pod}: {source}")]
    ProxyPort {
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        pod: String,
        /// What was wrong.
        #[source]
        source: ProxyPortError,
    },
}

/// Builds the `WeightedAddr` `Get` sends for an endpoint, as seen by a
/// client in `client_zone` (the client node's zone, if known): the
/// endpoint's own fields and its `zone_locality` label.
pub fn weighted_addr(
    ep: &Endpoint,
    cfg: &TranslatorConfig,
    client_zone: Option<&str>,
) -> Result<WeightedAddr, TranslateError> {
    let mut wa = endpoint_addr(ep, cfg)?;
    let client_zone = client_zone.filter(|z| !z.is_empty());
    let locality = match (client_zone, ep.zone.as_deref()) {
        (Some(client), Some(zone)) if client == zone => {
            if cfg.ext_endpoint_zone_weights {
                wa.weight *= 10;
            }
            "local"
        }
        (Some(_), Some(_)) => "remote",
        _ => "unknown",
    };
    wa.metric_labels
        .insert("zone_locality".into(), locality.into());
    Ok(wa)
}

/// The `WeightedAddr` of an endpoint whatever the client's zone: what an
/// endpoint profile (`GetProfile` by a pod's IP) carries. It has no
/// `zone_locality`: the original's profile path does not add one.
pub fn endpoint_addr(
    ep: &Endpoint,
    cfg: &TranslatorConfig,
) -> Result<WeightedAddr, TranslateError> {
    let mut wa = WeightedAddr {
        addr: Some(TcpAddress::from(ep.addr)),
        weight: DEFAULT_WEIGHT,
        ..WeightedAddr::default()
    };
    match &ep.workload {
        Workload::Pod(pod) => fill_pod(&mut wa, ep, pod, cfg)?,
        Workload::External(ew) => fill_external(&mut wa, ep, ew, OwnerCase::Lower, cfg),
        Workload::Gateway(gw) => {
            wa.authority_override = gw.authority_override.as_ref().map(|a| AuthorityOverride {
                authority_override: a.clone(),
            });
            if let Some(id) = &gw.identity {
                wa.tls_identity = Some(TlsIdentity {
                    strategy: Some(tls_identity::Strategy::DnsLikeIdentity(
                        tls_identity::DnsLikeIdentity { name: id.clone() },
                    )),
                    server_name: None,
                });
                if cfg.enable_h2_upgrade {
                    wa.protocol_hint = Some(ProtocolHint {
                        protocol: Some(protocol_hint::Protocol::H2(protocol_hint::H2 {})),
                        opaque_transport: None,
                    });
                }
                wa.http2 = cfg
                    .meshed_http2_client_params
                    .as_ref()
                    .map(http2_client_params);
            }
        }
    }

    Ok(wa)
}

fn fill_pod(
    wa: &mut WeightedAddr,
    ep: &Endpoint,
    pod: &PodInfo,
    cfg: &TranslatorConfig,
) -> Result<(), TranslateError> {
    let port = ep.addr.port();
    let labels = &mut wa.metric_labels;
    labels.insert("pod".into(), pod.name.to_string());
    labels.insert(pod.owner.key.clone(), pod.owner.name.clone());
    labels.insert(
        "serviceaccount".into(),
        pod.spec.service_account.to_string(),
    );
    if let Some(cp) = &pod.spec.control_plane_ns {
        labels.insert("control_plane_ns".into(), cp.to_string());
    }
    if let Some(hash) = &pod.spec.pod_template_hash {
        labels.insert("pod_template_hash".into(), hash.to_string());
    }
    labels.insert("zone".into(), ep.zone.clone().unwrap_or_default());

    let proxy_err = |source: &ProxyPortError| TranslateError::ProxyPort {
        namespace: pod.namespace.to_string(),
        pod: pod.name.to_string(),
        source: source.clone(),
    };
    let skipped = pod.spec.skip_inbound_ports.contains(port);
    if pod.spec.control_plane_ns.is_some() && !skipped {
        wa.http2 = cfg
            .meshed_http2_client_params
            .as_ref()
            .map(http2_client_params);
        let admin = pod.spec.proxy_ports.admin.as_ref().map_err(proxy_err)?;
        let control = pod.spec.proxy_ports.control.as_ref().map_err(proxy_err)?;
        let opaque = pod.is_opaque(port, cfg) || ep.opaque_by_server;
        let is_meta_port = port == *admin || port == *control;
        let mut hint = ProtocolHint::default();
        if !is_meta_port && (cfg.force_opaque_transport() || opaque) {
            let inbound = pod.spec.proxy_ports.inbound.as_ref().map_err(proxy_err)?;
            hint.opaque_transport = Some(protocol_hint::OpaqueTransport {
                inbound_port: u32::from(*inbound),
            });
        }
        if opaque {
            hint.protocol = Some(protocol_hint::Protocol::Opaque(protocol_hint::Opaque {}));
        } else if cfg.enable_h2_upgrade {
            hint.protocol = Some(protocol_hint::Protocol::H2(protocol_hint::H2 {}));
        }
        wa.protocol_hint = Some(hint);
    }

    if let Some(cp) = &pod.spec.control_plane_ns
        && !cfg.identity_trust_domain.is_empty()
        && **cp == *cfg.controller_namespace
        && !skipped
    {
        let id = tls_identity::DnsLikeIdentity {
            name: crate::core::mesh_identity(
                &pod.spec.service_account,
                &pod.namespace,
                cp,
                &cfg.identity_trust_domain,
            ),
        };
        wa.tls_identity = Some(TlsIdentity {
            strategy: Some(tls_identity::Strategy::DnsLikeIdentity(id.clone())),
            server_name: Some(id),
        });
    }
    Ok(())
}

/// How an ExternalWorkload's owner kind is spelled as a label key: the
/// original lowercases it on `Get` but not on `GetProfile` endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerCase {
    /// `Get`: `deployment: name`.
    Lower,
    /// `GetProfile`: `Deployment: name`, as written in the reference.
    AsWritten,
}

/// An ExternalWorkload's fields: always meshed (HTTP/2 parameters, an H2
/// hint unless opaque), its SPIFFE identity and server name, and its
/// proxy's inbound port for opaque transport.
pub fn fill_external(
    wa: &mut WeightedAddr,
    ep: &Endpoint,
    ew: &ExternalWorkloadInfo,
    owner_case: OwnerCase,
    cfg: &TranslatorConfig,
) {
    let port = ep.addr.port();
    let labels = &mut wa.metric_labels;
    labels.insert("external_workload".into(), ew.name.clone());
    if let Some(owner) = ew
        .owner
        .as_ref()
        .filter(|o| !o.kind.is_empty() && !o.name.is_empty())
    {
        let key = match owner_case {
            OwnerCase::Lower => owner.kind.to_ascii_lowercase(),
            OwnerCase::AsWritten => owner.kind.clone(),
        };
        labels.insert(key, owner.name.clone());
    }
    labels.insert("zone".into(), ep.zone.clone().unwrap_or_default());

    wa.http2 = cfg
        .meshed_http2_client_params
        .as_ref()
        .map(http2_client_params);
    let opaque = ew.is_opaque(port, cfg) || ep.opaque_by_server;
    let mut hint = ProtocolHint::default();
    if cfg.force_opaque_transport() || opaque {
        hint.opaque_transport = Some(protocol_hint::OpaqueTransport {
            inbound_port: u32::from(ew.proxy_inbound_port),
        });
    }
    hint.protocol = Some(if opaque {
        protocol_hint::Protocol::Opaque(protocol_hint::Opaque {})
    } else {
        protocol_hint::Protocol::H2(protocol_hint::H2 {})
    });
    wa.protocol_hint = Some(hint);
    wa.tls_identity = Some(TlsIdentity {
        strategy: Some(tls_identity::Strategy::UriLikeIdentity(
            tls_identity::UriLikeIdentity {
                uri: ew.identity.clone(),
            },
        )),
        server_name: Some(tls_identity::DnsLikeIdentity {
            name: ew.server_name.clone(),
        }),
    });
}

/// The `WeightedAddr` of an address nothing is known about.
pub fn bare_addr(addr: SocketAddr) -> WeightedAddr {
    WeightedAddr {
        addr: Some(TcpAddress::from(addr)),
        weight: DEFAULT_WEIGHT,
        ..Default::default()
    }
}

/// `--meshed-http2-client-params` as the proxy API spells it.
fn http2_client_params(params: &Http2Params) -> Http2ClientParams {
    let duration = |d: JsonDuration| prost_types::Duration {
        seconds: d.seconds,
        nanos: d.nanos,
    };
    Http2ClientParams {
        flow_control: params
            .flow_control
            .as_ref()
            .map(|f| http2_client_params::FlowControl {
                initial_connection_window_size: f.initial_connection_window_size,
                initial_stream_window_size: f.initial_stream_window_size,
                adaptive_flow_control: f.adaptive_flow_control,
            }),
        keep_alive: params
            .keep_alive
            .as_ref()
            .map(|k| http2_client_params::KeepAlive {
                interval: k.interval.map(duration),
                timeout: k.timeout.map(duration),
                while_idle: k.while_idle,
            }),
        internals: params
            .internals
            .as_ref()
            .map(|i| http2_client_params::Internals {
                max_concurrent_reset_streams: i.max_concurrent_reset_streams,
                max_frame_size: i.max_frame_size,
                max_send_buf_size: i.max_send_buf_size,
            }),
    }
}
