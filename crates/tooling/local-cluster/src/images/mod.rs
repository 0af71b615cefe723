//! Container images built on this machine, with no registry: the
//! distroless-style runtime base and the DNS debugging image made from
//! Debian packages ([`debian`]), the pause image and the CoreDNS image of the
//! real node, the tiny HTTP server of the end-to-end tests and the Meridian
//! controller image; and loading images into a node's containerd.
//!
//! Each image is tagged twice: `<repo>:<key>`, where the key hashes every
//! input of the image (the package list and the resolved versions, the C
//! source, the compiler version, the binary, the recipe), and `<repo>:dev`. An image
//! whose key tag exists is not built again. Builds are serialised across
//! processes by a file lock under the cache directory.
//!
//! The sources (package list, C files, Dockerfiles) live in `images/` at the
//! workspace root; see its Dockerfiles for how a user with network access
//! builds the same images with `docker build`.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use crate::binaries::{self, BuildError};

pub mod debian;

pub use debian::{DebPackage, ensure_base, ensure_dnsutils, parse_package_list};

/// The runtime root filesystem of the Meridian image (glibc, libgcc_s, CA
/// certificates, tzdata, netbase), made from Debian packages.
pub const BASE_REPO: &str = "meridian/base-debian12";
/// The pod sandbox image of the real node.
pub const PAUSE_REPO: &str = "meridian/pause";
/// The end-to-end tests' HTTP server (see `images/http-test/http-test.c`).
pub const HTTP_TEST_REPO: &str = "meridian/http-test";
/// The DNS debugging image (`getent`, BusyBox's `nslookup`; see
/// `images/dnsutils/`).
pub const DNSUTILS_REPO: &str = "meridian/dnsutils";
/// The real node's cluster DNS server (CoreDNS built from
/// `xtask/gotools/corednsbin`).
pub const COREDNS_REPO: &str = "meridian/coredns";
/// The Meridian controller image (`/controller`, `/destination`,
/// `/sp-validator`, `/linkerd-policy-controller`, and `/meridian-cli` for
/// `deploy/shadow-compare`).
pub const CONTROLLER_REPO: &str = "meridian/controller";
/// The stable tag every image also gets. Not `latest`, so that the kubelet's
/// default pull policy is `IfNotPresent` and never tries a registry.
pub const DEV_TAG: &str = "dev";
/// The UID (and GID) the images run as: the chart's `controllerUID`.
pub const IMAGE_UID: u32 = 2103;

/// Bumped whenever the way an image is assembled changes, so that cached
/// images made by an older recipe are rebuilt.
const RECIPE: &str = "meridian-images-1";

/// Errors while building or loading images.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("failed to run `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed with {status}:\n{output}")]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        output: String,
    },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Cache(#[from] BuildError),
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ImageError {
    let context = context.into();
    move |source| ImageError::Io { context, source }
}

/// `images/` at the workspace root: package lists, C sources, Dockerfiles.
pub fn images_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../images")
}

