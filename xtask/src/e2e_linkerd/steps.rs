//! The steps of `cargo xtask e2e linkerd`, in order, each printed with its
//! figures:
//!
//! 1. Linkerd 2.20 installed with `helm install` (CRDs, control plane),
//!    `linkerd check` green;
//! 2. meshed workloads (Linkerd's injector and identity) and what their
//!    clients see: the HTTPRoute's header split, the ServiceProfile's
//!    route, the StatefulSet's hostname, the AuthorizationPolicy's 403;
//!    `web-b` rolled, counted;
//! 3. Meridian's shadow (`deploy/shadow-compare`) and `meridian-cli
//!    compare` against Linkerd's own `linkerd-destination`, once through
//!    port-forwards and left running in the cluster (its metrics);
//! 4. the swap as the README tells it (`helm upgrade` with
//!    `deploy/swap/helm-post-renderer`) under traffic, with the failed
//!    requests counted; `meridian-cli status`, `linkerd check` and
//!    `linkerd diagnostics` against Meridian;
//! 5. the behaviours of step 2 again, served by Meridian, with a server
//!    rolled so that new endpoints come from Meridian;
//! 6. a plain `helm upgrade` (puts Linkerd's images back, counted) and
//!    what `linkerd upgrade` would render; the swap again;
//! 7. `kubectl rollout undo` and `helm rollback` under traffic, counted,
//!    and `linkerd check`.
//!
//! A step that finds a fault records it and the run goes on where the
//! next step still means something; the run fails at the end if any was
//! recorded.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::bail;

use super::{
    inputs::{self, Helm, Inputs, output_of},
    now_secs,
    traffic::{self, Tally},
};

/// The workloads' namespace (see `workloads.yaml`).
const NS: &str = "l5d-e2e";
/// Linkerd's control-plane namespace.
const LINKERD_NS: &str = "linkerd";
/// The Deployment the swap rolls.
const DESTINATION: (&str, &str) = (LINKERD_NS, "deploy/linkerd-destination");
/// The Helm release of the control plane.
const RELEASE: &str = "linkerd-control-plane";
/// How long traffic is watched after a step settles.
const OBSERVE: Duration = Duration::from_secs(20);
/// How long a rollout is given after it reports done before its window
/// closes (late failures count too).
const SETTLE: Duration = Duration::from_secs(10);

/// `workloads.yaml` with its images.
pub fn workloads_yaml(http_image: &str, client_image: &str) -> String {
    include_str!("workloads.yaml")
        .replace("HTTP_IMAGE", http_image)
        .replace("CLIENT_IMAGE", client_image)
}

/// Prints steps and their details with the time since the start.
pub struct Say {
    started: Instant,
}

impl Say {
    pub fn new(started: Instant) -> Self {
        Self { started }
    }

    pub fn step(&self, what: &str) {
        eprintln!(
            "[e2e linkerd {:>6.1}s] {what}",
            self.started.elapsed().as_secs_f64()
        );
    }

    pub fn detail(&self, what: &str) {
        eprintln!("  {what}");
    }

    /// A command's output, indented, on stdout (the record of the run).
    pub fn output(&self, title: &str, text: &str) {
        println!("---- {title}");
        for line in text.lines() {
            println!("  {line}");
        }
    }
}

/// One run against one cluster.
pub struct Run {
    pub say: Say,
    pub kubectl: PathBuf,
    pub kubeconfig: PathBuf,
    pub helm: Helm,
    pub linkerd_cli: PathBuf,
    pub meridian_cli: PathBuf,
    pub meridian_image: String,
    pub version: String,
    pub values: Vec<PathBuf>,
    pub workdir: PathBuf,
    pub workloads: String,
    pub repo: PathBuf,
    /// The charts as Helm installs them (set by [`Run::charts_from`]).
    pub charts: PathBuf,
    /// Faults found so far, one line each.
    pub failures: Vec<String>,
}

