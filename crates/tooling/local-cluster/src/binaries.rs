//! The pinned Kubernetes, etcd and CoreDNS versions, the cache directories
//! keyed by them, and the Go builds that fill them (only when the pins
//! change). CoreDNS (the real node's cluster DNS) and Helm are single
//! [`GoTool`]s built apart, on first use, so that the kubelet-less control
//! plane never waits for them.

use std::{
    fs,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

/// Errors while locating or building the control-plane binaries.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("failed to read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} does not require {module}")]
    MissingPin { path: PathBuf, module: &'static str },
    #[error("cannot find a cache directory: set MERIDIAN_CACHE_DIR or HOME")]
    NoCacheDir,
    #[error("failed to prepare {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to run `{command}`: {source} (is Go installed and on PATH?)")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed with {status}; last output:\n{tail}")]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        tail: String,
    },
}

/// The versions pinned by the Go wrapper modules in `xtask/gotools/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pins {
    /// `k8s.io/kubernetes` version, e.g. `v1.36.3`.
    pub kubernetes: String,
    /// `go.etcd.io/etcd/server/v3` version, e.g. `v3.6.13`.
    pub etcd: String,
}

const KUBE_MODULE: &str = "k8s.io/kubernetes";
const ETCD_MODULE: &str = "go.etcd.io/etcd/server/v3";
const COREDNS_MODULE: &str = "github.com/coredns/coredns";

/// The directory holding the Go wrapper modules (`kubebin`, `etcdbin`,
/// `corednsbin`).
pub fn gotools_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../xtask/gotools")
}

impl Pins {
    /// Reads the pins from the wrapper modules' `go.mod` files: the single
    /// source of truth for which versions Meridian tests against.
    pub fn from_gotools(dir: &Path) -> Result<Self, BuildError> {
        Ok(Self {
            kubernetes: required_version(&dir.join("kubebin/go.mod"), KUBE_MODULE)?,
            etcd: required_version(&dir.join("etcdbin/go.mod"), ETCD_MODULE)?,
        })
    }

    /// The Kubernetes minor version number (`36` for `v1.36.3`).
    pub fn kubernetes_minor(&self) -> &str {
        self.kubernetes.split('.').nth(1).unwrap_or("0")
    }
}

fn read(path: &Path) -> Result<String, BuildError> {
    fs::read_to_string(path).map_err(|source| BuildError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Finds `module vX.Y.Z` in a go.mod `require` line or block.
fn required_version(go_mod: &Path, module: &'static str) -> Result<String, BuildError> {
    let text = read(go_mod)?;
    text.lines()
        .map(|line| line.trim().trim_start_matches("require").trim())
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some(module))
                .then(|| words.next().map(str::to_string))
                .flatten()
        })
        .ok_or(BuildError::MissingPin {
            path: go_mod.to_path_buf(),
            module,
        })
}

/// Paths of the built binaries: the control plane, kubectl, and the real
/// node's kube-scheduler, kubelet and kube-proxy.
#[derive(Clone, Debug)]
pub struct KubeBinaries {
    pub dir: PathBuf,
    pub pins: Pins,
}

impl KubeBinaries {
    pub fn etcd(&self) -> PathBuf {
        self.dir.join("etcd")
    }
    pub fn kube_apiserver(&self) -> PathBuf {
        self.dir.join("kube-apiserver")
    }
    pub fn kube_controller_manager(&self) -> PathBuf {
        self.dir.join("kube-controller-manager")
    }
    /// kubectl of the same version as the apiserver.
    pub fn kubectl(&self) -> PathBuf {
        self.dir.join("kubectl")
    }
    /// kube-scheduler (real-node mode only).
    pub fn kube_scheduler(&self) -> PathBuf {
        self.dir.join("kube-scheduler")
    }
    /// kubelet (real-node mode only).
    pub fn kubelet(&self) -> PathBuf {
        self.dir.join("kubelet")
    }
    /// kube-proxy (real-node mode only).
    pub fn kube_proxy(&self) -> PathBuf {
        self.dir.join("kube-proxy")
    }

