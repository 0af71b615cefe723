//! `GetProfile` resolution and publishers, without a server: by name, by
//! ClusterIP, by pod IP, by host port, by instance, ambiguous and unknown
//! IPs; then which changes republish a profile.

use std::net::SocketAddr;

use k8s_api::service_profile::ServiceProfile;
use linkerd2_proxy_api::{destination::WeightedAddr, net::TcpAddress};

use super::*;
use crate::{
    core::ServiceTarget,
    index::{ProfileKey, ProfileLookupError},
};

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

fn service_key(name: &str, port: u16, client_ns: Option<&str>) -> ProfileKey {
    ProfileKey::Service {
        target: ServiceTarget {
            service: svc_id(name),
            port,
            fqn: format!("{name}.{NS}.svc.cluster.local"),
        },
        client_ns: client_ns.map(str::to_string),
    }
}

fn endpoint_key(s: &str) -> ProfileKey {
    ProfileKey::Endpoint(addr(s))
}

fn cluster() -> EndpointsIndex {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(pod("web-0", "10.0.0.1"));
    idx.apply(slice(
        "web-s",
        "web",
        &[("web-0", "10.0.0.1", true), ("ghost", "10.0.0.3", true)],
    ));
    idx
}

/// The endpoint a profile carries.
fn endpoint_of(idx: &mut EndpointsIndex, key: ProfileKey) -> Option<WeightedAddr> {
    idx.subscribe_profile(key).borrow().profile.endpoint.clone()
}

#[test]
fn by_name() {
    let idx = cluster();
    let web = svc_id("web");
    assert_eq!(
        idx.resolve_profile_name(&web, None, 80, Some("client")),
        Ok(service_key("web", 80, Some("client")))
    );
    assert_eq!(
        idx.resolve_profile_name(&web, None, 80, Some("")),
        Ok(service_key("web", 80, None)),
        "an empty client namespace is none"
    );
    // As the original (2.20), the Service is not looked up: an undeclared
    // port and a Service the index does not hold resolve to their
    // Service port's profile, which follows the Service into existence.
    assert_eq!(
        idx.resolve_profile_name(&web, None, 81, None),
        Ok(service_key("web", 81, None)),
    );
    assert_eq!(
        idx.resolve_profile_name(&svc_id("nope"), None, 80, None),
        Ok(service_key("nope", 80, None)),
    );

    let mut idx = index();
    let mut external = service("ext", "");
    if let Some(spec) = external.spec.as_mut() {
        spec.type_ = Some("ExternalName".into());
    }
    idx.apply(external);
    assert_eq!(
        idx.resolve_profile_name(&svc_id("ext"), None, 80, None),
        Err(ProfileLookupError::ExternalName(svc_id("ext")))
    );
}

#[test]
fn by_cluster_ip() {
    let idx = cluster();
    assert_eq!(
        idx.resolve_profile_addr(addr("10.96.0.1:80"), Some("client")),
        Ok(service_key("web", 80, Some("client")))
    );
    assert_eq!(
        idx.resolve_profile_addr(addr("10.96.0.1:81"), None),
        Ok(service_key("web", 81, None))
    );
}

#[test]
fn by_pod_ip() {
    let mut idx = cluster();
    let resolved = idx.resolve_profile_addr(addr("10.0.0.1:8080"), None);
    assert_eq!(resolved, Ok(endpoint_key("10.0.0.1:8080")));
    let wa = endpoint_of(&mut idx, ProfileKey::Endpoint(addr("10.0.0.1:8080"))).expect("endpoint");
    assert_eq!(wa.addr, Some(TcpAddress::from(addr("10.0.0.1:8080"))));
    assert_eq!(wa.weight, 10_000);
    assert_eq!(
        (
            wa.metric_labels.get("pod").map(String::as_str),
            wa.metric_labels.get("namespace").map(String::as_str)
        ),
        (Some("web-0"), Some(NS))
    );
    // As the original's profile path: no `zone_locality` (only `Get` adds
    // it, from the client's zone).
    assert!(
        !wa.metric_labels.contains_key("zone_locality"),
        "{:?}",
        wa.metric_labels
    );
}

