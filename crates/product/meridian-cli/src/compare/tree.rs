//! Answers as plain trees, by field name: each proxy-API message is
//! re-encoded and decoded against the API's descriptors (compiled from the
//! `linkerd2-proxy-api` crate's `.proto` files by the build script), so
//! every field of every message is compared, including fields added to the
//! API later.
//!
//! Normalisation happens here: proto maps are keyed (their wire order is
//! arbitrary), and the repeated fields in [`UNORDERED`] become sets, keyed
//! by what identifies an element. Every other list keeps its order, which
//! the original defines (routes sorted by creation time then name, rules,
//! matches and backends in their resource's order) and a proxy may depend
//! on. Addresses, networks and durations are rendered as text.

use std::{collections::BTreeMap, fmt};

use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MapKey, ReflectMessage, Value,
};

/// A decoded answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    /// An enum value's name (or its number when the API does not name it).
    Enum(String),
    /// A message's fields by name (unset message fields are absent).
    Fields(BTreeMap<String, Node>),
    /// A proto map, by key.
    Map(BTreeMap<String, Node>),
    /// A repeated field in the original's order.
    List(Vec<Node>),
    /// A repeated field whose order has no meaning, by element key.
    Set(BTreeMap<String, Node>),
}

/// How the elements of an unordered field are keyed.
#[derive(Clone, Copy, Debug)]
pub enum Key {
    /// By the element's `metadata` (the resource it comes from).
    Metadata,
    /// By the whole element.
    Whole,
}

/// Repeated fields compared as sets: the proxy accepts a client if any
/// authorization, network or identity matches, so their order carries no
/// meaning (the original builds authorizations from a hash map, whose
/// order is not defined).
const UNORDERED: &[(&str, Key)] = &[
    (
        "io.linkerd.proxy.inbound.Server.authorizations",
        Key::Metadata,
    ),
    ("io.linkerd.proxy.inbound.Server.server_ips", Key::Whole),
    (
        "io.linkerd.proxy.inbound.HttpRoute.authorizations",
        Key::Metadata,
    ),
    (
        "io.linkerd.proxy.inbound.GrpcRoute.authorizations",
        Key::Metadata,
    ),
    ("io.linkerd.proxy.inbound.Authz.networks", Key::Whole),
    ("io.linkerd.proxy.inbound.Network.except", Key::Whole),
    (
        "io.linkerd.proxy.inbound.Authn.PermitMeshTLS.PermitClientIdentities.identities",
        Key::Whole,
    ),
    (
        "io.linkerd.proxy.inbound.Authn.PermitMeshTLS.PermitClientIdentities.suffixes",
        Key::Whole,
    ),
    (
        "io.linkerd.proxy.inbound.HttpLocalRateLimit.Override.ClientIdentities.identities",
        Key::Whole,
    ),
];

/// The messages compare decodes.
pub mod names {
    pub const WEIGHTED_ADDR: &str = "io.linkerd.proxy.destination.WeightedAddr";
    pub const TCP_ADDRESS: &str = "io.linkerd.proxy.net.TcpAddress";
    pub const PROFILE: &str = "io.linkerd.proxy.destination.DestinationProfile";
    pub const SERVER: &str = "io.linkerd.proxy.inbound.Server";
    pub const OUTBOUND_POLICY: &str = "io.linkerd.proxy.outbound.OutboundPolicy";
}

/// Why an answer could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("the proxy API's descriptors do not decode: {0}")]
    Descriptors(#[from] prost_reflect::DescriptorError),
    #[error("the proxy API has no message {0}")]
    NoMessage(String),
    #[error("decoding {0}: {1}")]
    Message(String, prost::DecodeError),
}

/// The proxy API's descriptors.
pub struct Decoder {
    pool: DescriptorPool,
}

impl Decoder {
    pub fn new() -> Result<Self, DecodeError> {
        let bytes = include_bytes!(concat!(env!("OUT_DIR"), "/linkerd2_proxy_api.fds"));
        Ok(Self {
            pool: DescriptorPool::decode(&bytes[..])?,
        })
    }