/// Runs a command and returns its stdout; on failure, its combined output.
fn run(command: &mut Command) -> Result<String, ImageError> {
    let shown = show(command);
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|source| ImageError::Spawn {
            command: shown.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(ImageError::Failed {
            command: shown,
            status: out.status,
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn show(command: &Command) -> String {
    let mut shown = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        shown.push(' ');
        shown.push_str(&arg.to_string_lossy());
    }
    shown
}

/// The Docker CLI: `$MERIDIAN_DOCKER`, else Debian's `/usr/bin/docker`
/// (preferred over whatever `docker` comes first on `PATH`), else `docker`.
#[derive(Clone, Debug)]
pub struct Docker {
    program: PathBuf,
}

impl Docker {
    pub fn locate() -> Self {
        let program = std::env::var_os("MERIDIAN_DOCKER")
            .map(PathBuf::from)
            .or_else(|| {
                let debian = PathBuf::from("/usr/bin/docker");
                debian.is_file().then_some(debian)
            })
            .unwrap_or_else(|| PathBuf::from("docker"));
        Self { program }
    }

    /// A `docker` command with BuildKit on (it skips unused build stages).
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.env("DOCKER_BUILDKIT", "1");
        command
    }

    /// Fails with a hint unless a Docker daemon answers.
    pub fn check_daemon(&self) -> Result<(), ImageError> {
        run(self
            .command()
            .args(["version", "--format", "{{.Server.Version}}"]))
        .map(|_| ())
        .map_err(|e| {
            ImageError::Invalid(format!(
                "no Docker daemon answers ({e}); run `.ci/install-node-deps` (installs docker.io and starts dockerd)"
            ))
        })
    }

    /// Whether the image exists locally.
    pub fn has_image(&self, reference: &str) -> bool {
        self.command()
            .args(["image", "inspect", "--format", "{{.Id}}", reference])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The image's size in bytes, as `docker images` counts it.
    pub fn image_size(&self, reference: &str) -> Result<u64, ImageError> {
        let out =
            run(self
                .command()
                .args(["image", "inspect", "--format", "{{.Size}}", reference]))?;
        out.trim()
            .parse()
            .map_err(|_| ImageError::Invalid(format!("docker reported size {out:?}")))
    }

    /// `docker tag source target`.
    pub fn tag(&self, source: &str, target: &str) -> Result<(), ImageError> {
        run(self.command().args(["tag", source, target])).map(|_| ())
    }

    /// `docker save -o file references…`.
    pub fn save(&self, file: &Path, references: &[&str]) -> Result<(), ImageError> {
        run(self
            .command()
            .arg("save")
            .arg("-o")
            .arg(file)
            .args(references))
        .map(|_| ())
    }
}

/// An image that is present locally.
#[derive(Clone, Debug)]
pub struct Image {
    /// `<repo>:<key>`: changes with the image's inputs.
    pub reference: String,
    /// `<repo>:dev`: the stable name manifests use.
    pub dev: String,
    /// Built now (false: found in Docker's image store).
    pub built: bool,
    /// Seconds spent building (0 when found).
    pub secs: f64,
}

impl Image {
    /// Marks the image built now (since `started`), removes its build
    /// directory `work` and says so.
    fn finish_build(mut self, started: Instant, work: &Path, progress: &dyn Fn(&str)) -> Self {
        let _ = fs::remove_dir_all(work);
        self.built = true;
        self.secs = started.elapsed().as_secs_f64();
        progress(&format!("built {} in {:.1}s", self.reference, self.secs));
        self
    }

    fn found(repo: &str, key: &str) -> Self {
        Self {
            reference: format!("{repo}:{key}"),
            dev: format!("{repo}:{DEV_TAG}"),
            built: false,
            secs: 0.0,
        }
    }
}

/// Holds the cross-process image build lock while alive.
struct BuildLock(#[allow(dead_code)] fs::File);

fn lock() -> Result<BuildLock, ImageError> {
    let dir = binaries::cache_root()?.join("images");
    fs::create_dir_all(&dir).map_err(io_err(format!("creating {}", dir.display())))?;
    let path = dir.join(".build.lock");
    let file = fs::File::create(&path).map_err(io_err(format!("creating {}", path.display())))?;
    file.lock()
        .map_err(io_err(format!("locking {}", path.display())))?;
    Ok(BuildLock(file))
}

/// Whether `image` must be built: `None` if it exists (its `dev` tag is
/// moved to it), else the build lock, taken after checking again.
fn lock_unless_present(docker: &Docker, image: &Image) -> Result<Option<BuildLock>, ImageError> {
    if docker.has_image(&image.reference) {
        docker.tag(&image.reference, &image.dev)?;
        return Ok(None);
    }
    let lock = lock()?;
    if docker.has_image(&image.reference) {
        docker.tag(&image.reference, &image.dev)?;
        return Ok(None);
    }
    Ok(Some(lock))
}

fn work_dir(name: &str) -> Result<PathBuf, ImageError> {
    let dir = binaries::cache_root()?.join("images").join(name);
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(io_err(format!("removing {}", dir.display())))?;
    }
    fs::create_dir_all(&dir).map_err(io_err(format!("creating {}", dir.display())))?;
    Ok(dir)
}

fn hash_key(parts: &[&[u8]]) -> String {
    let mut hash = binaries::Fnv1a::default();
    for part in parts {
        hash.write(part);
        hash.write(&[0xff]);
    }
    format!("{:012x}", hash.0 & 0xffff_ffff_ffff)
}

/// An image holding one static program compiled from `images/<name>/<name>.c`
/// with the host's gcc: `pause` and `http-test`.
fn ensure_static_image(
    docker: &Docker,
    name: &str,
    repo: &str,
    progress: &dyn Fn(&str),
) -> Result<Image, ImageError> {
    let dir = images_dir().join(name);
    let source_path = dir.join(format!("{name}.c"));
    let dockerfile_path = dir.join("Dockerfile");
    let source =
        fs::read(&source_path).map_err(io_err(format!("reading {}", source_path.display())))?;
    let dockerfile = fs::read(&dockerfile_path)
        .map_err(io_err(format!("reading {}", dockerfile_path.display())))?;
    let gcc = run(Command::new("gcc").arg("--version"))?;
    let key = hash_key(&[RECIPE.as_bytes(), &source, &dockerfile, gcc.as_bytes()]);
    let image = Image::found(repo, &key);
    let Some(_lock) = lock_unless_present(docker, &image)? else {
        return Ok(image);
    };
    let started = Instant::now();
    progress(&format!(
        "building {} (gcc -static {name}.c)",
        image.reference
    ));
    let work = work_dir(&format!("{name}-{key}"))?;
    run(Command::new("gcc")
        .args(["-static", "-O2", "-s", "-Wall", "-Wextra", "-o"])
        .arg(work.join(name))
        .arg(&source_path))?;
    fs::write(work.join("Dockerfile"), &dockerfile).map_err(io_err("writing the Dockerfile"))?;
    run(docker
        .command()
        .args(["build", "--quiet", "-t", &image.reference])
        .arg(&work))?;
    docker.tag(&image.reference, &image.dev)?;
    Ok(image.finish_build(started, &work, progress))
}

/// The pause image (`images/pause/pause.c`).
pub fn ensure_pause(docker: &Docker, progress: &dyn Fn(&str)) -> Result<Image, ImageError> {
    ensure_static_image(docker, "pause", PAUSE_REPO, progress)
}

/// The end-to-end tests' HTTP server image (`images/http-test/http-test.c`).
pub fn ensure_http_test(docker: &Docker, progress: &dyn Fn(&str)) -> Result<Image, ImageError> {
    ensure_static_image(docker, "http-test", HTTP_TEST_REPO, progress)
}

/// An image with the cluster's kubectl as entrypoint on the runtime base:
/// tests run it as a pod to check that in-cluster clients reach the API
/// through the `kubernetes` Service with their ServiceAccount token.
pub fn ensure_kubectl_image(
    docker: &Docker,
    base: &Image,
    kubectl: &Path,
    progress: &dyn Fn(&str),
) -> Result<Image, ImageError> {
    ensure_binary_image(docker, base, "meridian/kubectl", kubectl, progress)
}

/// The real node's cluster DNS server: the CoreDNS binary built from
/// `xtask/gotools/corednsbin` as entrypoint on the runtime base (non-root;
/// the pod gets port 53 through `net.ipv4.ip_unprivileged_port_start`).
pub fn ensure_coredns_image(
    docker: &Docker,
    base: &Image,
    coredns: &Path,
    progress: &dyn Fn(&str),
) -> Result<Image, ImageError> {
    ensure_binary_image(docker, base, COREDNS_REPO, coredns, progress)
}

/// An image `repo` holding one binary, `/<file name>`, as entrypoint on the
/// runtime base; keyed by the binary's path, size and modification time
/// (the binaries come from version-keyed caches).
fn ensure_binary_image(
    docker: &Docker,
    base: &Image,
    repo: &str,
    binary: &Path,
    progress: &dyn Fn(&str),
) -> Result<Image, ImageError> {
    let name = binary
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| ImageError::Invalid(format!("{} names no file", binary.display())))?;
    let meta = fs::metadata(binary).map_err(io_err(format!("reading {}", binary.display())))?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let key = hash_key(&[
        RECIPE.as_bytes(),
        base.reference.as_bytes(),
        binary.display().to_string().as_bytes(),
        &meta.len().to_le_bytes(),
        &modified.to_le_bytes(),
    ]);
    let image = Image::found(repo, &key);
    let Some(_lock) = lock_unless_present(docker, &image)? else {
        return Ok(image);
    };
    let started = Instant::now();
    progress(&format!(
        "building {} on {}",
        image.reference, base.reference
    ));
    let work = work_dir(&format!("{name}-{key}"))?;
    fs::copy(binary, work.join(name)).map_err(io_err(format!("copying {}", binary.display())))?;
    fs::write(
        work.join("Dockerfile"),
        format!(
            "FROM {}\nCOPY {name} /{name}\nENTRYPOINT [\"/{name}\"]\n",
            base.reference
        ),
    )
    .map_err(io_err("writing the Dockerfile"))?;
    run(docker
        .command()
        .args(["build", "--quiet", "-t", &image.reference, "-t", &image.dev])
        .arg(&work))?;
    Ok(image.finish_build(started, &work, progress))
}

/// The binaries of the controller image: (name in the image, cargo binary).
pub const CONTROLLER_BINARIES: &[(&str, &str)] = &[
    ("controller", "controller"),
    ("destination", "destination"),
    ("sp-validator", "sp-validator"),
    ("linkerd-policy-controller", "policy-controller"),
    ("meridian-cli", "meridian-cli"),
];

/// Builds `meridian/controller:<tag>` (and `:dev`) from `images/controller/
/// Dockerfile` with binaries already built by cargo in `cargo_out` (e.g.
/// `target/release`) on the runtime base `base`. Docker's layer cache makes
/// an unchanged rebuild quick.
pub fn build_controller(
    docker: &Docker,
    base: &Image,
    cargo_out: &Path,
    progress: &dyn Fn(&str),
) -> Result<Image, ImageError> {
    let started = Instant::now();
    let _lock = lock()?;
    let work = work_dir("controller-context")?;
    let bin = work.join("bin");
    fs::create_dir_all(&bin).map_err(io_err("creating the build context"))?;
    let mut hashed = Vec::new();
    for (name, cargo_name) in CONTROLLER_BINARIES {
        let built = cargo_out.join(cargo_name);
        if !built.is_file() {
            return Err(ImageError::Invalid(format!(
                "{} is missing: build it with cargo first",
                built.display()
            )));
        }
        let target = bin.join(name);
        let stripped = Command::new("strip")
            .arg("-o")
            .arg(&target)
            .arg(&built)
            .status()
            .is_ok_and(|s| s.success());
        if !stripped {
            fs::copy(&built, &target).map_err(io_err(format!("copying {}", built.display())))?;
        }
        hashed.push(fs::read(&target).map_err(io_err(format!("reading {}", target.display())))?);
    }
    let dockerfile = images_dir().join("controller/Dockerfile");
    let parts: Vec<&[u8]> = hashed.iter().map(Vec::as_slice).collect();
    let key = hash_key(&[&[base.reference.as_bytes()], parts.as_slice()].concat());
    let image = Image::found(CONTROLLER_REPO, &key);
    progress(&format!(
        "building {} on {} from {}",
        image.reference,
        base.reference,
        cargo_out.display()
    ));
    run(docker
        .command()
        .args(["build", "--quiet", "-f"])
        .arg(&dockerfile)
        .args(["--build-arg", "BINARIES=prebuilt"])
        .args(["--build-arg", &format!("RUNTIME_IMAGE={}", base.reference)])
        .args(["-t", &image.reference, "-t", &image.dev])
        .arg(&work))?;
    Ok(image.finish_build(started, &work, progress))
}

/// Copies images from Docker into a containerd (namespace `k8s.io`, the
/// CRI's) with `docker save` and `ctr images import`, so the kubelet finds
/// them without a registry.
pub fn import_into_containerd(
    docker: &Docker,
    ctr: &Path,
    containerd_address: &Path,
    references: &[&str],
    scratch_dir: &Path,
) -> Result<(), ImageError> {
    fs::create_dir_all(scratch_dir)
        .map_err(io_err(format!("creating {}", scratch_dir.display())))?;
    let archive = scratch_dir.join(format!("images-{}.tar", std::process::id()));
    docker.save(&archive, references)?;
    let result = run(Command::new(ctr)
        .arg("--address")
        .arg(containerd_address)
        .args(["--namespace", "k8s.io", "images", "import"])
        .arg(&archive));
    let _ = fs::remove_file(&archive);
    result.map(|_| ())
}

/// `1234567` → `"1.2 MB"` (decimal units, as `docker images` prints).
pub fn human_size(bytes: u64) -> String {
    let bytes = bytes as f64;
    if bytes >= 1e9 {
        format!("{:.2} GB", bytes / 1e9)
    } else if bytes >= 1e6 {
        format!("{:.1} MB", bytes / 1e6)
    } else {
        format!("{:.1} kB", bytes / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_change_with_any_input() {
        let a = hash_key(&[b"x", b"y"]);
        assert_eq!(a, hash_key(&[b"x", b"y"]));
        assert_ne!(a, hash_key(&[b"xy"]));
        assert_ne!(a, hash_key(&[b"x", b"z"]));
        assert_eq!(a.len(), 12);
    }

    #[test]
    fn sizes_print_like_docker() {
        assert_eq!(human_size(1_234), "1.2 kB");
        assert_eq!(human_size(25_600_000), "25.6 MB");
    }
}