/// A meshed pod whose proxy ports cannot be read has no endpoint profile:
/// as the original, nothing is sent until one can be made (here: the pod
/// is gone and its IP is nobody's).
#[test]
fn by_pod_ip_without_readable_proxy_ports_sends_nothing() {
    let mut idx = index();
    idx.apply(obj::<Pod>(json!({
        "metadata": {"namespace": NS, "name": "broken", "labels": {
            "app": "web", k8s_api::labels::CONTROL_PLANE_NS: "linkerd"}},
        "spec": {"nodeName": "node-1", "containers": [
            {"name": "app", "ports": [{"containerPort": 8080}]},
            {"name": "linkerd-proxy", "env": [
                {"name": "LINKERD2_PROXY_INBOUND_LISTEN_ADDR", "value": "0.0.0.0:4143"}]}]},
        "status": {"phase": "Running", "podIP": "10.0.0.9", "hostIP": "192.168.0.1"}
    })));
    let key = endpoint_key("10.0.0.9:8080");
    let rx = idx.subscribe_profile(key.clone());
    assert!(rx.borrow().frames.is_empty(), "{:?}", rx.borrow().profile);
    delete::<Pod>(&mut idx, "broken");
    let state = rx.borrow().clone();
    assert_eq!(state.frames.len(), 1);
    assert_eq!(
        state
            .profile
            .endpoint
            .as_ref()
            .map(|e| e.metric_labels.is_empty()),
        Some(true),
        "the bare address: {:?}",
        state.profile
    );
}

#[test]
fn by_host_port() {
    let mut idx = index();
    idx.apply(obj::<Pod>(json!({
        "metadata": {"namespace": NS, "name": "hp"},
        "spec": {"hostNetwork": true, "containers": [{"name": "app", "ports": [
            {"containerPort": 8080, "hostPort": 30080}
        ]}]},
        "status": {"phase": "Running", "podIP": "192.168.0.10", "hostIP": "192.168.0.10"}
    })));
    assert_eq!(
        idx.resolve_profile_addr(addr("192.168.0.10:30080"), None),
        Ok(endpoint_key("192.168.0.10:30080"))
    );
    let wa =
        endpoint_of(&mut idx, ProfileKey::Endpoint(addr("192.168.0.10:30080"))).expect("endpoint");
    assert_eq!(wa.metric_labels.get("pod").map(String::as_str), Some("hp"));
    // Another port of the host is nobody's.
    let wa =
        endpoint_of(&mut idx, ProfileKey::Endpoint(addr("192.168.0.10:30081"))).expect("endpoint");
    assert!(wa.metric_labels.is_empty(), "{wa:?}");
}

#[test]
fn by_instance() {
    let idx = cluster();
    let web = svc_id("web");
    assert_eq!(
        idx.resolve_profile_name(&web, Some("web-0"), 80, None),
        Ok(endpoint_key("10.0.0.1:80"))
    );
    assert_eq!(
        idx.resolve_profile_name(&web, Some("web-9"), 80, None),
        Err(ProfileLookupError::NoSuchInstance {
            service: web.clone(),
            hostname: "web-9".into()
        })
    );
    assert_eq!(
        idx.resolve_profile_name(&web, Some("ghost"), 80, None),
        Err(ProfileLookupError::InstanceWithoutPod {
            service: web,
            hostname: "ghost".into()
        })
    );
}

#[test]
fn ambiguous_ips() {
    let mut idx = cluster();
    idx.apply(service("twin-a", "10.96.0.9"));
    idx.apply(service("twin-b", "10.96.0.9"));
    assert_eq!(
        idx.resolve_profile_addr(addr("10.96.0.9:80"), None),
        Err(ProfileLookupError::Ambiguous(
            "10.96.0.9".parse().expect("ip")
        ))
    );
    idx.apply(pod("dup-a", "10.0.0.7"));
    idx.apply(pod("dup-b", "10.0.0.7"));
    assert_eq!(
        idx.resolve_profile_addr(addr("10.0.0.7:80"), None),
        Err(ProfileLookupError::Ambiguous(
            "10.0.0.7".parse().expect("ip")
        ))
    );
    // A finished pod no longer claims its IP.
    let mut done = pod("dup-b", "10.0.0.7");
    if let Some(status) = done.status.as_mut() {
        status.phase = Some("Succeeded".into());
    }
    idx.apply(done);
    assert_eq!(
        idx.resolve_profile_addr(addr("10.0.0.7:80"), None),
        Ok(endpoint_key("10.0.0.7:80"))
    );
}

#[test]
fn unknown_ip() {
    let mut idx = cluster();
    assert_eq!(
        idx.resolve_profile_addr(addr("10.9.9.9:80"), None),
        Ok(endpoint_key("10.9.9.9:80"))
    );
    let rx = idx.subscribe_profile(ProfileKey::Endpoint(addr("10.9.9.9:80")));
    let state = rx.borrow();
    assert_eq!(
        state.profile.endpoint,
        Some(WeightedAddr {
            addr: Some(TcpAddress::from(addr("10.9.9.9:80"))),
            weight: 10_000,
            ..Default::default()
        })
    );
    assert!(!state.profile.opaque_protocol);
}

fn service_profile(routes: usize) -> ServiceProfile {
    let routes: Vec<Value> = (0..routes)
        .map(|i| json!({"name": format!("r{i}"), "condition": {"method": "GET"}}))
        .collect();
    obj(json!({
        "apiVersion": "linkerd.io/v1alpha2", "kind": "ServiceProfile",
        "metadata": {"name": "web.ns.svc.cluster.local", "namespace": NS},
        "spec": {"routes": routes}
    }))
}

