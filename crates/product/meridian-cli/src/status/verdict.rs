//! The decisions of `meridian-cli status`, as pure functions: reading
//! `meridian_build_info` from a `/metrics` scrape, telling Linkerd's
//! published controller images from others, what runs in each container
//! and the verdict (reverted swap, rollout in progress, exit status).

use std::fmt;

/// `meridian_build_info{version,commit,profile}` of one container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildInfo {
    pub version: String,
    pub commit: String,
    pub profile: String,
}

impl fmt::Display for BuildInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Meridian {} ({}, {} build)",
            self.version, self.commit, self.profile
        )
    }
}

/// The first `meridian_build_info` sample of a Prometheus/OpenMetrics text
/// scrape, or `None` when the scrape has none (Linkerd's controllers
/// export no such series).
pub fn parse_build_info(scrape: &str) -> Option<BuildInfo> {
    scrape.lines().find_map(|line| {
        let rest = line.strip_prefix("meridian_build_info{")?;
        let labels = parse_labels(rest)?;
        let get = |name: &str| {
            labels
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        Some(BuildInfo {
            version: get("version")?,
            commit: get("commit").unwrap_or_else(|| "unknown".into()),
            profile: get("profile").unwrap_or_else(|| "unknown".into()),
        })
    })
}

/// `name="value",…}` (the text after a sample's `{`) as pairs, with the
/// exposition format's escapes (`\\`, `\"`, `\n`) undone.
fn parse_labels(text: &str) -> Option<Vec<(String, String)>> {
    let mut labels = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || *c == ' ') {
            chars.next();
        }
        if chars.peek() == Some(&'}') {
            return Some(labels);
        }
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if name.is_empty() || chars.next()? != '"' {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                c => value.push(c),
            }
        }
        labels.push((name.trim().to_string(), value));
    }
}

/// Whether `image` is one of Linkerd's published controller images
/// (`…/linkerd/controller` or `…/linkerd/policy-controller`, from
/// `cr.l5d.io` or a mirror that keeps the path), by tag or digest.
pub fn is_linkerd_image(image: &str) -> bool {
    let without_digest = image.split('@').next().unwrap_or(image);
    // A tag is a `:` after the last `/` (a registry port is before it).
    let repository = match without_digest.rsplit_once('/') {
        Some((head, last)) => format!("{head}/{}", last.split(':').next().unwrap_or(last)),
        None => without_digest
            .split(':')
            .next()
            .unwrap_or(without_digest)
            .to_string(),
    };
    let segments: Vec<&str> = repository.split('/').collect();
    matches!(
        segments.as_slice(),
        [.., "linkerd", "controller" | "policy-controller"]
    )
}

/// What runs in one controller container of a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Running {
    /// Its `/metrics` has `meridian_build_info`.
    Meridian(BuildInfo),
    /// Linkerd's original: why we know (no build info on `/metrics`, or
    /// Linkerd's image where `/metrics` could not be read).
    Original(String),
    /// Neither could be told: why.
    Unknown(String),
}

/// What a container's scrape (or the error reading it) and image say.
pub fn running(image: &str, scrape: Result<&str, &str>) -> Running {
    match scrape {
        Ok(text) => match parse_build_info(text) {
            Some(info) => Running::Meridian(info),
            None => Running::Original(format!(
                "Linkerd's original ({image}): /metrics has no meridian_build_info"
            )),
        },
        Err(error) if is_linkerd_image(image) => Running::Original(format!(
            "Linkerd's original ({image}; /metrics not read: {error})"
        )),
        Err(error) => Running::Unknown(format!("/metrics not read: {error}")),
    }
}

/// One controller container of a running pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerStatus {
    pub container: String,
    pub image: String,
    pub running: Running,
}

/// One pod of the destination Deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodStatus {
    pub name: String,
    /// The pod's phase (`Running`, `Pending`, …).
    pub phase: String,
    pub containers: Vec<ContainerStatus>,
}

/// The verdict: lines to print after the table, and the exit status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub lines: Vec<String>,
    /// 0: every pod runs Meridian; 1: an original runs or the swap was
    /// reverted; 2: a container could not be told.
    pub code: i32,
}

