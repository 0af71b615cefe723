//! The destination's outside inputs: `GetDestination.path` (the authority),
//! `context_token`, whole `Get`/`GetProfile` requests as protobuf bytes,
//! and the policy link's `WatchUpdate` messages.

use arbitrary::{Arbitrary, Unstructured};
use destination::{
    core::{
        Target,
        authority::{AuthorityError, parse_target, split_host_port},
        context_token::ContextToken,
        endpoint::WorkloadRef,
    },
    grpc::request::{ProfileTarget, get_request, profile_request},
    policy_link::decode_update,
};
use linkerd2_proxy_api::destination::GetDestination;
use meridian_api::policy::v1::WatchUpdate;
use prost::Message;

/// The cluster domains tried: the default, a longer one, and a fuzzed one.
fn cluster_domain(u: &mut Unstructured<'_>) -> String {
    match u.int_in_range(0..=3u8).unwrap_or(0) {
        0 | 1 => "cluster.local".into(),
        2 => "corp.example.com".into(),
        _ => String::arbitrary(u).unwrap_or_default(),
    }
}

/// The authority a parsed target re-renders to: the port is dropped when it
/// is the default and the host needs no brackets, and a host with a `:`
/// (only possible inside brackets) is bracketed again.
pub fn render_target(target: &Target, cluster_domain: &str) -> String {
    let mut host = String::new();
    if let Some(instance) = &target.instance {
        host.push_str(instance);
        host.push('.');
    }
    host.push_str(&format!(
        "{}.{}.svc.{cluster_domain}",
        target.service.name, target.service.namespace
    ));
    if host.contains(':') {
        format!("[{host}]:{}", target.port)
    } else if target.port == 80 && (host.contains('[') || host.contains(']')) {
        // Only an authority without a port may have brackets in its host.
        host
    } else {
        format!("{host}:{}", target.port)
    }
}

/// `parse_target`: a parsed target names non-empty labels without dots and
/// a port in 1..=65535, and its rendering parses to the same target; the
/// host `split_host_port` returns is part of the input; errors say what the
/// input was.
pub fn authority(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let domain = cluster_domain(&mut u);
    let Ok(path) = <&str>::arbitrary_take_rest(u) else {
        return;
    };
    if let Ok((host, port)) = split_host_port(path) {
        assert!(path.contains(host), "{path:?}: host {host:?}");
        assert!(port >= 1, "{path:?}: port 0");
    }
    match parse_target(path, &domain) {
        Ok(target) => {
            assert_ne!(target.port, 0, "{path:?}");
            let labels = [&target.service.name, &target.service.namespace]
                .into_iter()
                .chain(target.instance.as_ref());
            for label in labels {
                assert!(
                    !label.is_empty() && !label.contains('.'),
                    "{path:?} gave label {label:?}"
                );
            }
            let rendered = render_target(&target, &domain);
            assert_eq!(
                parse_target(&rendered, &domain).as_ref(),
                Ok(&target),
                "{path:?} re-rendered as {rendered:?}"
            );
        }
        Err(error) => {
            let message = error.to_string();
            match &error {
                AuthorityError::Malformed { authority, .. }
                | AuthorityError::InvalidPort { authority, .. } => {
                    assert_eq!(authority, path);
                }
                _ => {}
            }
            assert!(!message.is_empty());
        }
    }
}

/// `ContextToken::parse` never fails, and the token it returns survives
/// being written as the proxy's JSON and parsed again.
pub fn context_token(data: &[u8]) {
    let Some(token) = crate::text(data) else {
        return;
    };
    let parsed = ContextToken::parse(token);
    let json = serde_json::json!({
        "ns": parsed.ns,
        "nodeName": parsed.node_name,
        "pod": parsed.pod,
    })
    .to_string();
    assert_eq!(ContextToken::parse(&json), parsed, "{token:?} as {json}");
}

/// A `GetDestination` as the client builds it (structure-aware mode).
#[derive(Arbitrary, Debug)]
struct Request {
    path: String,
    context_token: String,
}

/// `Get` and `GetProfile` request parsing, from protobuf bytes (first byte
/// even) or a structured request: a path `Get` accepts is a Service name
/// to `GetProfile` too, with the same port (and the same Service unless
/// the host carries brackets, which only `GetProfile` strips); an address
/// `GetProfile` accepts is refused by `Get`.
pub fn destination_request(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let request = if mode % 2 == 0 {
        match GetDestination::decode(rest) {
            Ok(request) => request,
            Err(_) => return,
        }
    } else {
        let Ok(r) = Request::arbitrary_take_rest(Unstructured::new(rest)) else {
            return;
        };
        GetDestination {
            path: r.path,
            context_token: r.context_token,
            ..Default::default()
        }
    };
    let domain = "cluster.local";
    let get = get_request(&request, domain);
    let profile = profile_request(&request, domain);
    match (&get, &profile) {
        (Ok(get), Ok(profile)) => match &profile.target {
            ProfileTarget::Name {
                service,
                instance,
                port,
            } => {
                assert_eq!(*port, get.target.port, "{request:?}");
                if !request.path.contains(['[', ']']) {
                    assert_eq!(service, &get.target.service, "{request:?}");
                    assert_eq!(instance, &get.target.instance, "{request:?}");
                }
            }
            ProfileTarget::Addr(addr) => {
                panic!("{request:?}: Get accepted what GetProfile takes as the address {addr}")
            }
        },
        (Ok(_), Err(error)) => panic!("{request:?}: Get accepted, GetProfile refused: {error}"),
        _ => {}
    }
    if let Ok(profile) = &profile {
        assert!(
            profile.client_ns() != Some(""),
            "{request:?}: empty client namespace"
        );
    }
}

/// The policy link's decoding of `WatchUpdate` bytes: every pod entry with
/// a pod reference is kept, in order, with exactly its ports that fit in a
/// `u16`; entries without a reference are dropped.
pub fn policy_link(data: &[u8]) {
    let Ok(update) = WatchUpdate::decode(data) else {
        return;
    };
    let ports = |ports: &[u32]| -> std::collections::BTreeSet<u16> {
        ports
            .iter()
            .filter(|&&port| port <= u32::from(u16::MAX))
            .map(|&port| port as u16)
            .collect()
    };
    let pods = update.pods.iter().filter_map(|p| {
        let pod = p.pod.as_ref()?;
        Some((
            WorkloadRef::Pod(pod.namespace.clone(), pod.name.clone()),
            ports(&p.ports),
        ))
    });
    let externals = update.external_workloads.iter().filter_map(|w| {
        let ew = w.external_workload.as_ref()?;
        Some((
            WorkloadRef::External(ew.namespace.clone(), ew.name.clone()),
            ports(&w.ports),
        ))
    });
    let expected: Vec<_> = pods.chain(externals).collect();
    let reset = update.reset;
    let decoded = decode_update(update);
    assert_eq!(decoded.reset, reset);
    assert_eq!(decoded.workloads, expected);
}
