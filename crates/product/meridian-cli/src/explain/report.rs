//! What `explain` found, axis by axis, and the verdict: plain values (no
//! Kubernetes, no gRPC), so the verdict logic is unit-tested on its own.

use serde::Serialize;

/// The four independent things that can break traffic, in the order they
/// are checked (the verdict names the first broken one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Axis {
    Endpoints,
    Discovery,
    Policy,
    Profiles,
}

impl Axis {
    pub fn title(self) -> &'static str {
        match self {
            Self::Endpoints => "Endpoints",
            Self::Discovery => "Discovery",
            Self::Policy => "Policy",
            Self::Profiles => "Profiles",
        }
    }
}

/// How one line of evidence reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Mark {
    /// As it should be.
    Ok,
    /// Worth knowing, not broken (e.g. no ServiceProfile at all).
    Note,
    /// Broken: traffic fails or is wrong because of it.
    Broken,
}

/// One fact and where it came from (`Service ns/web`, `GET /streams`, …).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub mark: Mark,
    pub text: String,
    pub source: String,
}

/// What was found on one axis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AxisReport {
    pub axis: Axis,
    pub evidence: Vec<Evidence>,
}

impl AxisReport {
    pub fn new(axis: Axis) -> Self {
        Self {
            axis,
            evidence: Vec::new(),
        }
    }

    pub fn push(&mut self, mark: Mark, text: impl Into<String>, source: impl Into<String>) {
        self.evidence.push(Evidence {
            mark,
            text: text.into(),
            source: source.into(),
        });
    }

    pub fn ok(&mut self, text: impl Into<String>, source: impl Into<String>) {
        self.push(Mark::Ok, text, source);
    }

    pub fn note(&mut self, text: impl Into<String>, source: impl Into<String>) {
        self.push(Mark::Note, text, source);
    }

    pub fn broken(&mut self, text: impl Into<String>, source: impl Into<String>) {
        self.push(Mark::Broken, text, source);
    }

    /// The first broken line, if any.
    pub fn first_broken(&self) -> Option<&Evidence> {
        self.evidence.iter().find(|e| e.mark == Mark::Broken)
    }
}

/// The whole answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    pub client: String,
    pub target: String,
    pub axes: Vec<AxisReport>,
    pub verdict: String,
    pub ok: bool,
}

impl Report {
    /// The report of `axes` (in the order given) with its verdict.
    pub fn new(client: String, target: String, axes: Vec<AxisReport>) -> Self {
        let (verdict, ok) = verdict(&axes);
        Self {
            client,
            target,
            axes,
            verdict,
            ok,
        }
    }

    /// The report for a terminal: one block per axis, then the verdict.
    pub fn render(&self) -> String {
        let mut out = format!("{} → {}\n", self.client, self.target);
        for axis in &self.axes {
            out.push_str(&format!("\n{}\n", axis.axis.title()));
            for e in &axis.evidence {
                let mark = match e.mark {
                    Mark::Ok => "✔",
                    Mark::Note => "·",
                    Mark::Broken => "✘",
                };
                out.push_str(&format!("  {mark} {}  [{}]\n", e.text, e.source));
            }
        }
        out.push_str(&format!("\n{}\n", self.verdict));
        out
    }
}

/// The verdict line: the first broken axis and its first broken fact, or
/// that everything passed.
pub fn verdict(axes: &[AxisReport]) -> (String, bool) {
    for axis in axes {
        if let Some(e) = axis.first_broken() {
            let name = axis.axis.title().to_lowercase();
            return (format!("verdict: {name} broken: {}", e.text), false);
        }
    }
    (
        "verdict: ok: endpoints, discovery, policy and profiles all pass".into(),
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(axis: Axis, marks: &[(Mark, &str)]) -> AxisReport {
        let mut report = AxisReport::new(axis);
        for (mark, text) in marks {
            report.push(*mark, *text, "test");
        }
        report
    }

    #[test]
    fn all_passing_is_ok_and_notes_do_not_break() {
        let axes = vec![
            axis(Axis::Endpoints, &[(Mark::Ok, "3 ready")]),
            axis(Axis::Discovery, &[(Mark::Ok, "stream up to date")]),
            axis(Axis::Policy, &[(Mark::Ok, "authorized")]),
            axis(Axis::Profiles, &[(Mark::Note, "no ServiceProfile")]),
        ];
        let (line, ok) = verdict(&axes);
        assert!(ok);
        assert_eq!(
            line,
            "verdict: ok: endpoints, discovery, policy and profiles all pass"
        );
    }

    #[test]
    fn the_first_broken_axis_and_fact_are_named() {
        let axes = vec![
            axis(Axis::Endpoints, &[(Mark::Ok, "Service exists")]),
            axis(
                Axis::Discovery,
                &[
                    (Mark::Note, "one stream"),
                    (Mark::Broken, "no Get stream from ns/client"),
                    (Mark::Broken, "second"),
                ],
            ),
            axis(Axis::Policy, &[(Mark::Broken, "denied")]),
        ];
        let (line, ok) = verdict(&axes);
        assert!(!ok);
        assert_eq!(
            line,
            "verdict: discovery broken: no Get stream from ns/client"
        );
    }

    #[test]
    fn rendering_shows_every_fact_with_its_source() {
        let mut endpoints = AxisReport::new(Axis::Endpoints);
        endpoints.broken("0 of 2 endpoints ready", "EndpointSlice ns/web-abc");
        let report = Report::new(
            "ns/client".into(),
            "web.ns.svc.cluster.local:80".into(),
            vec![endpoints],
        );
        let text = report.render();
        assert!(text.starts_with("ns/client → web.ns.svc.cluster.local:80\n"));
        assert!(
            text.contains("Endpoints\n  ✘ 0 of 2 endpoints ready  [EndpointSlice ns/web-abc]\n")
        );
        assert!(text.ends_with("verdict: endpoints broken: 0 of 2 endpoints ready\n"));
    }
}
