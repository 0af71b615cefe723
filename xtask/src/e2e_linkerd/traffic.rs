//! What the meshed clients saw: their log lines (`<unix seconds> <target>
//! ok <body>` or `… fail <status line or "no response">`, see `workloads.yaml`) counted per target over a
//! window of time, and the behaviours each target must show.

use std::collections::BTreeMap;

/// One target's requests in a window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub ok: u32,
    pub failed: u32,
    /// The answers: for a success, the pod that answered (from the test
    /// server's `hello from <hostname>`); for a failure, the error text.
    pub answers: BTreeMap<String, u32>,
}

/// Counts the lines whose timestamp is in `[from, to)`, per target.
pub fn tally(log: &str, from: u64, to: u64) -> BTreeMap<String, Tally> {
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    for line in log.lines() {
        let mut fields = line.splitn(4, ' ');
        let (Some(at), Some(target), Some(status)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Ok(at) = at.parse::<u64>() else {
            continue;
        };
        if at < from || at >= to {
            continue;
        }
        let rest = fields.next().unwrap_or("").trim();
        let tally = tallies.entry(target.to_string()).or_default();
        let answer = match status {
            "ok" => {
                tally.ok += 1;
                rest.strip_prefix("hello from ").unwrap_or(rest).to_string()
            }
            _ => {
                tally.failed += 1;
                rest.to_string()
            }
        };
        *tally.answers.entry(answer).or_default() += 1;
    }
    tallies
}

/// Requests that failed in a window, over every target but the intruder
/// (whose requests policy denies on purpose).
pub fn failed(tallies: &BTreeMap<String, Tally>) -> u32 {
    tallies
        .iter()
        .filter(|(target, _)| !target.starts_with("intruder"))
        .map(|(_, tally)| tally.failed)
        .sum()
}

/// What each target must show (the mesh's behaviours as a client sees
/// them); one message per target that does not.
pub fn violations(tallies: &BTreeMap<String, Tally>) -> Vec<String> {
    let mut found = Vec::new();
    let mut check =
        |target: &str, rule: &str, holds: &dyn Fn(&Tally) -> bool| match tallies.get(target) {
            None => found.push(format!("{target}: no request in the window")),
            Some(tally) if !holds(tally) => {
                found.push(format!("{target}: expected {rule}, saw {tally:?}"))
            }
            Some(_) => {}
        };
    let all_from = |prefix: &'static str| {
        move |tally: &Tally| {
            tally.failed == 0 && tally.answers.keys().all(|pod| pod.starts_with(prefix))
        }
    };
    check(
        "web",
        "every answer from web-a (HTTPRoute default rule)",
        &all_from("web-a-"),
    );
    check(
        "web-variant-b",
        "every answer from web-b (HTTPRoute header rule x-variant: b)",
        &all_from("web-b-"),
    );
    check(
        "web-a",
        "every request answered (ServiceProfile route)",
        &all_from("web-a-"),
    );
    check(
        "db-0",
        "every request answered by db-0 (StatefulSet hostname)",
        &all_from("db-0"),
    );
    check(
        "intruder-web-a",
        "every request refused with 403 (Server + AuthorizationPolicy)",
        &|tally| tally.ok == 0 && tally.answers.keys().all(|error| error.contains("403")),
    );
    found
}

/// The tallies as a table: target, ok, failed, answers.
pub fn table(tallies: &BTreeMap<String, Tally>) -> String {
    let mut out = format!("  {:<16} {:>5} {:>7}  answers\n", "target", "ok", "failed");
    for (target, tally) in tallies {
        let answers: Vec<String> = tally
            .answers
            .iter()
            .map(|(answer, count)| format!("{count}× {answer}"))
            .collect();
        out.push_str(&format!(
            "  {target:<16} {:>5} {:>7}  {}\n",
            tally.ok,
            tally.failed,
            answers.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
100 web ok hello from web-a-6d9f-x1 
100 web-variant-b ok hello from web-b-77c4-q2 
100 web-a ok hello from web-a-6d9f-x1 
100 db-0 ok hello from db-0 
101 intruder-web-a fail HTTP/1.1 403 Forbidden l5d-proxy-error: client 10.244.0.18:50000: unauthorized request on route
102 web fail no response
garbage line
103 web ok hello from web-a-6d9f-x1 
";

    #[test]
    fn counts_per_target_inside_the_window() {
        let all = tally(LOG, 100, 104);
        assert_eq!(all["web"].ok, 2);
        assert_eq!(all["web"].failed, 1);
        assert_eq!(all["web"].answers["web-a-6d9f-x1"], 2);
        assert_eq!(all["web"].answers["no response"], 1);
        assert_eq!(failed(&all), 1, "the intruder's 403 is not a failure");
        let early = tally(LOG, 100, 102);
        assert_eq!(early["web"].failed, 0);
        assert_eq!(failed(&early), 0);
        assert!(tally(LOG, 200, 300).is_empty());
    }

    #[test]
    fn behaviours_hold_or_say_which_does_not() {
        assert_eq!(violations(&tally(LOG, 100, 102)), Vec::<String>::new());
        let with_timeout = violations(&tally(LOG, 100, 104));
        assert_eq!(with_timeout.len(), 1, "{with_timeout:?}");
        assert!(with_timeout[0].starts_with("web: expected every answer from web-a"));
        let wrong_backend = "100 web-variant-b ok hello from web-a-6d9f-x1\n";
        let found = violations(&tally(wrong_backend, 100, 101));
        assert!(
            found
                .iter()
                .any(|v| v.starts_with("web-variant-b: expected")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|v| v == "db-0: no request in the window"),
            "{found:?}"
        );
        let let_in = "100 intruder-web-a ok hello from web-a-6d9f-x1\n";
        let found = violations(&tally(let_in, 100, 101));
        assert!(
            found
                .iter()
                .any(|v| v.starts_with("intruder-web-a: expected")),
            "{found:?}"
        );
    }
}