    /// `message` (of the API type `name`) as a tree.
    pub fn decode<M: prost::Message>(&self, name: &str, message: &M) -> Result<Node, DecodeError> {
        let desc = self
            .pool
            .get_message_by_name(name)
            .ok_or_else(|| DecodeError::NoMessage(name.to_string()))?;
        let dynamic = DynamicMessage::decode(desc, message.encode_to_vec().as_slice())
            .map_err(|e| DecodeError::Message(name.to_string(), e))?;
        Ok(from_message(&dynamic))
    }
}

fn from_message(message: &DynamicMessage) -> Node {
    let desc = message.descriptor();
    match desc.full_name() {
        "io.linkerd.proxy.net.IPAddress" => {
            return ip_text(message).map_or(Node::Str(String::new()), Node::Str);
        }
        "io.linkerd.proxy.net.TcpAddress" => {
            let ip = sub_message(message, "ip").and_then(|ip| ip_text(&ip));
            let port = message
                .get_field_by_name("port")
                .and_then(|p| p.as_u32())
                .unwrap_or_default();
            return Node::Str(match ip {
                Some(ip) if ip.contains(':') => format!("[{ip}]:{port}"),
                Some(ip) => format!("{ip}:{port}"),
                None => format!("(no ip):{port}"),
            });
        }
        "io.linkerd.proxy.net.IPNetwork" => {
            let ip = sub_message(message, "ip").and_then(|ip| ip_text(&ip));
            let len = message
                .get_field_by_name("prefix_len")
                .and_then(|p| p.as_u32())
                .unwrap_or_default();
            return Node::Str(format!("{}/{len}", ip.unwrap_or_else(|| "(no ip)".into())));
        }
        "google.protobuf.Duration" => {
            let seconds = message
                .get_field_by_name("seconds")
                .and_then(|s| s.as_i64())
                .unwrap_or_default();
            let nanos = message
                .get_field_by_name("nanos")
                .and_then(|n| n.as_i32())
                .unwrap_or_default();
            return Node::Str(duration_text(seconds, nanos));
        }
        _ => {}
    }
    let mut fields = BTreeMap::new();
    for field in desc.fields() {
        if field.supports_presence() && !message.has_field(&field) {
            continue;
        }
        let value = message.get_field(&field);
        fields.insert(field.name().to_string(), from_value(&field, &value));
    }
    Node::Fields(fields)
}

fn from_value(field: &FieldDescriptor, value: &Value) -> Node {
    match value {
        Value::List(items) => {
            let nodes: Vec<Node> = items.iter().map(|v| from_single(field, v)).collect();
            match UNORDERED
                .iter()
                .find(|(name, _)| *name == field.full_name())
            {
                Some((_, key)) => set_of(nodes, *key),
                None => Node::List(nodes),
            }
        }
        Value::Map(entries) => {
            let value_field = match field.kind() {
                Kind::Message(entry) => Some(entry.map_entry_value_field()),
                _ => None,
            };
            Node::Map(
                entries
                    .iter()
                    .map(|(k, v)| {
                        let node = match &value_field {
                            Some(f) => from_single(f, v),
                            None => scalar(v),
                        };
                        (map_key(k), node)
                    })
                    .collect(),
            )
        }
        single => from_single(field, single),
    }
}

fn from_single(field: &FieldDescriptor, value: &Value) -> Node {
    match (value, field.kind()) {
        (Value::EnumNumber(n), Kind::Enum(e)) => Node::Enum(
            e.get_value(*n)
                .map_or_else(|| n.to_string(), |v| v.name().to_string()),
        ),
        (Value::Message(m), _) => from_message(m),
        (other, _) => scalar(other),
    }
}

