//! Destination requests → what the index is asked: a `Get`'s target and
//! filter key, a `GetProfile`'s address or Service name. Pure parsing; the
//! errors are turned into gRPC statuses in [`super::status`].

use std::net::{IpAddr, SocketAddr};

use linkerd2_proxy_api::destination::GetDestination;

use crate::core::{
    FilterKey, ServiceId, Target,
    authority::{AuthorityError, parse_service_name, parse_target, split_host_port},
    context_token::ContextToken,
};

/// What a `Get` stream follows.
#[derive(Debug)]
pub struct GetRequest {
    /// The Service port asked for.
    pub target: Target,
    /// The filter group the client belongs to (its node, zone and the
    /// request's hostname decide what it sees).
    pub key: FilterKey,
    /// What the client said of itself (shown by the admin server).
    pub token: ContextToken,
}

/// Parses a `Get` request.
pub fn get_request(
    request: &GetDestination,
    cluster_domain: &str,
) -> Result<GetRequest, AuthorityError> {
    let target = parse_target(&request.path, cluster_domain)?;
    let token = ContextToken::parse(&request.context_token);
    let key = FilterKey::new(&target, &token, true);
    Ok(GetRequest { target, key, token })
}

/// What a `GetProfile` stream asks about.
#[derive(Debug, PartialEq, Eq)]
pub enum ProfileTarget {
    /// An `IP:port` (a ClusterIP, a pod IP or a host port).
    Addr(SocketAddr),
    /// A Service name, with the instance of `<instance>.<svc>.<ns>.svc…`.
    Name {
        service: ServiceId,
        instance: Option<String>,
        port: u16,
    },
}

/// A parsed `GetProfile` request.
#[derive(Debug, PartialEq, Eq)]
pub struct ProfileRequest {
    pub target: ProfileTarget,
    /// What the client said of itself.
    pub token: ContextToken,
}

impl ProfileRequest {
    /// The client's namespace from the context token (it picks a client-side
    /// ServiceProfile), if the token names one.
    pub fn client_ns(&self) -> Option<&str> {
        Some(self.token.ns.as_str()).filter(|ns| !ns.is_empty())
    }
}

/// Parses a `GetProfile` request.
pub fn profile_request(
    request: &GetDestination,
    cluster_domain: &str,
) -> Result<ProfileRequest, AuthorityError> {
    let token = ContextToken::parse(&request.context_token);
    let (host, port) = split_host_port(&request.path)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let target = match host.parse::<IpAddr>() {
        Ok(ip) => ProfileTarget::Addr(SocketAddr::new(ip, port)),
        Err(_) => {
            let (service, instance) = parse_service_name(host, cluster_domain)?;
            ProfileTarget::Name {
                service,
                instance,
                port,
            }
        }
    };
    Ok(ProfileRequest { target, token })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(path: &str, token: &str) -> GetDestination {
        GetDestination {
            path: path.into(),
            context_token: token.into(),
            ..Default::default()
        }
    }

    #[test]
    fn profile_requests_by_address_and_by_name() {
        let token = r#"{"ns":"client","nodeName":"n1"}"#;
        let by_ip =
            profile_request(&request("[fd00::1]:8080", token), "cluster.local").expect("valid");
        assert_eq!(
            by_ip.target,
            ProfileTarget::Addr("[fd00::1]:8080".parse().expect("addr"))
        );
        assert_eq!(by_ip.client_ns(), Some("client"));
        let by_name = profile_request(
            &request("web-0.web.ns.svc.cluster.local:80", ""),
            "cluster.local",
        )
        .expect("valid");
        assert_eq!(
            by_name.target,
            ProfileTarget::Name {
                service: ServiceId {
                    namespace: "ns".into(),
                    name: "web".into(),
                },
                instance: Some("web-0".into()),
                port: 80,
            }
        );
        assert_eq!(by_name.client_ns(), None);
        assert!(
            profile_request(&request("web.ns.svc.other.domain:80", ""), "cluster.local").is_err()
        );
    }

    #[test]
    fn get_requests_carry_the_clients_node() {
        let token = r#"{"ns":"client","nodeName":"n1"}"#;
        let get = get_request(
            &request("web.ns.svc.cluster.local:80", token),
            "cluster.local",
        )
        .expect("valid");
        assert_eq!(get.target.port, 80);
        assert_eq!(get.token.node_name, "n1");
        assert!(
            get_request(
                &request("web.ns.svc.other.domain:80", token),
                "cluster.local"
            )
            .is_err()
        );
    }
}
