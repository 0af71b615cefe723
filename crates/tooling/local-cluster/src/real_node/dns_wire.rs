//! A minimal DNS client for checking the node's cluster DNS from the host:
//! one question (A or SRV) over UDP to a given server, the answer's code and
//! records decoded. Pure encoding and decoding, tested here; [`query`] sends
//! it (only ever to the node's own Service address or loopback).

use std::{
    net::{Ipv4Addr, SocketAddr},
    time::Duration,
};

/// The record types asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryType {
    A,
    Srv,
}

impl QueryType {
    fn code(self) -> u16 {
        match self {
            QueryType::A => 1,
            QueryType::Srv => 33,
        }
    }
}

/// `NOERROR`, `NXDOMAIN` and `REFUSED` as DNS response codes.
pub const NOERROR: u8 = 0;
pub const NXDOMAIN: u8 = 3;
pub const REFUSED: u8 = 5;

/// One SRV record's data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Srv {
    pub priority: u16,
    pub weight: u16,
    pub port: u16,
    pub target: String,
}

/// What the server answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// The response code (`NOERROR`, `NXDOMAIN`, `REFUSED`, …).
    pub rcode: u8,
    /// Whether the server is authoritative for the name (the `AA` bit).
    pub authoritative: bool,
    /// The A records of the answer section.
    pub addresses: Vec<Ipv4Addr>,
    /// The SRV records of the answer section.
    pub srv: Vec<Srv>,
}

/// Why a message could not be built or read.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("invalid name {0:?}")]
    Name(String),
    #[error("truncated or malformed DNS message")]
    Malformed,
    #[error("the answer is for query {got}, not {want}")]
    WrongId { want: u16, got: u16 },
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// A query for `name` (absolute or not; a final dot is implied) with
/// recursion desired, as a stub resolver sends it.
pub fn encode_query(id: u16, name: &str, qtype: QueryType) -> Result<Vec<u8>, WireError> {
    let mut message = Vec::with_capacity(64);
    message.extend_from_slice(&id.to_be_bytes());
    message.extend_from_slice(&0x0100u16.to_be_bytes()); // RD
    message.extend_from_slice(&1u16.to_be_bytes()); // QDCOUNT
    message.extend_from_slice(&[0; 6]); // AN, NS, AR
    for label in name.trim_end_matches('.').split('.') {
        let len = u8::try_from(label.len())
            .ok()
            .filter(|len| (1..=63).contains(len))
            .ok_or_else(|| WireError::Name(name.to_string()))?;
        message.push(len);
        message.extend_from_slice(label.as_bytes());
    }
    message.push(0);
    message.extend_from_slice(&qtype.code().to_be_bytes());
    message.extend_from_slice(&1u16.to_be_bytes()); // IN
    Ok(message)
}

/// Reads a response to query `id`.
pub fn decode_answer(id: u16, message: &[u8]) -> Result<Answer, WireError> {
    let u16_at = |at: usize| -> Result<u16, WireError> {
        message
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or(WireError::Malformed)
    };
    let got = u16_at(0)?;
    if got != id {
        return Err(WireError::WrongId { want: id, got });
    }
    let flags = u16_at(2)?;
    let questions = u16_at(4)?;
    let answers = u16_at(6)?;
    let mut answer = Answer {
        rcode: (flags & 0x000f) as u8,
        authoritative: flags & 0x0400 != 0,
        ..Answer::default()
    };
    let mut at = 12;
    for _ in 0..questions {
        at = skip_name(message, at)? + 4;
    }
    for _ in 0..answers {
        at = skip_name(message, at)?;
        let rtype = u16_at(at)?;
        let len = usize::from(u16_at(at + 8)?);
        let data_at = at + 10;
        let data = message
            .get(data_at..data_at + len)
            .ok_or(WireError::Malformed)?;
        match rtype {
            1 if len == 4 => answer
                .addresses
                .push(Ipv4Addr::new(data[0], data[1], data[2], data[3])),
            33 if len > 6 => answer.srv.push(Srv {
                priority: u16_at(data_at)?,
                weight: u16_at(data_at + 2)?,
                port: u16_at(data_at + 4)?,
                target: read_name(message, data_at + 6)?,
            }),
            _ => {}
        }
        at = data_at + len;
    }
    Ok(answer)
}

/// The offset just past the (possibly compressed) name at `at`.
fn skip_name(message: &[u8], mut at: usize) -> Result<usize, WireError> {
    loop {
        let len = *message.get(at).ok_or(WireError::Malformed)?;
        match len {
            0 => return Ok(at + 1),
            l if l & 0xc0 == 0xc0 => return Ok(at + 2),
            l => at += 1 + usize::from(l),
        }
    }
}