fn scalar(value: &Value) -> Node {
    match value {
        Value::Bool(b) => Node::Bool(*b),
        Value::I32(n) => Node::Int(i64::from(*n)),
        Value::I64(n) => Node::Int(*n),
        Value::U32(n) => Node::Uint(u64::from(*n)),
        Value::U64(n) => Node::Uint(*n),
        Value::F32(f) => Node::Float(f64::from(*f)),
        Value::F64(f) => Node::Float(*f),
        Value::String(s) => Node::Str(s.clone()),
        Value::Bytes(b) => Node::Bytes(b.to_vec()),
        Value::EnumNumber(n) => Node::Enum(n.to_string()),
        Value::Message(m) => from_message(m),
        Value::List(items) => Node::List(items.iter().map(scalar).collect()),
        Value::Map(entries) => Node::Map(
            entries
                .iter()
                .map(|(k, v)| (map_key(k), scalar(v)))
                .collect(),
        ),
    }
}

fn map_key(key: &MapKey) -> String {
    match key {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
        MapKey::String(s) => s.clone(),
    }
}

fn sub_message(message: &DynamicMessage, name: &str) -> Option<DynamicMessage> {
    if !message.has_field_by_name(name) {
        return None;
    }
    match message.get_field_by_name(name)?.into_owned() {
        Value::Message(m) => Some(m),
        _ => None,
    }
}

/// An `IPAddress` as text.
fn ip_text(message: &DynamicMessage) -> Option<String> {
    if message.has_field_by_name("ipv4") {
        let v4 = message.get_field_by_name("ipv4")?.as_u32()?;
        return Some(std::net::Ipv4Addr::from(v4).to_string());
    }
    let v6 = sub_message(message, "ipv6")?;
    let half = |name: &str| v6.get_field_by_name(name).and_then(|v| v.as_u64());
    let bits = (u128::from(half("first")?) << 64) | u128::from(half("last")?);
    Some(std::net::Ipv6Addr::from(bits).to_string())
}

/// A duration as text: `10s`, `0.5s`, `-1.25s`.
pub fn duration_text(seconds: i64, nanos: i32) -> String {
    let negative = seconds < 0 || nanos < 0;
    let (s, n) = (seconds.unsigned_abs(), nanos.unsigned_abs());
    let sign = if negative { "-" } else { "" };
    if n == 0 {
        return format!("{sign}{s}s");
    }
    let frac = format!("{n:09}");
    format!("{sign}{s}.{}s", frac.trim_end_matches('0'))
}

/// Elements keyed for a set; equal keys are told apart by their position
/// among equals (`key #2`).
pub fn set_of(nodes: Vec<Node>, key: Key) -> Node {
    let mut set = BTreeMap::new();
    let mut keyed: Vec<(String, Node)> = nodes
        .into_iter()
        .map(|n| {
            let k = match key {
                Key::Metadata => match &n {
                    Node::Fields(f) => f
                        .get("metadata")
                        .map_or_else(|| n.to_string(), metadata_key),
                    _ => n.to_string(),
                },
                Key::Whole => n.to_string(),
            };
            (k, n)
        })
        .collect();
    // Equal keys in a stable order whatever the wire order was.
    keyed.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1.to_string().cmp(&b.1.to_string()))
    });
    for (k, n) in keyed {
        let mut unique = k.clone();
        let mut i = 2;
        while set.contains_key(&unique) {
            unique = format!("{k} #{i}");
            i += 1;
        }
        set.insert(unique, n);
    }
    Node::Set(set)
}

/// `default:<name>` or `<Kind>/<name>` (with the namespace, section and
/// port when set) of a `meta.Metadata`.
fn metadata_key(metadata: &Node) -> String {
    let Node::Fields(f) = metadata else {
        return metadata.to_string();
    };
    if let Some(Node::Str(name)) = f.get("default") {
        return format!("default:{name}");
    }
    let Some(Node::Fields(r)) = f.get("resource") else {
        return metadata.to_string();
    };
    let text = |k: &str| match r.get(k) {
        Some(Node::Str(s)) => s.clone(),
        _ => String::new(),
    };
    let mut key = format!("{}/", text("kind"));
    if !text("namespace").is_empty() {
        key.push_str(&format!("{}/", text("namespace")));
    }
    key.push_str(&text("name"));
    if !text("section").is_empty() {
        key.push_str(&format!(":{}", text("section")));
    }
    if let Some(Node::Uint(port)) = r.get("port").filter(|p| **p != Node::Uint(0)) {
        key.push_str(&format!(":{port}"));
    }
    key
}