    fn complete_marker(&self) -> PathBuf {
        self.dir.join(".complete")
    }

    /// Whether a previous build finished in this directory.
    pub fn is_built(&self) -> bool {
        self.complete_marker().exists()
            && [
                self.etcd(),
                self.kube_apiserver(),
                self.kube_controller_manager(),
                self.kubectl(),
                self.kube_scheduler(),
                self.kubelet(),
                self.kube_proxy(),
            ]
            .iter()
            .all(|p| p.is_file())
    }

    /// The binaries for the current pins, building them if the cache lacks
    /// them. Concurrent callers (several test binaries) wait on a file lock,
    /// so only one builds. `progress` receives human-readable lines.
    pub fn ensure(progress: &dyn Fn(&str)) -> Result<Self, BuildError> {
        let gotools = gotools_dir();
        let pins = Pins::from_gotools(&gotools)?;
        let root = cache_root()?.join("kube-bin");
        let key = cache_key(&gotools, &pins)?;
        let bins = KubeBinaries {
            dir: root.join(key),
            pins,
        };
        if bins.is_built() {
            return Ok(bins);
        }
        let _lock = build_lock(&root)?;
        if !bins.is_built() {
            bins.build(&gotools, progress)?;
        }
        Ok(bins)
    }

    fn build(&self, gotools: &Path, progress: &dyn Fn(&str)) -> Result<(), BuildError> {
        let started = Instant::now();
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| BuildError::Io { path, source }
        };
        fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        progress(&format!(
            "building kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl {} and etcd {} into {} (first time only; several minutes)",
            self.pins.kubernetes,
            self.pins.etcd,
            self.dir.display()
        ));
        let k8s = &self.pins.kubernetes;
        let minor = self.pins.kubernetes_minor();
        let ldflags = format!(
            "-s -w -X k8s.io/component-base/version.gitVersion={k8s} \
             -X k8s.io/component-base/version.gitMajor=1 \
             -X k8s.io/component-base/version.gitMinor={minor} \
             -X k8s.io/component-base/version.gitTreeState=clean \
             -X k8s.io/client-go/pkg/version.gitVersion={k8s}"
        );
        let out_dir = format!("{}/", self.dir.display());
        go_build(
            &gotools.join("kubebin"),
            &[
                "-ldflags",
                &ldflags,
                "-o",
                &out_dir,
                "k8s.io/kubernetes/cmd/kube-apiserver",
                "k8s.io/kubernetes/cmd/kube-controller-manager",
                "k8s.io/kubernetes/cmd/kubectl",
                "k8s.io/kubernetes/cmd/kube-scheduler",
                "k8s.io/kubernetes/cmd/kubelet",
                "k8s.io/kubernetes/cmd/kube-proxy",
            ],
            progress,
        )?;
        go_build(
            &gotools.join("etcdbin"),
            &[
                "-ldflags",
                "-s -w",
                "-o",
                &self.etcd().display().to_string(),
                ETCD_MODULE,
            ],
            progress,
        )?;
        fs::write(
            self.complete_marker(),
            format!("{k8s} {}\n", self.pins.etcd),
        )
        .map_err(io(&self.complete_marker()))?;
        progress(&format!(
            "built control-plane and node binaries in {:.0}s",
            started.elapsed().as_secs_f64()
        ));
        Ok(())
    }
}

/// One Go program built from a wrapper module of `xtask/gotools/` and
/// cached by its pinned version under `<cache>/<name>/`.
#[derive(Clone, Copy, Debug)]
pub struct GoTool {
    /// The binary's (and the cache directory's) name, e.g. `coredns`.
    pub name: &'static str,
    /// The wrapper module's directory under `xtask/gotools/`.
    pub module_dir: &'static str,
    /// The module whose required version names the build, e.g. `github.com/coredns/coredns`.
    pub pinned_module: &'static str,
    /// What `go build` builds inside the wrapper module (`.` or a package path).
    pub package: &'static str,
    /// The wrapper module's files that make up the cache key.
    pub files: &'static [&'static str],
}