impl Run {
    pub fn charts_from(&mut self, inputs: &Inputs) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.workdir)?;
        self.charts = inputs::ready_charts(&self.helm, inputs)?;
        Ok(())
    }

    pub fn all_steps(&mut self) -> anyhow::Result<()> {
        self.install()?;
        self.mesh()?;
        self.compare()?;
        self.swap()?;
        self.served_by_meridian()?;
        self.reverts()?;
        self.rollback()
    }

    /// Ok when no step recorded a fault; else every fault.
    pub fn verdict(&self) -> anyhow::Result<()> {
        if self.failures.is_empty() {
            println!("e2e linkerd: every step passed");
            return Ok(());
        }
        bail!(
            "e2e linkerd: {} fault(s):\n  {}",
            self.failures.len(),
            self.failures.join("\n  ")
        )
    }

    fn fault(&mut self, what: String) {
        eprintln!("  FAULT: {what}");
        self.failures.push(what);
    }

    fn kubectl(&self, args: &[&str]) -> anyhow::Result<String> {
        self.kubectl_stdin(args, None)
    }

    fn kubectl_stdin(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        let (ok, out) = local_cluster::kubectl::run(&self.kubectl, &self.kubeconfig, args, stdin)?;
        if !ok {
            bail!("kubectl {} failed:\n{out}", args.join(" "));
        }
        Ok(out)
    }

    /// Runs a CLI (Linkerd's or Meridian's) against the cluster: whether
    /// it succeeded and what it printed.
    fn cli(&self, binary: &Path, args: &[&str]) -> anyhow::Result<(bool, String)> {
        let output = Command::new(binary)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .output()?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        Ok((output.status.success(), text))
    }

    /// `linkerd check`, printed; a fault unless it passes. `--expected-version`
    /// keeps its version checks off the network.
    fn linkerd_check(&mut self, when: &str) -> anyhow::Result<()> {
        let version = self.version.clone();
        let (ok, out) = self.cli(
            &self.linkerd_cli.clone(),
            &["check", "--expected-version", &version, "--wait", "5m"],
        )?;
        self.say
            .output(&format!("linkerd check ({when}): exit ok = {ok}"), &out);
        if !ok {
            self.fault(format!("linkerd check failed {when}"));
        }
        Ok(())
    }

    fn rollout(&self, namespace: &str, workload: &str) -> anyhow::Result<()> {
        self.kubectl(&[
            "rollout",
            "status",
            "-n",
            namespace,
            workload,
            "--timeout=300s",
        ])?;
        Ok(())
    }

    /// The clients' logs (both Deployments' `client` containers).
    fn client_logs(&self) -> anyhow::Result<String> {
        let mut logs = String::new();
        for deployment in ["deploy/client", "deploy/intruder"] {
            logs.push_str(&self.kubectl(&["logs", "-n", NS, deployment, "-c", "client"])?);
        }
        Ok(logs)
    }

    /// What the clients saw in `[from, to)`, printed.
    fn window(&self, title: &str, from: u64, to: u64) -> anyhow::Result<BTreeMap<String, Tally>> {
        let tallies = traffic::tally(&self.client_logs()?, from, to);
        self.say.output(
            &format!(
                "{title}: {} s of traffic, {} failed request(s)",
                to.saturating_sub(from),
                traffic::failed(&tallies)
            ),
            &traffic::table(&tallies),
        );
        Ok(tallies)
    }

    /// Watches traffic for [`OBSERVE`] and checks every behaviour.
    fn behaviours(&mut self, title: &str) -> anyhow::Result<()> {
        let from = now_secs();
        std::thread::sleep(OBSERVE);
        let tallies = self.window(title, from, now_secs())?;
        for violation in traffic::violations(&tallies) {
            self.fault(format!("{title}: {violation}"));
        }
        Ok(())
    }

    /// Runs `change` under traffic, waits for `workload`'s rollout and
    /// [`SETTLE`]; a fault for every failed request in that window.
    fn under_traffic(
        &mut self,
        title: &str,
        (namespace, workload): (&str, &str),
        change: impl FnOnce(&Self) -> anyhow::Result<String>,
    ) -> anyhow::Result<()> {
        let from = now_secs();
        let out = change(self)?;
        self.say.output(&format!("{title}: output"), &out);
        self.rollout(namespace, workload)?;
        std::thread::sleep(SETTLE);
        let tallies = self.window(title, from, now_secs())?;
        let failed = traffic::failed(&tallies);
        if failed > 0 {
            self.fault(format!("{title}: {failed} failed request(s)"));
        }
        Ok(())
    }

    /// `helm upgrade` of the control plane, with Meridian's post-renderer
    /// or without.
    fn helm_upgrade(&self, post_renderer: bool) -> anyhow::Result<String> {
        let chart = self
            .charts
            .join("linkerd-control-plane")
            .display()
            .to_string();
        let renderer = self
            .repo
            .join("deploy/swap/helm-post-renderer")
            .display()
            .to_string();
        let mut args = vec![
            "upgrade",
            RELEASE,
            &chart,
            "-n",
            LINKERD_NS,
            "--reuse-values",
            "--wait",
            "--timeout",
            "10m",
        ];
        if post_renderer {
            args.extend(["--post-renderer", &renderer]);
        }
        output_of(
            self.helm
                .command()
                .args(&args)
                .env("MERIDIAN_IMAGE", &self.meridian_image)
                .env("KUBECTL", &self.kubectl),
            &format!("helm {}", args.join(" ")),
        )
    }

    /// `meridian-cli status`, printed; whether it says every destination
    /// pod runs Meridian.
    fn status(&mut self, when: &str, expect_meridian: bool) -> anyhow::Result<()> {
        let (ok, out) = self.cli(&self.meridian_cli.clone(), &["status"])?;
        self.say.output(
            &format!("meridian-cli status ({when}): exit ok = {ok}"),
            &out,
        );
        if ok != expect_meridian {
            self.fault(format!(
                "meridian-cli status {when}: expected {}",
                if expect_meridian {
                    "Meridian serving"
                } else {
                    "Linkerd's images back (exit 1)"
                }
            ));
        }
        Ok(())
    }

    /// Step 1.
    fn install(&mut self) -> anyhow::Result<()> {
        self.say
            .step("step 1: helm install linkerd-crds and linkerd-control-plane");
        let [ca, issuer, key] = inputs::identity_certs(&self.workdir.join("identity"))?;
        let crds = self.charts.join("linkerd-crds").display().to_string();
        // With the Gateway API CRDs, as `linkerd upgrade` (step 6) requires.
        let out = self.helm.run(&[
            "install",
            "linkerd-crds",
            &crds,
            "-n",
            LINKERD_NS,
            "--create-namespace",
            "--set",
            "installGatewayAPI=true",
            "--wait",
        ])?;
        self.say.output("helm install linkerd-crds", &out);
        let chart = self
            .charts
            .join("linkerd-control-plane")
            .display()
            .to_string();
        let files = [
            format!("identityTrustAnchorsPEM={}", ca.display()),
            format!("identity.issuer.tls.crtPEM={}", issuer.display()),
            format!("identity.issuer.tls.keyPEM={}", key.display()),
        ];
        let version = format!("linkerdVersion={}", self.version);
        // The heartbeat CronJob reports to versioncheck.linkerd.io: this
        // run's traffic stays on this machine.
        let mut args = vec![
            "install",
            RELEASE,
            &chart,
            "-n",
            LINKERD_NS,
            "--set",
            &version,
            "--set",
            "disableHeartBeat=true",
            "--wait",
            "--timeout",
            "10m",
        ];
        for file in &files {
            args.extend(["--set-file", file]);
        }
        let values: Vec<String> = self
            .values
            .iter()
            .map(|v| v.display().to_string())
            .collect();
        for file in &values {
            args.extend(["-f", file]);
        }
        let started = Instant::now();
        let out = self.helm.run(&args)?;
        self.say.output(
            &format!(
                "helm install {RELEASE} ({:.0} s)",
                started.elapsed().as_secs_f64()
            ),
            &out,
        );
        let pods = self.kubectl(&["get", "pods", "-n", LINKERD_NS, "-o", "wide"])?;
        self.say.output("kubectl get pods -n linkerd", &pods);
        self.linkerd_check("after the install")
    }

    /// Step 2.
    fn mesh(&mut self) -> anyhow::Result<()> {
        self.say
            .step("step 2: meshed workloads, injected by Linkerd's proxy injector");
        let out = self.kubectl_stdin(&["apply", "-f", "-"], Some(&self.workloads.clone()))?;
        self.say.output("kubectl apply (workloads.yaml)", &out);
        for workload in [
            "deploy/web-a",
            "deploy/web-b",
            "statefulset/db",
            "deploy/client",
            "deploy/intruder",
        ] {
            self.rollout(NS, workload)?;
        }
        let pods = self.kubectl(&[
            "get",
            "pods",
            "-n",
            NS,
            "-o",
            "custom-columns=POD:.metadata.name,INIT:.spec.initContainers[*].name,CONTAINERS:.spec.containers[*].name,IDENTITY:.spec.serviceAccountName",
        ])?;
        self.say.output("the meshed pods", &pods);
        let unmeshed: Vec<&str> = pods
            .lines()
            .skip(1)
            .filter(|line| !line.contains("linkerd-proxy"))
            .collect();
        if !unmeshed.is_empty() {
            self.fault(format!("pods without a proxy: {unmeshed:?}"));
        }
        self.until_every_target_answers()?;
        self.behaviours("step 2: served by Linkerd")?;
        self.roll_web_b("step 2: web-b rolled under Linkerd")
    }

    /// Waits (up to 2 minutes) until each client target's latest request
    /// behaved as it must: the clients started with their servers, and a
    /// name looked up before its pod was ready stays unknown while the
    /// cluster DNS caches the answer.
    fn until_every_target_answers(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(120) {
            let now = now_secs();
            let latest = traffic::tally(&self.client_logs()?, now.saturating_sub(2), now + 1);
            if traffic::violations(&latest).is_empty() {
                self.say.detail(&format!(
                    "every target answers as it must after {:.0} s",
                    started.elapsed().as_secs_f64()
                ));
                return Ok(());
            }
            std::thread::sleep(Duration::from_secs(2));
        }
        self.fault("the clients' targets did not all answer within 2 minutes".into());
        Ok(())
    }

    /// Step 3.
    fn compare(&mut self) -> anyhow::Result<()> {
        self.say.step(
            "step 3: Meridian's shadow beside Linkerd (deploy/shadow-compare), meridian-cli compare",
        );
        let shadow = self
            .repo
            .join("deploy/shadow-compare")
            .display()
            .to_string();
        self.kubectl(&["apply", "-k", &shadow])?;
        let image = format!("destination={0},policy={0}", self.meridian_image);
        let mut set_image = vec![
            "set",
            "image",
            "-n",
            "meridian-shadow",
            "deploy/meridian-shadow",
        ];
        set_image.extend(image.split(','));
        self.kubectl(&set_image)?;
        let compare_image = format!("compare={}", self.meridian_image);
        self.kubectl(&[
            "set",
            "image",
            "-n",
            "meridian-shadow",
            "deploy/meridian-compare",
            &compare_image,
        ])?;
        self.rollout("meridian-shadow", "deploy/meridian-shadow")?;
        self.kubectl(&[
            "wait",
            "-n",
            "meridian-shadow",
            "--for=condition=Ready",
            "pod",
            "-l",
            "app.kubernetes.io/name=meridian-shadow",
            "--timeout=120s",
        ])?;
        let (ok, out) = self.cli(
            &self.meridian_cli.clone(),
            &[
                "compare",
                "--port-forward",
                "--original",
                "a",
                "--a",
                "linkerd/linkerd-destination",
                "--b",
                "meridian-shadow/meridian-shadow",
            ],
        )?;
        self.say.output(
            &format!(
                "meridian-cli compare (a: Linkerd 2.20, b: Meridian's shadow): exit ok = {ok}"
            ),
            &out,
        );
        if !ok {
            let pods = self.kubectl(&["describe", "pods", "-n", "meridian-shadow"])?;
            self.say.output("the shadow's pods", &pods);
            self.fault("compare: Linkerd's destination and Meridian's shadow differ".into());
        }
        self.compare_left_running()?;
        self.kubectl(&["delete", "-k", &shadow, "--wait=false"])?;
        Ok(())
    }

    /// `deploy/shadow-compare`'s Deployment: Ready once its first round
    /// ended; its metrics, read through the API server's pod proxy.
    fn compare_left_running(&mut self) -> anyhow::Result<()> {
        self.rollout("meridian-shadow", "deploy/meridian-compare")?;
        let pod = self.kubectl(&[
            "get",
            "pods",
            "-n",
            "meridian-shadow",
            "-l",
            "app.kubernetes.io/name=meridian-compare",
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ])?;
        let path = format!(
            "/api/v1/namespaces/meridian-shadow/pods/{}:9995/proxy/metrics",
            pod.trim()
        );
        let metrics = self.kubectl(&["get", "--raw", &path])?;
        let series: Vec<&str> = metrics
            .lines()
            .filter(|line| line.starts_with("meridian_compare_") && !line.ends_with(" 0"))
            .collect();
        self.say.output(
            "meridian-compare (compare --every, in the cluster through the Services): its non-zero series",
            &series.join("\n"),
        );
        let differing = series.iter().any(|line| {
            line.starts_with("meridian_compare_questions")
                && (line.contains("verdict=\"different\"")
                    || line.contains("verdict=\"failed_one_side\"")
                    || line.contains("verdict=\"not_asked\""))
        });
        let equal_round = series
            .iter()
            .any(|line| line.starts_with("meridian_compare_rounds_total{exit=\"0\"}"));
        if differing || !equal_round {
            let log =
                self.kubectl(&["logs", "-n", "meridian-shadow", "deploy/meridian-compare"])?;
            self.say.output("meridian-compare's log", &log);
            self.fault("compare left running: its first round was not all equal".into());
        }
        Ok(())
    }

    /// Step 4.
    fn swap(&mut self) -> anyhow::Result<()> {
        self.say.step(
            "step 4: the swap (helm upgrade --post-renderer deploy/swap/helm-post-renderer) under traffic",
        );
        self.under_traffic("step 4: the swap", DESTINATION, |run| {
            run.helm_upgrade(true)
        })?;
        self.status("after the swap", true)?;
        let pods = self.kubectl(&[
            "get",
            "pods",
            "-n",
            LINKERD_NS,
            "-l",
            "linkerd.io/control-plane-component=destination",
            "-o",
            "custom-columns=POD:.metadata.name,IMAGES:.spec.containers[*].image,READY:.status.containerStatuses[*].ready",
        ])?;
        self.say.output(
            "the destination pod: its containers' images and readiness",
            &pods,
        );
        self.proxy_talks_to_meridian()?;
        self.linkerd_check("after the swap")?;
        for args in [
            vec![
                "diagnostics",
                "endpoints",
                "web.l5d-e2e.svc.cluster.local:8080",
            ],
            vec![
                "diagnostics",
                "profile",
                "web-a.l5d-e2e.svc.cluster.local:8080",
            ],
            vec!["diagnostics", "policy", "-n", NS, "svc/web", "8080"],
        ] {
            let (ok, out) = self.cli(&self.linkerd_cli.clone(), &args)?;
            self.say.output(
                &format!("linkerd {} (from Meridian): exit ok = {ok}", args.join(" ")),
                &out,
            );
            if !ok || out.trim().is_empty() {
                self.fault(format!("linkerd {} did not answer", args.join(" ")));
            }
        }
        Ok(())
    }

    /// The destination pod's own proxy asks its destination container
    /// (Meridian now) over the loopback: its control-plane client metrics.
    fn proxy_talks_to_meridian(&mut self) -> anyhow::Result<()> {
        let (ok, out) = self.cli(
            &self.linkerd_cli.clone(),
            &[
                "diagnostics",
                "proxy-metrics",
                "-n",
                LINKERD_NS,
                "deploy/linkerd-destination",
            ],
        )?;
        let control: Vec<&str> = out
            .lines()
            .filter(|line| line.starts_with("control_") && !line.contains("_bucket{"))
            .collect();
        self.say.output(
            "the destination pod's proxy: its control-plane client series",
            &control.join("\n"),
        );
        if !ok || control.is_empty() {
            self.fault("the destination pod's proxy shows no control-plane client series".into());
        }
        Ok(())
    }

    /// Step 5.
    fn served_by_meridian(&mut self) -> anyhow::Result<()> {
        self.say
            .step("step 5: the same behaviours, served by Meridian (web-b rolled: new endpoints)");
        self.roll_web_b("step 5: web-b rolled under Meridian")?;
        self.behaviours("step 5: served by Meridian")
    }

    /// Rolls `web-b` (new endpoints, an old pod draining) under traffic.
    fn roll_web_b(&mut self, title: &str) -> anyhow::Result<()> {
        self.under_traffic(title, (NS, "deploy/web-b"), |run| {
            run.kubectl(&["rollout", "restart", "-n", NS, "deploy/web-b"])
        })
    }

    /// Step 6.
    fn reverts(&mut self) -> anyhow::Result<()> {
        self.say
            .step("step 6: a plain helm upgrade (no post-renderer) under traffic");
        self.under_traffic("step 6: plain helm upgrade", DESTINATION, |run| {
            run.helm_upgrade(false)
        })?;
        self.status("after a plain helm upgrade", false)?;
        self.say
            .step("step 6: what `linkerd upgrade` renders for linkerd-destination (not applied)");
        let (ok, out) = self.cli(&self.linkerd_cli.clone(), &["upgrade"])?;
        let images = destination_images(&out);
        self.say.output(
            &format!("linkerd upgrade: exit ok = {ok}; linkerd-destination's containers"),
            &if images.is_empty() {
                out.lines().take(20).collect::<Vec<_>>().join("\n")
            } else {
                images.join("\n")
            },
        );
        self.say
            .step("step 6: the swap again, so that step 7 has Meridian to roll back");
        self.under_traffic("step 6: the swap again", DESTINATION, |run| {
            run.helm_upgrade(true)
        })?;
        self.status("after the swap again", true)
    }

    /// Step 7.
    fn rollback(&mut self) -> anyhow::Result<()> {
        self.say
            .step("step 7: kubectl rollout undo deployment/linkerd-destination under traffic");
        self.under_traffic("step 7: kubectl rollout undo", DESTINATION, |run| {
            run.kubectl(&[
                "rollout",
                "undo",
                "-n",
                LINKERD_NS,
                "deployment/linkerd-destination",
            ])
        })?;
        self.status("after kubectl rollout undo", false)?;
        self.say
            .step("step 7: helm rollback linkerd-control-plane 1 under traffic");
        self.under_traffic("step 7: helm rollback to revision 1", DESTINATION, |run| {
            run.helm.run(&[
                "rollback",
                RELEASE,
                "1",
                "-n",
                LINKERD_NS,
                "--wait",
                "--timeout",
                "10m",
            ])
        })?;
        self.status("after helm rollback", false)?;
        self.linkerd_check("after the rollbacks")
    }

    /// What a failing run leaves to read.
    pub fn dump_diagnostics(&self) {
        for args in [
            vec!["get", "pods", "-A", "-o", "wide"],
            vec!["describe", "pods", "-n", LINKERD_NS],
            vec!["describe", "pods", "-n", NS],
            vec![
                "logs",
                "-n",
                LINKERD_NS,
                "deploy/linkerd-destination",
                "--all-containers",
                "--tail=60",
            ],
            vec!["get", "events", "-A", "--sort-by=.lastTimestamp"],
        ] {
            if let Ok((_, out)) =
                local_cluster::kubectl::run(&self.kubectl, &self.kubeconfig, &args, None)
            {
                eprintln!("--- kubectl {}\n{out}", args.join(" "));
            }
        }
    }
}