impl fmt::Display for Node {
    /// Compact, one line: strings quoted, enums bare, maps and messages in braces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Bool(b) => write!(f, "{b}"),
            Node::Int(n) => write!(f, "{n}"),
            Node::Uint(n) => write!(f, "{n}"),
            Node::Float(x) => write!(f, "{x}"),
            Node::Str(s) => write!(f, "{s:?}"),
            Node::Bytes(b) => {
                write!(f, "0x")?;
                b.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
            }
            Node::Enum(e) => write!(f, "{e}"),
            Node::Fields(m) | Node::Map(m) => {
                write!(f, "{{")?;
                for (i, (k, v)) in m.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    if matches!(self, Node::Map(_)) {
                        write!(f, "{sep}{k:?}: {v}")?;
                    } else {
                        write!(f, "{sep}{k}: {v}")?;
                    }
                }
                write!(f, "}}")
            }
            Node::List(items) => {
                write!(f, "[")?;
                for (i, v) in items.iter().enumerate() {
                    write!(f, "{}{v}", if i == 0 { "" } else { ", " })?;
                }
                write!(f, "]")
            }
            Node::Set(items) => {
                // Elements keyed by something of their own show the key.
                write!(f, "[")?;
                for (i, (k, v)) in items.iter().enumerate() {
                    write!(f, "{}", if i == 0 { "" } else { ", " })?;
                    let shown = v.to_string();
                    if *k == shown {
                        write!(f, "{shown}")?;
                    } else {
                        write!(f, "{k}: {shown}")?;
                    }
                }
                write!(f, "]")
            }
        }
    }
}

impl Node {
    /// As JSON (`-o json`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Node::Bool(b) => J::Bool(*b),
            Node::Int(n) => J::from(*n),
            Node::Uint(n) => J::from(*n),
            Node::Float(x) => J::from(*x),
            Node::Str(s) | Node::Enum(s) => J::String(s.clone()),
            Node::Bytes(_) => J::String(self.to_string()),
            Node::Fields(m) | Node::Map(m) => {
                J::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
            Node::List(items) => J::Array(items.iter().map(Node::to_json).collect()),
            // Keyed by something of their own (an address, a resource): an object.
            Node::Set(items) if items.iter().any(|(k, v)| *k != v.to_string()) => J::Object(
                items
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
            Node::Set(items) => J::Array(items.values().map(Node::to_json).collect()),
        }
    }

