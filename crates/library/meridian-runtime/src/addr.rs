//! Listen addresses as operators write them: `:PORT` (every interface, as
//! Go's `net.Listen` reads it), `HOST:PORT`, `IPV4:PORT` and `[IPV6]:PORT`
//! (`0.0.0.0:PORT` and `[::]:PORT` included).
//!
//! Every address flag of every binary goes through [`parse_listen_addr`], so
//! they all accept the same forms. `:PORT` becomes `[::]:PORT` when the host
//! has IPv6 (on Linux that socket also accepts IPv4 unless the sysctl
//! `net.ipv6.bindv6only` is set), and `0.0.0.0:PORT` when it has not.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs},
    sync::OnceLock,
};

/// Why a listen address was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    /// The port is not a number from 0 to 65535.
    #[error("invalid address {addr:?}: port {port:?} is not a number from 0 to 65535")]
    Port {
        /// The whole address as given.
        addr: String,
        /// The port part.
        port: String,
    },
    /// No `:PORT` part.
    #[error("invalid address {0:?}: expected :PORT, HOST:PORT or [IPV6]:PORT")]
    Shape(String),
    /// An IPv6 address without brackets (`::1:80` is ambiguous).
    #[error("invalid address {0:?}: write IPv6 addresses in brackets, as [IPV6]:PORT")]
    Brackets(String),
    /// The host name does not resolve.
    #[error("invalid address {addr:?}: host {host:?} does not resolve: {reason}")]
    Resolve {
        /// The whole address as given.
        addr: String,
        /// The host part.
        host: String,
        /// The resolver's answer.
        reason: String,
    },
}

/// Parses a listen address; usable as a clap `value_parser`.
pub fn parse_listen_addr(addr: &str) -> Result<SocketAddr, AddrError> {
    let addr = addr.trim();
    if let Some(port) = addr.strip_prefix(':') {
        if port.contains(':') {
            return Err(AddrError::Brackets(addr.to_string()));
        }
        return Ok(SocketAddr::new(all_interfaces(), parse_port(addr, port)?));
    }
    if let Ok(socket) = addr.parse::<SocketAddr>() {
        return Ok(socket);
    }
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(AddrError::Shape(addr.to_string()));
    };
    if host.contains(':') {
        return Err(if host.starts_with('[') {
            AddrError::Shape(addr.to_string())
        } else {
            AddrError::Brackets(addr.to_string())
        });
    }
    let port = parse_port(addr, port)?;
    if host.is_empty() || host.starts_with('[') {
        return Err(AddrError::Shape(addr.to_string()));
    }
    let resolved: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|error| AddrError::Resolve {
            addr: addr.to_string(),
            host: host.to_string(),
            reason: error.to_string(),
        })?
        .collect();
    // As Go's listener does, prefer an IPv4 address of a name.
    resolved
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| resolved.first())
        .copied()
        .ok_or_else(|| AddrError::Resolve {
            addr: addr.to_string(),
            host: host.to_string(),
            reason: "no addresses".to_string(),
        })
}

fn parse_port(addr: &str, port: &str) -> Result<u16, AddrError> {
    let valid = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    valid
        .then(|| port.parse::<u16>().ok())
        .flatten()
        .ok_or_else(|| AddrError::Port {
            addr: addr.to_string(),
            port: port.to_string(),
        })
}

/// The unspecified address of the family that covers every interface here.
pub fn all_interfaces() -> IpAddr {
    static IPV6: OnceLock<bool> = OnceLock::new();
    let ipv6 = *IPV6.get_or_init(|| {
        std::net::TcpListener::bind(SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), 0)).is_ok()
    });
    if ipv6 {
        Ipv6Addr::UNSPECIFIED.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> SocketAddr {
        parse_listen_addr(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn port_only_is_every_interface() {
        let a = ok(":8086");
        assert_eq!(a.port(), 8086);
        assert!(a.ip().is_unspecified(), "{a}");
        assert_eq!(a.ip(), all_interfaces());
        assert_eq!(ok(":0").port(), 0);
    }

    #[test]
    fn explicit_ips() {
        assert_eq!(ok("0.0.0.0:9990"), "0.0.0.0:9990".parse().expect("v4"));
        assert_eq!(ok("[::]:9990"), "[::]:9990".parse().expect("v6"));
        assert_eq!(ok("127.0.0.1:1"), "127.0.0.1:1".parse().expect("v4"));
        assert_eq!(ok("[::1]:8443"), "[::1]:8443".parse().expect("v6"));
        assert_eq!(ok("[fd00::1]:65535").port(), 65535);
        assert_eq!(ok(" :9996 ").port(), 9996);
    }

    #[test]
    fn host_names_resolve() {
        let a = ok("localhost:9997");
        assert!(a.ip().is_loopback(), "{a}");
        assert_eq!(a.port(), 9997);
    }

    #[test]
    fn refusals_say_why() {
        for (input, want) in [
            ("8086", "expected :PORT, HOST:PORT or [IPV6]:PORT"),
            ("", "expected :PORT"),
            (":", "port \"\" is not a number"),
            (":http", "port \"http\" is not a number"),
            (":65536", "port \"65536\" is not a number"),
            (":-1", "port \"-1\" is not a number"),
            ("[::1]", "expected :PORT"),
            ("::1:80", "write IPv6 addresses in brackets"),
            ("[::1:80", "expected :PORT"),
            ("0.0.0.0:", "port \"\" is not a number"),
        ] {
            let err = parse_listen_addr(input).expect_err(input).to_string();
            assert!(err.contains(want), "{input:?}: {err}");
        }
    }
}
