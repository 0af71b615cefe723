//! What `cargo xtask e2e linkerd` is handed and never ships: Linkerd
//! 2.20's images (tarballs from `docker save`), its charts and its CLI.
//! Finding them (or the reason to SKIP), loading the images into the local
//! Docker daemon, readying a copy of the charts for Helm, and the mesh's
//! trust anchor and issuer.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, bail};
use local_cluster::certs::LocalCa;

/// The charts the harness installs, as subdirectories of `--linkerd-charts`.
pub const CHARTS: [&str; 3] = ["linkerd-crds", "linkerd-control-plane", "partials"];

/// The inputs as given (flags or their environment variables).
#[derive(Clone, Debug, Default)]
pub struct Given {
    pub images: Option<PathBuf>,
    pub charts: Option<PathBuf>,
    pub cli: Option<PathBuf>,
}

/// The inputs, each present.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// Every `*.tar` of the images directory, in name order.
    pub image_tarballs: Vec<PathBuf>,
    pub charts: PathBuf,
    pub cli: PathBuf,
}

/// Why the harness does not run: printed as `SKIP e2e linkerd: …`.
#[derive(Debug, PartialEq, Eq)]
pub struct Skip(pub String);

impl Given {
    /// The inputs, a reason to SKIP when one is not given at all, or an
    /// error when one is given but unusable (a wrong path is a mistake to
    /// report, not a reason to pass).
    pub fn check(&self) -> anyhow::Result<Result<Inputs, Skip>> {
        let missing: Vec<&str> = [
            (
                self.images.is_none(),
                "--linkerd-images (MERIDIAN_LINKERD_IMAGES)",
            ),
            (
                self.charts.is_none(),
                "--linkerd-charts (MERIDIAN_LINKERD_CHARTS)",
            ),
            (self.cli.is_none(), "--linkerd-cli (MERIDIAN_LINKERD_CLI)"),
        ]
        .into_iter()
        .filter_map(|(absent, flag)| absent.then_some(flag))
        .collect();
        let (Some(images), Some(charts), Some(cli)) = (&self.images, &self.charts, &self.cli)
        else {
            return Ok(Err(Skip(format!(
                "no {}: Linkerd 2.20's images (controller, proxy; proxy-init runs from the proxy image), its charts ({}) and its CLI, which this repository never ships (docs/swap.md, \"In a real Linkerd install\")",
                missing.join(", no "),
                CHARTS.join(", ")
            ))));
        };
        let mut image_tarballs: Vec<PathBuf> = std::fs::read_dir(images)
            .with_context(|| format!("reading --linkerd-images {}", images.display()))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "tar"))
            .collect();
        image_tarballs.sort();
        if image_tarballs.is_empty() {
            bail!(
                "--linkerd-images {} holds no *.tar (docker save output of Linkerd's controller and proxy images)",
                images.display()
            );
        }
        for chart in CHARTS {
            let file = charts.join(chart).join("Chart.yaml");
            if !file.is_file() {
                bail!(
                    "--linkerd-charts {}: no {chart}/Chart.yaml (expected {})",
                    charts.display(),
                    CHARTS.join(", ")
                );
            }
        }
        if !cli.is_file() {
            bail!("--linkerd-cli {}: no such file", cli.display());
        }
        Ok(Ok(Inputs {
            image_tarballs,
            charts: charts.clone(),
            cli: cli.clone(),
        }))
    }
}

/// The images Docker says it loaded from `docker load` output lines
/// (`Loaded image: <ref>`).
pub fn loaded_references(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Loaded image: "))
        .map(|reference| reference.trim().to_string())
        .collect()
}

