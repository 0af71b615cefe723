//! The series Linkerd 2.20's destination pod exports
//! (`tests/data/linkerd-2.20-series.tsv`: container, name, type, labels,
//! source, whether Meridian exports it) and [`missing`], which says which
//! of a container's exported ones a scrape of Meridian lacks.
//!
//! A series counts as present when its family is declared (`# TYPE`), so a
//! family with no sample yet passes, under the exact name PromQL reads:
//! a counter `x_total` as the OpenMetrics family `x` of type `counter`, a
//! histogram or gauge under its own name. An original counter without
//! `_total` can only keep its name as an `unknown` (untyped) family, which
//! is what is expected of it. Where samples exist, their label names must
//! be the original's.

use std::collections::{BTreeSet, HashMap};

/// The data file.
pub const DATA: &str = include_str!("../tests/data/linkerd-2.20-series.tsv");

/// One row of the data file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Series {
    pub container: String,
    pub name: String,
    pub kind: String,
    pub labels: BTreeSet<String>,
    pub source: String,
    /// Whether Meridian exports it (`yes`) or not (`absent`).
    pub exported: bool,
}

/// Every row of the data file.
pub fn all() -> Vec<Series> {
    DATA.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            let [container, name, kind, labels, source, meridian] = f.as_slice() else {
                return None;
            };
            Some(Series {
                container: container.to_string(),
                name: name.to_string(),
                kind: kind.to_string(),
                labels: labels
                    .split(',')
                    .filter(|l| !l.is_empty() && *l != "-")
                    .map(str::to_string)
                    .collect(),
                source: source.to_string(),
                exported: *meridian == "yes",
            })
        })
        .collect()
}

/// The rows of `container` that Meridian exports.
pub fn exported(container: &str) -> Vec<Series> {
    all()
        .into_iter()
        .filter(|s| s.container == container && s.exported)
        .collect()
}

/// What the scrape must declare for `series`: the family name and the
/// types accepted, and the sample names that carry its labels.
fn expected(series: &Series) -> (String, &'static [&'static str], Vec<String>) {
    let name = series.name.as_str();
    match series.kind.as_str() {
        "counter" => match name.strip_suffix("_total") {
            Some(family) => (family.to_string(), &["counter"], vec![name.to_string()]),
            None => (name.to_string(), &["unknown"], vec![name.to_string()]),
        },
        "histogram" => (
            name.to_string(),
            &["histogram"],
            vec![format!("{name}_count"), format!("{name}_sum")],
        ),
        _ => (name.to_string(), &["gauge"], vec![name.to_string()]),
    }
}

/// The rows of `container` exported by Meridian that `scrape` (the
/// Prometheus text of `/metrics`) lacks, each with why.
pub fn missing(scrape: &str, container: &str) -> Vec<String> {
    let types: HashMap<&str, &str> = scrape
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let mut out = Vec::new();
    for series in exported(container) {
        let (family, accepted, samples) = expected(&series);
        match types.get(family.as_str()) {
            None => out.push(format!("{}: no `# TYPE {family}`", series.name)),
            Some(t) if !accepted.contains(t) => out.push(format!(
                "{}: `{family}` is declared {t}, expected {}",
                series.name,
                accepted.join(" or ")
            )),
            Some(_) => {
                if let Some(keys) = wrong_labels(scrape, &samples, &series.labels) {
                    out.push(format!(
                        "{}: labels {keys:?}, expected {:?}",
                        series.name, series.labels
                    ));
                }
            }
        }
    }
    out
}

/// The label names of the first sample of `samples` whose names differ
/// from `wanted`.
fn wrong_labels(
    scrape: &str,
    samples: &[String],
    wanted: &BTreeSet<String>,
) -> Option<Vec<String>> {
    for line in scrape.lines().filter(|l| !l.starts_with('#')) {
        for sample in samples {
            let Some(rest) = line.strip_prefix(sample.as_str()) else {
                continue;
            };
            let keys: BTreeSet<String> = if rest.starts_with(' ') {
                BTreeSet::new()
            } else if let Some((labels, _)) = rest.strip_prefix('{').and_then(|r| r.split_once('}'))
            {
                labels
                    .split(',')
                    .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_string()))
                    .collect()
            } else {
                continue;
            };
            if &keys != wanted {
                return Some(keys.into_iter().collect());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_parses() {
        let rows = all();
        let data_rows = DATA
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .count();
        assert_eq!(rows.len(), data_rows);
        for c in ["destination", "sp-validator", "policy"] {
            assert!(!exported(c).is_empty(), "{c}");
        }
    }

    #[test]
    fn declared_families_pass_and_missing_ones_do_not() {
        let scrape = "# TYPE process_open_fds gauge\nprocess_open_fds 3\n\
            # TYPE endpoint_updates_queue_overflow unknown\n\
            # TYPE http_client_requests counter\n\
            http_client_requests_total{client=\"k8s\",code=\"200\",method=\"get\"} 1\n\
            # TYPE endpoints_informer_lag_seconds histogram\n\
            endpoints_informer_lag_seconds_count 0\n";
        let series = |name: &str, kind: &str, labels: &[&str]| Series {
            container: String::new(),
            name: name.into(),
            kind: kind.into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            source: String::new(),
            exported: true,
        };
        let check = |s: Series| {
            let (family, accepted, samples) = expected(&s);
            match scrape
                .lines()
                .filter_map(|l| l.strip_prefix("# TYPE "))
                .find_map(|l| l.strip_prefix(&format!("{family} ")))
            {
                Some(t) => {
                    accepted.contains(&t) && wrong_labels(scrape, &samples, &s.labels).is_none()
                }
                None => false,
            }
        };
        assert!(check(series("process_open_fds", "gauge", &[])));
        assert!(check(series(
            "endpoint_updates_queue_overflow",
            "counter",
            &["service"]
        )));
        assert!(check(series(
            "http_client_requests_total",
            "counter",
            &["client", "code", "method"]
        )));
        assert!(!check(series(
            "http_client_requests_total",
            "counter",
            &["client"]
        )));
        assert!(check(series(
            "endpoints_informer_lag_seconds",
            "histogram",
            &[]
        )));
        assert!(!check(series("process_max_fds", "gauge", &[])));
        assert!(!check(series("process_open", "counter", &[])));
    }
}
