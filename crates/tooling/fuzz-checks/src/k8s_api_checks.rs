//! `k8s-api`'s parsers of annotation and flag text: Go durations and the
//! two port-list parsers.

use std::collections::BTreeSet;

use k8s_api::{
    go_duration::parse_go_duration,
    ports::{PortRanges, parse_port_list, parse_port_range, parse_port_set},
};

use crate::go_format::go_duration_string;

/// `parse_go_duration`: an accepted duration printed the Go way parses to
/// the same nanoseconds; a refusal is one of Go's `time:` messages.
pub fn go_duration(data: &[u8]) {
    let Some(text) = crate::text(data) else {
        return;
    };
    match parse_go_duration(text) {
        Ok(nanos) => {
            let printed = go_duration_string(nanos);
            assert_eq!(
                parse_go_duration(&printed),
                Ok(nanos),
                "{text:?} printed {printed:?}"
            );
        }
        Err(error) => assert!(error.to_string().starts_with("time: "), "{error}"),
    }
}

/// An entry with the spaces around its first `-` removed: the strict
/// parser trims each bound (as the Rust original does), the lenient one
/// only the entry (as the Go original does).
pub fn trim_bounds(entry: &str) -> String {
    match entry.split_once('-') {
        Some((lo, hi)) => format!("{}-{}", lo.trim(), hi.trim()),
        None => entry.to_string(),
    }
}

/// Both port-list parsers: the lenient set prints as a list that parses to
/// itself; the strict parser refuses a list as soon as the lenient one
/// would skip one of its (non-empty, bound-trimmed) entries or take port 0,
/// and otherwise gives the very ports the lenient one does.
pub fn port_lists(data: &[u8]) {
    let Some(list) = crate::text(data) else {
        return;
    };
    let lenient = parse_port_list(list, &|_| None);
    let printed = lenient.to_string();
    assert_eq!(
        PortRanges::parse(&printed),
        lenient,
        "{list:?} printed {printed:?}"
    );
    let entries: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(trim_bounds)
        .collect();
    let lenient_would_refuse = entries
        .iter()
        .any(|e| parse_port_range(e).map_or(true, |(lo, _)| lo == 0));
    let strict = parse_port_set(list);
    if lenient_would_refuse {
        assert_eq!(strict, None, "{list:?}");
    } else {
        let strict = strict.unwrap_or_else(|| panic!("{list:?}: strict refused"));
        let normalized = parse_port_list(&entries.join(","), &|_| None);
        let lenient_ports: BTreeSet<u16> = normalized
            .ranges()
            .iter()
            .flat_map(|&(lo, hi)| lo..=hi)
            .collect();
        let strict_ports: BTreeSet<u16> = strict.iter().map(|p| p.get()).collect();
        assert_eq!(strict_ports, lenient_ports, "{list:?}");
    }
}
