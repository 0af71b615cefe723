//! What compare prints: a summary table per API (asked, equal, different,
//! known, failed on one side with the gRPC codes, not asked), then one
//! block per difference (the target, each field path and both values),
//! the known deliberate differences under their own heading, and what
//! could not be asked; or all of it as JSON (`-o json`).

use std::{collections::BTreeMap, fmt::Write as _};

use serde_json::json;

use super::{
    Compared, Verdict,
    diff::Difference,
    known::README_SECTION,
    question::{Answer, Api, code_name},
    sides::Side,
    tree::Node,
};

/// Longest value printed in text (JSON has every value whole).
const MAX_VALUE: usize = 400;

/// Counts of one API's (or all) questions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub asked: usize,
    pub equal: usize,
    pub different: usize,
    pub known: usize,
    pub failed_one_side: usize,
    pub not_asked: usize,
    /// `(side, code)` of failures on one side.
    pub codes: BTreeMap<(&'static str, &'static str), usize>,
}

impl Counts {
    fn add(&mut self, c: &Compared) {
        self.asked += 1;
        match &c.verdict {
            Verdict::Equal => self.equal += 1,
            Verdict::Different(_) => self.different += 1,
            Verdict::Known { .. } => self.known += 1,
            Verdict::FailedOneSide(_) => {
                self.failed_one_side += 1;
                for (side, answer) in [("a", &c.a), ("b", &c.b)] {
                    if let Some(code) = answer.code() {
                        *self.codes.entry((side, code_name(code))).or_default() += 1;
                    }
                }
            }
            Verdict::NotAsked(_) => self.not_asked += 1,
        }
    }

    fn failed_column(&self) -> String {
        if self.codes.is_empty() {
            return self.failed_one_side.to_string();
        }
        let codes: Vec<String> = self
            .codes
            .iter()
            .map(|((side, code), n)| format!("{side}: {code} ×{n}"))
            .collect();
        format!("{} ({})", self.failed_one_side, codes.join(", "))
    }
}

/// Counts by API, and in total.
pub fn counts(results: &[Compared]) -> (BTreeMap<Api, Counts>, Counts) {
    let mut by_api: BTreeMap<Api, Counts> =
        Api::ALL.iter().map(|a| (*a, Counts::default())).collect();
    let mut total = Counts::default();
    for c in results {
        by_api.entry(c.question.api).or_default().add(c);
        total.add(c);
    }
    (by_api, total)
}

/// The text report.
pub fn text(sides: (&Side, &Side), results: &[Compared], skipped: usize, strict: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "a: {}", sides.0.describe());
    let _ = writeln!(out, "b: {}", sides.1.describe());
    if skipped > 0 {
        let _ = writeln!(
            out,
            "{skipped} more question(s) in scope not asked (--max-targets)"
        );
    }
    let _ = writeln!(out);
    let (by_api, total) = counts(results);
    let _ = writeln!(
        out,
        "{:<34} {:>6} {:>6} {:>10} {:>6} {:>10}  failed on one side",
        "API", "asked", "equal", "different", "known", "not asked"
    );
    let row = |out: &mut String, name: &str, c: &Counts| {
        let _ = writeln!(
            out,
            "{name:<34} {:>6} {:>6} {:>10} {:>6} {:>10}  {}",
            c.asked,
            c.equal,
            c.different,
            c.known,
            c.not_asked,
            c.failed_column()
        );
    };
    for (api, c) in &by_api {
        row(&mut out, api.method(), c);
    }
    row(&mut out, "total", &total);

    let different: Vec<&Compared> = results
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Different(_) | Verdict::FailedOneSide(_)))
        .collect();
    if !different.is_empty() {
        let _ = writeln!(out, "\n== differences ({})", different.len());
        for c in different {
            block(&mut out, c);
        }
    }
    let known: Vec<&Compared> = results
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Known { .. }))
        .collect();
    if !known.is_empty() {
        let counted = if strict {
            "counted: --strict"
        } else {
            "not counted without --strict"
        };
        let _ = writeln!(
            out,
            "\n== known, deliberate differences ({}; {README_SECTION}; {counted})",
            known.len()
        );
        for c in known {
            block(&mut out, c);
        }
    }
    let not_asked: Vec<&Compared> = results
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::NotAsked(_)))
        .collect();
    if !not_asked.is_empty() {
        let _ = writeln!(out, "\n== not asked ({})", not_asked.len());
        for c in not_asked {
            let Verdict::NotAsked(why) = &c.verdict else {
                continue;
            };
            let _ = writeln!(out, "{}: {}", c.question.title(), why.join("; "));
        }
    }
    out
}