#[test]
fn profiles_republish_only_what_changed() {
    let mut idx = cluster();
    let Ok(key) = idx.resolve_profile_name(&svc_id("web"), None, 80, None) else {
        panic!("web:80 resolves to a key");
    };
    let mut service_rx = idx.subscribe_profile(key.clone());
    let mut pod_rx = idx.subscribe_profile(ProfileKey::Endpoint(addr("10.0.0.1:8080")));
    assert!(service_rx.borrow_and_update().profile.routes.is_empty());
    pod_rx.borrow_and_update();

    idx.apply(service_profile(1));
    assert!(service_rx.has_changed().expect("open"));
    assert_eq!(service_rx.borrow_and_update().profile.routes.len(), 1);
    assert!(
        !pod_rx.has_changed().expect("open"),
        "not the pod's profile"
    );

    // The same ServiceProfile again publishes nothing.
    idx.apply(service_profile(1));
    assert!(!service_rx.has_changed().expect("open"));

    // A pod edit that changes its endpoint reaches the pod's profile only.
    let mut relabeled = pod("web-0", "10.0.0.1");
    relabeled
        .metadata
        .labels
        .get_or_insert_default()
        .insert("pod-template-hash".into(), "h2".into());
    idx.apply(relabeled);
    assert!(pod_rx.has_changed().expect("open"));
    assert!(!service_rx.has_changed().expect("open"));

    delete::<ServiceProfile>(&mut idx, "web.ns.svc.cluster.local");
    assert!(service_rx.has_changed().expect("open"));
    assert!(service_rx.borrow_and_update().profile.routes.is_empty());

    // Released publishers are dropped.
    drop(service_rx);
    idx.release_profile(&key);
    let mut again = idx.subscribe_profile(key);
    assert!(again.borrow_and_update().profile.routes.is_empty());
}

/// A profile asked for before its Service exists is the default one
/// (fully qualified name, default retry budget, no opacity), and it follows
/// the Service, its opaque-ports annotation and its ServiceProfile into
/// existence, then back out when the Service goes.
#[test]
fn a_service_asked_for_before_it_exists_is_followed_into_existence() {
    let mut idx = index();
    let key = idx
        .resolve_profile_name(&svc_id("web"), None, 80, Some("client"))
        .expect("a missing Service resolves");
    let mut rx = idx.subscribe_profile(key);
    {
        let first = rx.borrow_and_update();
        let profile = &first.profile;
        assert_eq!(profile.fully_qualified_name, "web.ns.svc.cluster.local");
        assert_eq!(
            profile.retry_budget,
            Some(crate::proto::profile::default_retry_budget())
        );
        assert!(profile.routes.is_empty());
        assert!(!profile.opaque_protocol);
        let Some(linkerd2_proxy_api::meta::Metadata {
            kind: Some(linkerd2_proxy_api::meta::metadata::Kind::Resource(parent)),
        }) = &profile.parent_ref
        else {
            panic!("a parent Service: {:?}", profile.parent_ref);
        };
        assert_eq!(
            (parent.kind.as_str(), parent.name.as_str(), parent.port),
            ("Service", "web", 80)
        );
    }

    let mut opaque = service("web", "10.96.0.1");
    opaque.metadata.annotations =
        Some([(k8s_api::labels::OPAQUE_PORTS.to_string(), "80".to_string())].into());
    idx.apply(opaque);
    assert!(
        rx.has_changed().expect("open"),
        "the annotation is followed"
    );
    assert!(rx.borrow_and_update().profile.opaque_protocol);

    idx.apply(service_profile(2));
    assert!(
        rx.has_changed().expect("open"),
        "the ServiceProfile is followed"
    );
    assert_eq!(rx.borrow_and_update().profile.routes.len(), 2);

    Index::<Service>::delete(&mut idx, k8s_index::ObjectKey::new(Some(NS), "web"));
    assert!(rx.has_changed().expect("open"));
    assert!(
        !rx.borrow_and_update().profile.opaque_protocol,
        "the deleted Service's annotation no longer applies"
    );
}

#[test]
fn what_is_known_at_an_address() {
    let mut idx = cluster();
    assert!(idx.knows_profile_addr(addr("10.96.0.1:80")), "a ClusterIP");
    assert!(idx.knows_profile_addr(addr("10.0.0.1:8080")), "a pod IP");
    assert!(idx.knows_profile_addr(addr("192.168.0.1:22")), "a host IP");
    assert!(!idx.knows_profile_addr(addr("10.9.9.9:80")), "nothing");
    idx.apply(service("late", "10.96.0.42"));
    assert!(idx.knows_profile_addr(addr("10.96.0.42:80")));
}
