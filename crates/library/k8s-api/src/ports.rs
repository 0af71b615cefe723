//! Port lists as Linkerd's annotations and flags write them
//! (`"25,587,3000-3010"`), parsed two ways, side by side.
//!
//! Both exist because the two originals differ and Meridian answers as each
//! does: the Go destination skips a bad entry with a warning and keeps the
//! rest (and resolves named container ports), while the Rust policy
//! controller drops the whole list if any element is bad. A proxy would see
//! different opaque ports if either side used the other's rule.
//! - lenient ([`parse_port_list`] → [`PortRanges`]): the destination's
//!   `--default-opaque-ports`, `config.linkerd.io/opaque-ports` and
//!   `config.linkerd.io/skip-inbound-ports`;
//! - strict ([`parse_port_set`] → [`PortSet`]): the policy controller's.

use std::{collections::BTreeSet, fmt, num::NonZeroU16};

/// A port-list entry that is neither a port, a range nor a known name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid port list entry {entry:?}: {reason}")]
pub struct PortEntryError {
    /// The offending entry, trimmed.
    pub entry: String,
    /// Why it was rejected.
    pub reason: &'static str,
}

// --- lenient (the destination's) ---

/// A set of TCP ports, stored as sorted, merged inclusive ranges so that
/// `0-65535` stays small.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PortRanges {
    ranges: Vec<(u16, u16)>,
}

impl PortRanges {
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

impl fmt::Display for PortRanges {
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
pub fn parse_port_range(entry: &str) -> Result<(u16, u16), PortEntryError> {
    let err = |reason| PortEntryError {
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
pub fn parse_port_list(list: &str, named: &dyn Fn(&str) -> Option<u16>) -> PortRanges {
    if list.is_empty() {
        return PortRanges::new();
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
    PortRanges::from_ranges(ranges)
}

// --- strict (the policy controller's) ---

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

    #[test]
    fn port_range_errors_name_the_entry() {
        let err = parse_port_range("9-3").expect_err("inverted range");
        assert!(err.to_string().contains("\"9-3\""), "{err}");
        assert!(parse_port_range("").is_err());
        assert!(parse_port_range("-5").is_err());
        assert_eq!(parse_port_range("+80").expect("plus sign"), (80, 80));
    }

    #[test]
    fn port_set_parses_ports_and_ranges() {
        let set = PortRanges::parse("25,587,3306-3310");
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
        let set = PortRanges::parse(" 10-20 , 15-30,31,abc,5-1,1-2-3,,99999,");
        assert_eq!(set.ranges(), &[(10, 31)]);
        assert!(PortRanges::parse("").is_empty());
        assert!(PortRanges::parse(",").is_empty());
        let all = PortRanges::parse("0-65535");
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