/// The dotted name at `at`, following compression pointers (at most 32).
fn read_name(message: &[u8], mut at: usize) -> Result<String, WireError> {
    let mut labels = Vec::new();
    for _ in 0..32 {
        let len = *message.get(at).ok_or(WireError::Malformed)?;
        if len == 0 {
            return Ok(labels.join(".") + ".");
        }
        if len & 0xc0 == 0xc0 {
            let low = *message.get(at + 1).ok_or(WireError::Malformed)?;
            at = (usize::from(len & 0x3f) << 8) | usize::from(low);
            continue;
        }
        let start = at + 1;
        let label = message
            .get(start..start + usize::from(len))
            .ok_or(WireError::Malformed)?;
        labels.push(String::from_utf8_lossy(label).into_owned());
        at = start + usize::from(len);
    }
    Err(WireError::Malformed)
}

/// Asks `server` over UDP; one try, answered within `timeout`.
pub async fn query(
    server: SocketAddr,
    name: &str,
    qtype: QueryType,
    timeout: Duration,
) -> Result<Answer, WireError> {
    let id = (std::process::id() as u16) ^ (name.len() as u16).rotate_left(8);
    let request = encode_query(id, name, qtype)?;
    let bind: SocketAddr = if server.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = tokio::net::UdpSocket::bind(bind).await?;
    socket.connect(server).await?;
    socket.send(&request).await?;
    let mut buffer = vec![0u8; 4096];
    let len = tokio::time::timeout(timeout, socket.recv(&mut buffer))
        .await
        .map_err(|_| WireError::Timeout(timeout))??;
    decode_answer(id, &buffer[..len])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response as CoreDNS writes it: the question, then answers whose
    /// names point back at it.
    fn response(id: u16, flags: u16, qtype: QueryType, records: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut message = encode_query(id, "web.demo.svc.cluster.local", qtype).expect("query");
        message[2..4].copy_from_slice(&flags.to_be_bytes());
        message[6..8].copy_from_slice(&(records.len() as u16).to_be_bytes());
        for (rtype, data) in records {
            message.extend_from_slice(&[0xc0, 12]);
            message.extend_from_slice(&rtype.to_be_bytes());
            message.extend_from_slice(&1u16.to_be_bytes());
            message.extend_from_slice(&5u32.to_be_bytes());
            message.extend_from_slice(&(data.len() as u16).to_be_bytes());
            message.extend_from_slice(data);
        }
        message
    }

    #[test]
    fn queries_carry_the_labels_and_type() {
        let q = encode_query(7, "a.bc.", QueryType::Srv).expect("query");
        assert_eq!(
            q,
            [
                0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, b'a', 2, b'b', b'c', 0, 0, 33, 0, 1
            ]
        );
        assert!(encode_query(1, "a..b", QueryType::A).is_err());
        assert!(encode_query(1, &"x".repeat(64), QueryType::A).is_err());
    }

    #[test]
    fn a_records_and_codes_are_read() {
        let message = response(
            9,
            0x8500,
            QueryType::A,
            &[(1, vec![10, 0, 0, 17]), (1, vec![10, 0, 0, 18])],
        );
        let answer = decode_answer(9, &message).expect("answer");
        assert_eq!(answer.rcode, NOERROR);
        assert!(answer.authoritative);
        assert_eq!(
            answer.addresses,
            [Ipv4Addr::new(10, 0, 0, 17), Ipv4Addr::new(10, 0, 0, 18)]
        );
        let refused = response(9, 0x8105, QueryType::A, &[]);
        assert_eq!(decode_answer(9, &refused).expect("answer").rcode, REFUSED);
        assert!(matches!(
            decode_answer(8, &refused),
            Err(WireError::WrongId { want: 8, got: 9 })
        ));
        assert!(matches!(
            decode_answer(9, &message[..message.len() - 2]),
            Err(WireError::Malformed)
        ));
    }

    #[test]
    fn srv_targets_follow_compression_pointers() {
        // priority 0, weight 100, port 80, target "db-0" + pointer to the
        // question's "web.demo…" name at offset 12.
        let data = vec![0, 0, 0, 100, 0, 80, 4, b'd', b'b', b'-', b'0', 0xc0, 12];
        let message = response(3, 0x8500, QueryType::Srv, &[(33, data)]);
        let answer = decode_answer(3, &message).expect("answer");
        assert_eq!(
            answer.srv,
            [Srv {
                priority: 0,
                weight: 100,
                port: 80,
                target: "db-0.web.demo.svc.cluster.local.".into(),
            }]
        );
    }
}