/// `docker load`s every tarball; returns the references loaded.
pub fn load_images(
    docker: &local_cluster::images::Docker,
    inputs: &Inputs,
) -> anyhow::Result<Vec<String>> {
    let mut references = Vec::new();
    for tarball in &inputs.image_tarballs {
        let output = docker
            .command()
            .args(["load", "-i"])
            .arg(tarball)
            .output()
            .with_context(|| format!("docker load -i {}", tarball.display()))?;
        if !output.status.success() {
            bail!(
                "docker load -i {} failed: {}",
                tarball.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        references.extend(loaded_references(&String::from_utf8_lossy(&output.stdout)));
    }
    Ok(references)
}

/// The chart's `linkerdVersion` (the image tag the chart names), unless it
/// is the source tree's placeholder that Linkerd's release build replaces.
pub fn chart_version(values_yaml: &str) -> Option<String> {
    values_yaml
        .lines()
        .find_map(|line| line.strip_prefix("linkerdVersion:"))
        .map(|value| value.trim().trim_matches('"').to_string())
        .filter(|value| !value.is_empty() && value != "linkerdVersionValue")
}

/// Copies the charts into `work` and resolves their dependency on
/// `partials` (a `file://` repository: nothing is fetched).
/// Helm's config, cache and data live under `work` too.
pub fn ready_charts(helm: &Helm, inputs: &Inputs) -> anyhow::Result<PathBuf> {
    let dir = helm.home.join("charts");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    for chart in CHARTS {
        copy_dir(&inputs.charts.join(chart), &dir.join(chart))?;
    }
    for chart in CHARTS {
        let path = dir.join(chart);
        let manifest = std::fs::read_to_string(path.join("Chart.yaml"))?;
        if manifest.contains("\ndependencies:") {
            helm.run(&["dependency", "update", &path.display().to_string()])?;
        }
    }
    Ok(dir)
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Helm, with its own home (config, cache, data) and the cluster's kubeconfig.
pub struct Helm {
    pub binary: PathBuf,
    pub home: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Helm {
    /// A `helm` command with this run's environment.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_DATA_HOME", self.home.join("data"));
        command
    }

    /// Runs `helm ARGS`; its output, or an error with it.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        output_of(
            self.command().args(args),
            &format!("helm {}", args.join(" ")),
        )
    }
}

/// Runs a command; its stdout and stderr, or an error quoting them.
pub fn output_of(command: &mut Command, what: &str) -> anyhow::Result<String> {
    let output = command
        .output()
        .with_context(|| format!("running {what}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if !output.status.success() {
        bail!("{what} failed with {}:\n{text}", output.status);
    }
    Ok(text)
}

/// The mesh's trust anchor and identity issuer, as the chart takes them
/// (`identityTrustAnchorsPEM`, `identity.issuer.tls.{crtPEM,keyPEM}`),
/// written under `dir`; returns the three files' paths.
pub fn identity_certs(dir: &Path) -> anyhow::Result<[PathBuf; 3]> {
    std::fs::create_dir_all(dir)?;
    let root = LocalCa::new("root.linkerd.cluster.local")?;
    let issuer = root.issue_intermediate_ca("identity.linkerd.cluster.local")?;
    let files = [
        dir.join("ca.crt"),
        dir.join("issuer.crt"),
        dir.join("issuer.key"),
    ];
    std::fs::write(&files[0], root.cert_pem())?;
    std::fs::write(&files[1], &issuer.cert_pem)?;
    std::fs::write(&files[2], &issuer.key_pem)?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_given_is_a_skip_naming_every_flag() {
        let skip = Given::default()
            .check()
            .expect("no error")
            .expect_err("a skip");
        for flag in ["--linkerd-images", "--linkerd-charts", "--linkerd-cli"] {
            assert!(skip.0.contains(flag), "{skip:?} names {flag}");
        }
        let only_cli = Given {
            cli: Some("/bin/true".into()),
            ..Given::default()
        };
        let skip = only_cli.check().expect("no error").expect_err("a skip");
        assert!(!skip.0.contains("--linkerd-cli"), "{skip:?}");
    }

    #[test]
    fn given_but_wrong_is_an_error_not_a_skip() {
        let dir = std::env::temp_dir().join(format!("e2e-linkerd-inputs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("images")).expect("dir");
        let given = Given {
            images: Some(dir.join("images")),
            charts: Some(dir.join("charts")),
            cli: Some(dir.join("linkerd")),
        };
        let error = given.check().expect_err("no tarball");
        assert!(error.to_string().contains("holds no *.tar"), "{error}");
        std::fs::write(dir.join("images/proxy.tar"), b"").expect("tar");
        let error = given.check().expect_err("no charts");
        assert!(
            error.to_string().contains("linkerd-crds/Chart.yaml"),
            "{error}"
        );
        for chart in CHARTS {
            std::fs::create_dir_all(dir.join("charts").join(chart)).expect("chart dir");
            std::fs::write(dir.join("charts").join(chart).join("Chart.yaml"), "").expect("chart");
        }
        let error = given.check().expect_err("no cli");
        assert!(error.to_string().contains("no such file"), "{error}");
        std::fs::write(dir.join("linkerd"), b"").expect("cli");
        let inputs = given.check().expect("ok").expect("inputs");
        assert_eq!(inputs.image_tarballs, vec![dir.join("images/proxy.tar")]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn loaded_references_and_chart_version() {
        let out = "Loaded image: cr.l5d.io/linkerd/proxy:version-2.20\nsomething else\nLoaded image: cr.l5d.io/linkerd/controller:version-2.20\n";
        assert_eq!(
            loaded_references(out),
            [
                "cr.l5d.io/linkerd/proxy:version-2.20",
                "cr.l5d.io/linkerd/controller:version-2.20"
            ]
        );
        assert_eq!(
            chart_version("a: 1\nlinkerdVersion: stable-2.20.1\n"),
            Some("stable-2.20.1".into())
        );
        assert_eq!(chart_version("linkerdVersion: linkerdVersionValue\n"), None);
    }

    #[test]
    fn the_issuer_is_a_ca_signed_by_the_trust_anchor() {
        use x509_parser::prelude::*;
        let dir = std::env::temp_dir().join(format!("e2e-linkerd-certs-{}", std::process::id()));
        let [ca, issuer, key] = identity_certs(&dir).expect("certs");
        let ca_pem = std::fs::read(ca).expect("ca");
        let issuer_pem = std::fs::read(issuer).expect("issuer");
        let (_, ca_pem) = parse_x509_pem(&ca_pem).expect("ca pem");
        let (_, issuer_pem) = parse_x509_pem(&issuer_pem).expect("issuer pem");
        let ca = ca_pem.parse_x509().expect("ca cert");
        let issuer = issuer_pem.parse_x509().expect("issuer cert");
        assert!(issuer.verify_signature(Some(ca.public_key())).is_ok());
        let constraints = issuer
            .basic_constraints()
            .expect("parsed")
            .expect("present")
            .value;
        assert!(constraints.ca);
        assert_eq!(constraints.path_len_constraint, Some(0));
        assert!(
            issuer
                .subject()
                .to_string()
                .contains("identity.linkerd.cluster.local")
        );
        assert!(
            std::fs::read_to_string(key)
                .expect("key")
                .contains("PRIVATE KEY")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