/// The real node's cluster DNS server: CoreDNS built from
/// `xtask/gotools/corednsbin` (only the plugins its Corefile uses; nothing
/// that forwards a query).
pub const COREDNS: GoTool = GoTool {
    name: "coredns",
    module_dir: "corednsbin",
    pinned_module: COREDNS_MODULE,
    package: ".",
    files: &["go.mod", "go.sum", "main.go"],
};

/// Helm 3 (`helm.sh/helm/v3/cmd/helm`, pinned by `xtask/gotools/helmbin`),
/// which `cargo xtask e2e linkerd` installs Linkerd 2.20 with.
pub const HELM: GoTool = GoTool {
    name: "helm",
    module_dir: "helmbin",
    pinned_module: "helm.sh/helm/v3",
    package: "helm.sh/helm/v3/cmd/helm",
    files: &["go.mod", "go.sum", "tools.go"],
};

/// A [`GoTool`] built and cached.
#[derive(Clone, Debug)]
pub struct ToolBinary {
    /// The static binary.
    pub path: PathBuf,
    /// The pinned version of the tool's module, e.g. `v1.15.0`.
    pub version: String,
    /// Seconds the Go build took (0 when found in the cache).
    pub build_secs: f64,
}

impl ToolBinary {
    /// The binary for the current pin, built if the cache lacks it (one
    /// builder at a time across processes, like [`KubeBinaries::ensure`]).
    pub fn ensure(tool: &GoTool, progress: &dyn Fn(&str)) -> Result<Self, BuildError> {
        let module = gotools_dir().join(tool.module_dir);
        let version = required_version(&module.join("go.mod"), tool.pinned_module)?;
        let mut hash = Fnv1a::default();
        for file in tool.files {
            hash.write(read(&module.join(file))?.as_bytes());
        }
        hash.write(&go_version());
        let root = cache_root()?.join(tool.name);
        let dir = root.join(format!("{}-{version}_{:016x}", tool.name, hash.0));
        let mut binary = ToolBinary {
            path: dir.join(tool.name),
            version,
            build_secs: 0.0,
        };
        let complete = dir.join(".complete");
        let built = |binary: &ToolBinary| complete.exists() && binary.path.is_file();
        if built(&binary) {
            return Ok(binary);
        }
        let _lock = build_lock(&root)?;
        if built(&binary) {
            return Ok(binary);
        }
        let started = Instant::now();
        fs::create_dir_all(&dir).map_err(|source| BuildError::Io {
            path: dir.clone(),
            source,
        })?;
        progress(&format!(
            "building {} {} into {} (first time only; a few minutes)",
            tool.name,
            binary.version,
            dir.display()
        ));
        let out = binary.path.display().to_string();
        go_build(
            &module,
            &["-ldflags", "-s -w", "-o", &out, tool.package],
            progress,
        )?;
        fs::write(&complete, format!("{}\n", binary.version)).map_err(|source| BuildError::Io {
            path: complete.clone(),
            source,
        })?;
        binary.build_secs = started.elapsed().as_secs_f64();
        progress(&format!(
            "built {} {} in {:.0}s",
            tool.name, binary.version, binary.build_secs
        ));
        Ok(binary)
    }
}

/// Creates `root` and takes its `.build.lock` (released when dropped), so
/// that concurrent callers (several test binaries) build only once.
fn build_lock(root: &Path) -> Result<fs::File, BuildError> {
    fs::create_dir_all(root).map_err(|source| BuildError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    let lock_path = root.join(".build.lock");
    let lock = fs::File::create(&lock_path).map_err(|source| BuildError::Io {
        path: lock_path.clone(),
        source,
    })?;
    lock.lock().map_err(|source| BuildError::Io {
        path: lock_path,
        source,
    })?;
    Ok(lock)
}

/// `go version`'s output (part of every cache key), empty without Go.
fn go_version() -> Vec<u8> {
    Command::new("go")
        .arg("version")
        .output()
        .map(|out| out.stdout)
        .unwrap_or_default()
}

/// `$MERIDIAN_CACHE_DIR`, else `$XDG_CACHE_HOME/meridian`, else `~/.cache/meridian`.
pub fn cache_root() -> Result<PathBuf, BuildError> {
    if let Some(dir) = std::env::var_os("MERIDIAN_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("meridian"));
    }
    std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".cache/meridian"))
        .ok_or(BuildError::NoCacheDir)
}

