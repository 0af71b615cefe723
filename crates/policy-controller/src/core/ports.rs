//! Port lists as annotations write them: `"25,587,3000-3010"`.

use std::{collections::BTreeSet, num::NonZeroU16};

/// A set of ports.
pub type PortSet = BTreeSet<NonZeroU16>;

/// Parses a comma-separated list of ports and inclusive ranges. Any invalid
/// element (port 0, over 65535, a reversed range, junk) makes the whole
/// list invalid: `None`, which callers treat as the empty set.
pub fn parse_port_set(s: &str) -> Option<PortSet> {
    let mut ports = PortSet::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            None => {
                ports.insert(part.parse().ok()?);
            }
            Some((lo, hi)) => {
                let lo: NonZeroU16 = lo.trim().parse().ok()?;
                let hi: NonZeroU16 = hi.trim().parse().ok()?;
                if lo > hi {
                    return None;
                }
                ports.extend((lo.get()..=hi.get()).filter_map(NonZeroU16::new));
            }
        }
    }
    Some(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ports: &[u16]) -> PortSet {
        ports.iter().filter_map(|p| NonZeroU16::new(*p)).collect()
    }

    #[test]
    fn ports_and_ranges() {
        assert_eq!(
            parse_port_set("25,587,3000-3003"),
            Some(set(&[25, 587, 3000, 3001, 3002, 3003]))
        );
        assert_eq!(parse_port_set(" 80 , 443 "), Some(set(&[80, 443])));
        assert_eq!(parse_port_set(""), Some(set(&[])));
        assert_eq!(parse_port_set("65535"), Some(set(&[65535])));
    }

    #[test]
    fn invalid_lists() {
        for bad in ["0", "65536", "http", "10-5", "1-", "80,x"] {
            assert_eq!(parse_port_set(bad), None, "{bad}");
        }
    }
}
