//! Property tests of `k8s-api`'s text parsers: the two port-list parsers
//! (lenient never panics and prints what it parsed; strict refuses a list
//! as soon as lenient would skip one of its entries) and Go durations
//! against an exact reference formula.

use std::collections::BTreeSet;

use k8s_api::{
    go_duration::parse_go_duration,
    ports::{PortRanges, parse_port_list, parse_port_range, parse_port_set},
};
use proptest::prelude::*;

/// Port-list text: mostly entries as people write them, with noise.
fn entry() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<u16>().prop_map(|p| p.to_string()),
        3 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| format!("{a}-{b}")),
        1 => (0u32..70_000).prop_map(|p| format!(" {p} ")),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| format!("{a} - {b}")),
        1 => "[-+ 0-9a-z]{0,8}",
        1 => any::<String>(),
    ]
}

fn port_list() -> impl Strategy<Value = String> {
    (proptest::collection::vec(entry(), 0..8), any::<bool>()).prop_map(|(entries, trailing)| {
        let mut list = entries.join(",");
        if trailing {
            list.push(',');
        }
        list
    })
}

/// The entry as the strict parser reads it: each bound trimmed (the Rust
/// original's rule), where the lenient parser trims only the entry (the
/// Go original's).
fn trim_bounds(entry: &str) -> String {
    match entry.split_once('-') {
        Some((lo, hi)) => format!("{}-{}", lo.trim(), hi.trim()),
        None => entry.to_string(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// A set built from any ranges prints as a list that parses back to it.
    #[test]
    fn rendered_port_ranges_round_trip(ranges in proptest::collection::vec((any::<u16>(), any::<u16>()), 0..10)) {
        let set = PortRanges::from_ranges(ranges.clone());
        prop_assert_eq!(PortRanges::parse(&set.to_string()), set.clone());
        for (a, b) in ranges {
            prop_assert!(set.contains(a) && set.contains(b) && set.contains(a.min(b) / 2 + b.max(a) / 2));
        }
    }

    /// The lenient parser takes any text, and what it parsed prints and
    /// parses to itself.
    #[test]
    fn lenient_never_panics_and_reprints(list in prop_oneof![port_list(), any::<String>()]) {
        let set = parse_port_list(&list, &|_| None);
        prop_assert_eq!(PortRanges::parse(&set.to_string()), set);
    }

    /// Strict refuses whatever lenient would skip (or read as port 0), and
    /// otherwise both give the same ports.
    #[test]
    fn strict_refuses_what_lenient_skips(list in port_list()) {
        let entries: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(trim_bounds)
            .collect();
        let skipped = entries
            .iter()
            .any(|e| parse_port_range(e).map_or(true, |(lo, _)| lo == 0));
        match parse_port_set(&list) {
            None => prop_assert!(skipped, "strict refused {:?}, lenient skips nothing", list),
            Some(strict) => {
                prop_assert!(!skipped, "strict accepted {:?}", list);
                let lenient = parse_port_list(&entries.join(","), &|_| None);
                let lenient: BTreeSet<u16> =
                    lenient.ranges().iter().flat_map(|&(lo, hi)| lo..=hi).collect();
                let strict: BTreeSet<u16> = strict.iter().map(|p| p.get()).collect();
                prop_assert_eq!(strict, lenient);
            }
        }
    }
}

const UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// One `<int>[.<frac>]<unit>` term whose fraction has at most as many
/// digits as the unit has factors of ten, so that Go's float step is exact
/// and the reference is plain integer arithmetic.
fn term() -> impl Strategy<Value = (String, u128)> {
    (0..UNITS.len(), 0u64..2_000_000, any::<u32>(), any::<bool>()).prop_map(
        |(unit, int, frac_seed, with_frac)| {
            let (name, nanos) = UNITS[unit];
            let max_digits = (0..)
                .take_while(|k| nanos % 10u64.pow(*k) == 0)
                .last()
                .unwrap_or(0)
                .min(9);
            let digits = if with_frac {
                frac_seed % (max_digits + 1)
            } else {
                0
            };
            let frac = u64::from(frac_seed) % 10u64.pow(digits);
            let text = if digits == 0 {
                format!("{int}{name}")
            } else {
                format!("{int}.{frac:0width$}{name}", width = digits as usize)
            };
            let value = u128::from(int) * u128::from(nanos)
                + u128::from(frac) * u128::from(nanos / 10u64.pow(digits));
            (text, value)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// A sum of terms is the exact sum of `int × unit + frac × unit/10^k`,
    /// with the sign applied, and out of range (beyond 2^63 - 1, or 2^63
    /// when negative) is Go's "invalid duration".
    #[test]
    fn go_durations_match_the_reference(terms in proptest::collection::vec(term(), 1..5), sign in 0u8..3) {
        let text: String = terms.iter().map(|(t, _)| t.as_str()).collect();
        let total: u128 = terms.iter().map(|(_, v)| v).sum();
        let (prefix, negative) = [("", false), ("+", false), ("-", true)][usize::from(sign)];
        let input = format!("{prefix}{text}");
        let limit: u128 = if negative { 1 << 63 } else { (1 << 63) - 1 };
        let got = parse_go_duration(&input);
        if total > limit {
            prop_assert!(got.is_err(), "{:?} gave {:?}", input, got);
        } else {
            let want = if negative { -(total as i128) } else { total as i128 };
            prop_assert_eq!(got.map(i128::from), Ok(want), "{}", input);
        }
    }

    /// Any text: never a panic; a refusal always has Go's `time:` prefix.
    #[test]
    fn go_duration_never_panics(text in prop_oneof!["[-+.0-9a-zµμ]{0,12}", any::<String>()]) {
        if let Err(error) = parse_go_duration(&text) {
            prop_assert!(error.to_string().starts_with("time: "));
        }
    }
}