/// A directory name that changes whenever the pins, the module files or the
/// Go toolchain change.
fn cache_key(gotools: &Path, pins: &Pins) -> Result<String, BuildError> {
    let mut hash = Fnv1a::default();
    for file in [
        "kubebin/go.mod",
        "kubebin/go.sum",
        "etcdbin/go.mod",
        "etcdbin/go.sum",
    ] {
        hash.write(read(&gotools.join(file))?.as_bytes());
    }
    hash.write(&go_version());
    Ok(format!(
        "k8s-{}_etcd-{}_{:016x}",
        pins.kubernetes, pins.etcd, hash.0
    ))
}

/// FNV-1a: a tiny stable hash for cache keys (std's hasher is not stable
/// across Rust releases).
pub(crate) struct Fnv1a(pub(crate) u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Runs `go build -v -trimpath ARGS` in a wrapper module, reporting progress
/// every few dozen packages and keeping the last lines for errors.
fn go_build(module_dir: &Path, args: &[&str], progress: &dyn Fn(&str)) -> Result<(), BuildError> {
    let command = format!(
        "cd {} && go build -v -trimpath {}",
        module_dir.display(),
        args.join(" ")
    );
    let mut child = Command::new("go")
        .arg("build")
        .arg("-v")
        .arg("-trimpath")
        .args(args)
        .current_dir(module_dir)
        .env("GOWORK", "off")
        .env("CGO_ENABLED", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| BuildError::Spawn {
            command: command.clone(),
            source,
        })?;
    let started = Instant::now();
    let mut tail = std::collections::VecDeque::with_capacity(40);
    let mut packages = 0usize;
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            packages += 1;
            if packages.is_multiple_of(250) {
                progress(&format!(
                    "  … {packages} packages compiled ({:.0}s), now {line}",
                    started.elapsed().as_secs_f64()
                ));
            }
            if tail.len() == 40 {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    }
    let status = child.wait().map_err(|source| BuildError::Spawn {
        command: command.clone(),
        source,
    })?;
    if !status.success() {
        return Err(BuildError::Failed {
            command,
            status,
            tail: Vec::from(tail).join("\n"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_read_from_the_wrapper_modules() {
        let pins = Pins::from_gotools(&gotools_dir()).expect("pins");
        assert!(pins.kubernetes.starts_with("v1."), "{pins:?}");
        assert!(pins.etcd.starts_with("v3."), "{pins:?}");
        assert!(pins.kubernetes_minor().parse::<u32>().is_ok());
        let coredns = required_version(&gotools_dir().join("corednsbin/go.mod"), COREDNS_MODULE)
            .expect("coredns pin");
        assert!(coredns.starts_with("v1."), "{coredns}");
    }

    #[test]
    fn required_version_handles_blocks_and_single_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("go.mod");
        fs::write(
            &path,
            "module x\n\ngo 1.26\n\nrequire k8s.io/kubernetes v1.2.3\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 v3.6.1 // indirect\n)\n",
        )
        .expect("write");
        assert_eq!(
            required_version(&path, KUBE_MODULE).expect("kube"),
            "v1.2.3"
        );
        assert_eq!(
            required_version(&path, ETCD_MODULE).expect("etcd"),
            "v3.6.1"
        );
        fs::write(&path, "module x\n").expect("write");
        assert!(matches!(
            required_version(&path, KUBE_MODULE),
            Err(BuildError::MissingPin { .. })
        ));
    }
}