fn block(out: &mut String, c: &Compared) {
    let _ = writeln!(out, "\n{}  (as {})", c.question.title(), c.question.client);
    if let Verdict::Known {
        known,
        b_is_meridian,
        ..
    } = &c.verdict
    {
        let side = if *b_is_meridian { "b" } else { "a" };
        let _ = writeln!(
            out,
            "  {} (\"{}\"): side {side} answers as Meridian: {}",
            known.id, known.readme, known.summary
        );
    }
    if let Some(d) = &c.divergence {
        let _ = writeln!(
            out,
            "  differed for {:.1}s from {:.1}s into the follow window",
            d.lasted.as_secs_f64(),
            d.after.as_secs_f64()
        );
    }
    for d in c.verdict.differences() {
        let _ = writeln!(
            out,
            "  {}",
            if d.path.is_empty() {
                "(answer)"
            } else {
                &d.path
            }
        );
        let _ = writeln!(out, "    a: {}", shown(d.a.as_ref()));
        let _ = writeln!(out, "    b: {}", shown(d.b.as_ref()));
    }
}

fn shown(node: Option<&Node>) -> String {
    let Some(node) = node else {
        return "(absent)".into();
    };
    let text = node.to_string();
    if text.chars().count() <= MAX_VALUE {
        return text;
    }
    let cut: String = text.chars().take(MAX_VALUE).collect();
    format!(
        "{cut}… ({} characters; -o json has all)",
        text.chars().count()
    )
}

/// The JSON report.
pub fn json(
    sides: (&Side, &Side),
    results: &[Compared],
    skipped: usize,
    exit: i32,
) -> serde_json::Value {
    let (by_api, total) = counts(results);
    let counts_json = |c: &Counts| {
        json!({
            "asked": c.asked,
            "equal": c.equal,
            "different": c.different,
            "known": c.known,
            "failed_on_one_side": c.failed_one_side,
            "not_asked": c.not_asked,
            "failed_codes": c.codes.iter().map(|((side, code), n)| json!({"side": side, "code": code, "count": n})).collect::<Vec<_>>(),
        })
    };
    let side_json =
        |s: &Side| json!({"destination": s.destination, "policy": s.policy, "via": s.via});
    json!({
        "a": side_json(sides.0),
        "b": side_json(sides.1),
        "skipped": skipped,
        "summary": {
            "total": counts_json(&total),
            "by_api": by_api.iter().map(|(api, c)| (api.method().to_string(), counts_json(c))).collect::<serde_json::Map<_, _>>(),
        },
        "results": results.iter().map(result_json).collect::<Vec<_>>(),
        "exit": exit,
    })
}

fn result_json(c: &Compared) -> serde_json::Value {
    let verdict = match &c.verdict {
        Verdict::Equal => "equal",
        Verdict::Different(_) => "different",
        Verdict::Known { .. } => "known",
        Verdict::FailedOneSide(_) => "failed_on_one_side",
        Verdict::NotAsked(_) => "not_asked",
    };
    let mut out = json!({
        "api": c.question.api.method(),
        "target": c.question.target,
        "client": c.question.client,
        "verdict": verdict,
    });
    if matches!(c.verdict, Verdict::Equal) {
        return out;
    }
    out["a"] = answer_json(&c.a);
    out["b"] = answer_json(&c.b);
    out["differences"] = c
        .verdict
        .differences()
        .iter()
        .map(difference_json)
        .collect();
    match &c.verdict {
        Verdict::Known {
            known,
            b_is_meridian,
            ..
        } => {
            out["known"] = json!({
                "id": known.id,
                "readme": known.readme,
                "summary": known.summary,
                "meridian_side": if *b_is_meridian { "b" } else { "a" },
            });
        }
        Verdict::NotAsked(why) => out["not_asked"] = json!(why),
        _ => {}
    }
    if let Some(d) = &c.divergence {
        out["divergence"] = json!({
            "after_seconds": d.after.as_secs_f64(),
            "lasted_seconds": d.lasted.as_secs_f64(),
        });
    }
    out
}