/// The verdict on the Deployment `deployment` (its pod template's
/// controller containers and images) and its pods.
pub fn verdict(deployment: &str, template: &[(String, String)], pods: &[PodStatus]) -> Verdict {
    let mut lines = Vec::new();
    let mut code = 0;
    let reverted: Vec<&str> = template
        .iter()
        .filter(|(_, image)| is_linkerd_image(image))
        .map(|(container, _)| container.as_str())
        .collect();
    if !reverted.is_empty() {
        lines.push(format!(
            "reverted: the pod template of {deployment} runs Linkerd's own image in {} \
             (a chart render such as `helm upgrade` or `linkerd upgrade` put the original back)",
            reverted.join(", ")
        ));
        code = 1;
    }
    for pod in pods {
        for c in &pod.containers {
            match template.iter().find(|(name, _)| *name == c.container) {
                Some((_, image)) if *image != c.image => lines.push(format!(
                    "rollout in progress: pod {} runs {} in {} where the template has {image}",
                    pod.name, c.image, c.container
                )),
                Some(_) => {}
                None => lines.push(format!(
                    "rollout in progress: pod {} has a container {} the template does not",
                    pod.name, c.container
                )),
            }
            match &c.running {
                Running::Meridian(_) => {}
                Running::Original(_) => {
                    lines.push(format!(
                        "original: pod {} runs Linkerd's {} container",
                        pod.name, c.container
                    ));
                    code = 1;
                }
                Running::Unknown(why) => {
                    lines.push(format!(
                        "unknown: pod {} container {}: {why}",
                        pod.name, c.container
                    ));
                    if code == 0 {
                        code = 2;
                    }
                }
            }
        }
    }
    if pods.is_empty() {
        lines.push(format!("unknown: {deployment} has no pods"));
        if code == 0 {
            code = 2;
        }
    }
    if code == 0 {
        lines.push(format!("ok: every pod of {deployment} runs Meridian"));
    }
    Verdict { lines, code }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = "# HELP meridian_build_info Meridian's version\n\
        # TYPE meridian_build_info gauge\n\
        meridian_build_info{version=\"0.1.0\",commit=\"abc1234\",profile=\"release\"} 1\n\
        process_threads 7\n";

    fn info() -> BuildInfo {
        BuildInfo {
            version: "0.1.0".into(),
            commit: "abc1234".into(),
            profile: "release".into(),
        }
    }

    #[test]
    fn build_info_is_read_from_a_scrape() {
        assert_eq!(parse_build_info(SCRAPE), Some(info()));
        assert_eq!(parse_build_info("go_threads 9\n"), None);
        let escaped = "meridian_build_info{commit=\"a\\\"b\",version=\"1\"} 1\n";
        let parsed = parse_build_info(escaped).expect("parsed");
        assert_eq!(
            (parsed.version.as_str(), parsed.commit.as_str()),
            ("1", "a\"b")
        );
        assert_eq!(parse_build_info("meridian_build_info{version=\"1} 1"), None);
    }

    #[test]
    fn linkerd_images_are_told_by_repository() {
        for image in [
            "cr.l5d.io/linkerd/controller:version-2.20",
            "cr.l5d.io/linkerd/controller@sha256:0123",
            "registry.example.com:5000/mirror/linkerd/policy-controller:edge-25.1.1",
            "linkerd/controller",
        ] {
            assert!(is_linkerd_image(image), "{image}");
        }
        for image in [
            "registry.example.com/meridian/controller:v0.1.0",
            "meridian/controller:dev",
            "cr.l5d.io/linkerd/proxy:version-2.20",
            "controller:linkerd",
        ] {
            assert!(!is_linkerd_image(image), "{image}");
        }
    }

    fn pod(name: &str, image: &str, running: Running) -> PodStatus {
        PodStatus {
            name: name.into(),
            phase: "Running".into(),
            containers: vec![ContainerStatus {
                container: "destination".into(),
                image: image.into(),
                running,
            }],
        }
    }

    const MERIDIAN: &str = "registry.example.com/meridian/controller:v0.1.0";
    const LINKERD: &str = "cr.l5d.io/linkerd/controller:version-2.20";

    #[test]
    fn every_pod_on_meridian_is_0() {
        let template = [("destination".to_string(), MERIDIAN.to_string())];
        let pods = [pod("a", MERIDIAN, Running::Meridian(info()))];
        let v = verdict("linkerd/linkerd-destination", &template, &pods);
        assert_eq!(v.code, 0, "{v:?}");
    }

    #[test]
    fn a_template_with_linkerds_image_is_reverted() {
        let template = [("destination".to_string(), LINKERD.to_string())];
        let pods = [pod("a", MERIDIAN, Running::Meridian(info()))];
        let v = verdict("linkerd/linkerd-destination", &template, &pods);
        assert_eq!(v.code, 1);
        assert!(v.lines[0].starts_with("reverted:"), "{v:?}");
        assert!(
            v.lines[1].starts_with("rollout in progress: pod a"),
            "{v:?}"
        );
    }

    #[test]
    fn an_original_container_is_1_and_an_unknown_one_2() {
        let template = [("destination".to_string(), MERIDIAN.to_string())];
        let original = running(MERIDIAN, Ok("go_threads 3\n"));
        assert!(matches!(original, Running::Original(_)));
        let v = verdict("d", &template, &[pod("a", MERIDIAN, original)]);
        assert_eq!(v.code, 1, "{v:?}");
        let unknown = running(MERIDIAN, Err("connection refused"));
        assert!(matches!(unknown, Running::Unknown(_)));
        let v = verdict("d", &template, &[pod("a", MERIDIAN, unknown)]);
        assert_eq!(v.code, 2, "{v:?}");
        assert!(matches!(
            running(LINKERD, Err("pod not running")),
            Running::Original(_)
        ));
        assert_eq!(verdict("d", &template, &[]).code, 2);
    }
}