/// `name=image` of each container of the `linkerd-destination` Deployment
/// in rendered manifests, up to the first document that is not YAML.
fn destination_images(manifests: &str) -> Vec<String> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(manifests)
        // A document that does not parse ends the stream (serde_yaml would
        // yield its error again and again).
        .map_while(|document| serde_yaml::Value::deserialize(document).ok())
        .filter(|object| {
            object["kind"].as_str() == Some("Deployment")
                && object["metadata"]["name"].as_str() == Some("linkerd-destination")
        })
        .flat_map(|object| {
            object["spec"]["template"]["spec"]["containers"]
                .as_sequence()
                .cloned()
                .unwrap_or_default()
        })
        .map(|container| {
            format!(
                "{}={}",
                container["name"].as_str().unwrap_or("?"),
                container["image"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_destination_deployments_images_in_rendered_manifests() {
        let rendered = "\
---
kind: Deployment
metadata:
  name: linkerd-identity
spec:
  template:
    spec:
      containers:
      - name: identity
        image: cr.l5d.io/linkerd/controller:v1
---
kind: Deployment
metadata:
  name: linkerd-destination
spec:
  template:
    spec:
      containers:
      - env: []
        image: cr.l5d.io/linkerd/proxy:v1
        name: linkerd-proxy
      - name: destination
        image: \"cr.l5d.io/linkerd/controller:v1\"
";
        assert_eq!(
            destination_images(rendered),
            [
                "linkerd-proxy=cr.l5d.io/linkerd/proxy:v1",
                "destination=cr.l5d.io/linkerd/controller:v1"
            ]
        );
        assert!(destination_images("not: [yaml").is_empty());
    }

    #[test]
    fn the_workloads_name_their_images() {
        let yaml = workloads_yaml("meridian/http-test:k", "meridian/dnsutils:k");
        assert!(!yaml.contains("HTTP_IMAGE") && !yaml.contains("CLIENT_IMAGE"));
        assert!(yaml.contains("image: meridian/http-test:k"));
        assert!(yaml.contains("linkerd.io/inject: enabled"));
    }
}