fn answer_json(answer: &Answer) -> serde_json::Value {
    match answer {
        Answer::Value(node) => json!({"value": node.to_json()}),
        Answer::Status { code, message } => {
            json!({"status": {"code": code_name(*code), "message": message}})
        }
        Answer::Silent(wait) => json!({"silent_seconds": wait.as_secs_f64()}),
        Answer::Unreachable(error) => json!({"unreachable": error}),
    }
}

fn difference_json(d: &Difference) -> serde_json::Value {
    json!({
        "path": d.path,
        "a": d.a.as_ref().map(Node::to_json),
        "b": d.b.as_ref().map(Node::to_json),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::compare::{
        judge,
        question::{Question, Request},
    };

    fn question(api: Api, target: &str) -> Question {
        Question {
            api,
            target: target.into(),
            request: Request::Destination {
                path: target.into(),
                token: String::new(),
            },
            client: "shop/meridian-compare".into(),
            age: None,
        }
    }

    fn compared(question: Question, a: Answer, b: Answer) -> Compared {
        let verdict = judge(&question, &a, &b, None);
        Compared {
            question,
            a,
            b,
            verdict,
            divergence: None,
        }
    }

    fn side(name: &'static str) -> Side {
        Side {
            name,
            destination: format!("http://{name}:8086"),
            policy: format!("http://{name}:8090"),
            via: None,
        }
    }

    #[test]
    fn table_blocks_known_and_failed_on_one_side() {
        let profile =
            |opaque| Answer::Value(Node::fields(&[("opaque_protocol", Node::Bool(opaque))]));
        let silent_get = Answer::Value(Node::fields(&[("addrs", Node::Set(BTreeMap::new()))]));
        let no_endpoints = Answer::Value(Node::fields(&[
            ("addrs", Node::Set(BTreeMap::new())),
            (
                "no_endpoints",
                Node::fields(&[("exists", Node::Bool(true))]),
            ),
        ]));
        let results = vec![
            compared(
                question(Api::GetProfile, "db.shop.svc.cluster.local:3306"),
                profile(true),
                profile(false),
            ),
            compared(
                question(Api::GetProfile, "web.shop.svc.cluster.local:80"),
                profile(false),
                profile(false),
            ),
            compared(
                question(Api::Get, "empty.shop.svc.cluster.local:80"),
                silent_get,
                no_endpoints,
            ),
            compared(
                question(Api::Inbound, "shop/web-0:8080"),
                Answer::Status {
                    code: tonic::Code::NotFound,
                    message: "unknown server".into(),
                },
                profile(false),
            ),
        ];
        let text = text((&side("a"), &side("b")), &results, 0, false);
        let want = "a: destination http://a:8086, policy http://a:8090
b: destination http://b:8086, policy http://b:8090

API                                 asked  equal  different  known  not asked  failed on one side
Destination.Get                         1      0          0      1          0  0
Destination.GetProfile                  2      1          1      0          0  0
OutboundPolicies.Watch                  0      0          0      0          0  0
InboundServerPolicies.WatchPort         1      0          0      0          0  1 (a: NotFound ×1)
total                                   4      1          1      1          0  1 (a: NotFound ×1)

== differences (2)

Destination.GetProfile db.shop.svc.cluster.local:3306  (as shop/meridian-compare)
  opaque_protocol
    a: true
    b: false

InboundServerPolicies.WatchPort shop/web-0:8080  (as shop/meridian-compare)
  (answer)
    a: {code: NotFound, message: \"unknown server\"}
    b: {opaque_protocol: false}

== known, deliberate differences (1; README.md, \"Where Meridian differs from Linkerd\"; not counted without --strict)

Destination.Get empty.shop.svc.cluster.local:80  (as shop/meridian-compare)
  get-no-endpoints (\"Fail fast\"): side b answers as Meridian: for a Service with no ready endpoints Meridian sends NoEndpoints; the original sends nothing (or removes what it sent)
  no_endpoints
    a: (absent)
    b: {exists: true}
";
        assert_eq!(text, want);
        let json = json((&side("a"), &side("b")), &results, 0, 1);
        assert_eq!(json["summary"]["total"]["failed_on_one_side"], 1);
        assert_eq!(json["results"][2]["known"]["meridian_side"], "b");
        assert_eq!(
            json["results"][0]["differences"][0]["path"],
            "opaque_protocol"
        );
        assert!(
            json["results"][1].get("differences").is_none(),
            "equal results are short"
        );
    }
}