    /// A message of these fields (for tests).
    #[cfg(test)]
    pub fn fields(entries: &[(&str, Node)]) -> Node {
        Node::Fields(
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    /// A message's field, if this is a message that has it.
    pub fn field(&self, name: &str) -> Option<&Node> {
        match self {
            Node::Fields(f) => f.get(name),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use linkerd2_proxy_api::{
        destination::{ProtocolHint, WeightedAddr, protocol_hint},
        inbound::{self, Authz, Network, authn},
        net::{IpAddress, IpNetwork, TcpAddress, ip_address},
    };

    use super::*;

    fn decoder() -> Decoder {
        Decoder::new().expect("descriptors")
    }

    fn v4(ip: [u8; 4]) -> IpAddress {
        IpAddress {
            ip: Some(ip_address::Ip::Ipv4(u32::from_be_bytes(ip))),
        }
    }

    fn authz(name: &str, nets: &[[u8; 4]]) -> Authz {
        Authz {
            networks: nets
                .iter()
                .map(|n| Network {
                    net: Some(IpNetwork {
                        ip: Some(v4(*n)),
                        prefix_len: 8,
                    }),
                    except: vec![],
                })
                .collect(),
            authentication: Some(inbound::Authn {
                permit: Some(authn::Permit::Unauthenticated(
                    authn::PermitUnauthenticated {},
                )),
            }),
            labels: [("name".to_string(), name.to_string())].into(),
            metadata: Some(crate::test_messages::authorization_policy(name)),
        }
    }

    #[test]
    fn fields_by_name_addresses_as_text_enums_and_oneofs() {
        let addr = WeightedAddr {
            addr: Some(TcpAddress {
                ip: Some(v4([10, 0, 0, 7])),
                port: 8080,
            }),
            weight: 10000,
            metric_labels: [("pod".to_string(), "web-0".to_string())].into(),
            protocol_hint: Some(ProtocolHint {
                protocol: Some(protocol_hint::Protocol::H2(protocol_hint::H2 {})),
                opaque_transport: None,
            }),
            ..Default::default()
        };
        let node = decoder()
            .decode(names::WEIGHTED_ADDR, &addr)
            .expect("decode");
        assert_eq!(
            node.to_string(),
            r#"{addr: "10.0.0.7:8080", metric_labels: {"pod": "web-0"}, protocol_hint: {h2: {}}, weight: 10000}"#
        );
    }

    #[test]
    fn authorizations_and_networks_are_sets_and_maps_ignore_wire_order() {
        let server = |authz: Vec<Authz>| inbound::Server {
            authorizations: authz,
            labels: [("a", "1"), ("b", "2")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        let d = decoder();
        let one = d
            .decode(
                names::SERVER,
                &server(vec![
                    authz("x", &[[10, 0, 0, 0], [192, 0, 0, 0]]),
                    authz("y", &[]),
                ]),
            )
            .expect("decode");
        let two = d
            .decode(
                names::SERVER,
                &server(vec![
                    authz("y", &[]),
                    authz("x", &[[192, 0, 0, 0], [10, 0, 0, 0]]),
                ]),
            )
            .expect("decode");
        assert_eq!(one, two);
        let Some(Node::Set(authorizations)) = one.field("authorizations") else {
            panic!("{one}");
        };
        assert_eq!(
            authorizations.keys().collect::<Vec<_>>(),
            ["AuthorizationPolicy/x", "AuthorizationPolicy/y"]
        );
    }

    #[test]
    fn ordered_lists_keep_their_order() {
        use linkerd2_proxy_api::destination::{DestinationProfile, Route};
        let route = |label: &str| Route {
            metrics_labels: [("route".to_string(), label.to_string())].into(),
            ..Default::default()
        };
        let d = decoder();
        let ab = DestinationProfile {
            routes: vec![route("a"), route("b")],
            ..Default::default()
        };
        let ba = DestinationProfile {
            routes: vec![route("b"), route("a")],
            ..Default::default()
        };
        assert_ne!(
            d.decode(names::PROFILE, &ab).expect("decode"),
            d.decode(names::PROFILE, &ba).expect("decode")
        );
    }

    #[test]
    fn durations_and_ipv6_as_text() {
        assert_eq!(duration_text(10, 0), "10s");
        assert_eq!(duration_text(0, 500_000_000), "0.5s");
        assert_eq!(duration_text(-1, -250_000_000), "-1.25s");
        let addr = TcpAddress {
            ip: Some(IpAddress {
                ip: Some(ip_address::Ip::Ipv6(linkerd2_proxy_api::net::IPv6 {
                    first: 0xfd00_0000_0000_0000,
                    last: 1,
                })),
            }),
            port: 80,
        };
        let update = linkerd2_proxy_api::destination::Update {
            update: Some(linkerd2_proxy_api::destination::update::Update::Remove(
                linkerd2_proxy_api::destination::AddrSet { addrs: vec![addr] },
            )),
        };
        let node = decoder()
            .decode("io.linkerd.proxy.destination.Update", &update)
            .expect("decode");
        assert_eq!(node.to_string(), r#"{remove: {addrs: ["[fd00::1]:80"]}}"#);
    }
}
