//! Matching a client's source address: a CIDR minus exceptions.

use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// Matches client addresses in `net` but not in any of `except`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetworkMatch {
    pub net: IpNet,
    pub except: Vec<IpNet>,
}

/// A string that is neither a CIDR nor an IP address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid network {0:?}: expected a CIDR such as 10.0.0.0/8 or an IP address")]
pub struct InvalidNetwork(pub String);

impl NetworkMatch {
    /// All IPv4 and IPv6 addresses.
    pub fn all() -> Vec<Self> {
        vec![
            Self::from(IpNet::V4(Ipv4Net::default())),
            Self::from(IpNet::V6(Ipv6Net::default())),
        ]
    }

    /// Parses a `cidr` and its `except` list (a bare IP is a host network).
    pub fn parse<'a>(
        cidr: &str,
        except: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, InvalidNetwork> {
        Ok(Self {
            net: parse_net(cidr)?,
            except: except
                .into_iter()
                .map(parse_net)
                .collect::<Result<_, _>>()?,
        })
    }
}

impl From<IpNet> for NetworkMatch {
    fn from(net: IpNet) -> Self {
        Self {
            net,
            except: Vec::new(),
        }
    }
}

fn parse_net(s: &str) -> Result<IpNet, InvalidNetwork> {
    let s = s.trim();
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| InvalidNetwork(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cidrs_and_bare_addresses() {
        let m = NetworkMatch::parse("10.0.0.0/8", ["10.1.0.0/16", "10.2.3.4"]).expect("valid");
        assert_eq!(m.net.to_string(), "10.0.0.0/8");
        assert_eq!(m.except[1].to_string(), "10.2.3.4/32");
        assert!(NetworkMatch::parse("10.0.0.0/33", []).is_err());
        assert!(NetworkMatch::parse("10.0.0.0/8", ["nope"]).is_err());
        assert_eq!(
            NetworkMatch::all()
                .iter()
                .map(|n| n.net.to_string())
                .collect::<Vec<_>>(),
            ["0.0.0.0/0", "::/0"]
        );
    }
}
