//! Container images built on this machine, with no registry: the
//! distroless-style runtime base made from Debian packages, the pause image
//! of the real node, the tiny HTTP server of the end-to-end tests and the
//! Meridian controller image; and loading images into a node's containerd.
//!
//! Each image is tagged twice: `<repo>:<key>`, where the key hashes every
//! input of the image (the package list and the resolved versions, the C
//! source, the compiler version, the recipe), and `<repo>:dev`. An image
//! whose key tag exists is not built again. Builds are serialised across
//! processes by a file lock under the cache directory.
//!
//! The sources (package list, C files, Dockerfiles) live in `images/` at the
//! workspace root; see its Dockerfiles for how a user with network access
//! builds the same images with `docker build`.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use crate::binaries::{self, BuildError};

/// The runtime root filesystem of the Meridian image (glibc, libgcc_s, CA
/// certificates, tzdata, netbase), made from Debian packages.
pub const BASE_REPO: &str = "meridian/base-debian12";
/// The pod sandbox image of the real node.
pub const PAUSE_REPO: &str = "meridian/pause";
/// The end-to-end tests' HTTP server (see `images/http-test/http-test.c`).
pub const HTTP_TEST_REPO: &str = "meridian/http-test";
/// The Meridian controller image (`/controller`, `/destination`,
/// `/sp-validator`, `/linkerd-policy-controller`).
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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../images")
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

/// One Debian package at the version apt would install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebPackage {
    pub name: String,
    pub version: String,
    pub arch: String,
}

impl DebPackage {
    /// The file name `apt-get download` gives it (`:` of an epoch as `%3a`).
    fn file_name(&self) -> String {
        format!(
            "{}_{}_{}.deb",
            self.name,
            self.version.replace(':', "%3a"),
            self.arch
        )
    }
}

/// Package names from a package list (`#` comments, one name a line).
pub fn parse_package_list(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| line.split('#').next().unwrap_or_default().trim())
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect()
}

/// The candidate version of each package, from `apt-cache show` stanzas.
fn parse_apt_show(text: &str) -> BTreeMap<String, DebPackage> {
    let mut found = BTreeMap::new();
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|line| {
                line.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .map(|value| value.trim().to_string())
            })
        };
        if let (Some(name), Some(version), Some(arch)) =
            (field("Package"), field("Version"), field("Architecture"))
        {
            found.entry(name.clone()).or_insert(DebPackage {
                name,
                version,
                arch,
            });
        }
    }
    found
}

fn resolve_packages(names: &[String]) -> Result<Vec<DebPackage>, ImageError> {
    let show = || {
        Command::new("apt-cache")
            .args(["show", "--no-all-versions"])
            .args(names)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .output()
    };
    let mut out = show().map_err(|source| ImageError::Spawn {
        command: "apt-cache show".into(),
        source,
    })?;
    if !out.status.success() {
        // Empty or stale package lists (a fresh machine): refresh once.
        run(Command::new("apt-get").args(["update", "-qq"]))?;
        out = show().map_err(|source| ImageError::Spawn {
            command: "apt-cache show".into(),
            source,
        })?;
    }
    let found = parse_apt_show(&String::from_utf8_lossy(&out.stdout));
    names
        .iter()
        .map(|name| {
            found.get(name).cloned().ok_or_else(|| {
                ImageError::Invalid(format!(
                    "apt knows no package {name:?} (from images/base/packages); run `apt-get update`"
                ))
            })
        })
        .collect()
}

/// The runtime base image, built from `images/base/packages` unless an image
/// with the same inputs exists.
pub fn ensure_base(docker: &Docker, progress: &dyn Fn(&str)) -> Result<Image, ImageError> {
    let list_path = images_dir().join("base/packages");
    let list = fs::read_to_string(&list_path)
        .map_err(io_err(format!("reading {}", list_path.display())))?;
    let packages = resolve_packages(&parse_package_list(&list))?;
    let pinned: Vec<String> = packages
        .iter()
        .map(|p| format!("{}={}", p.name, p.version))
        .collect();
    let pinned_text = pinned.join(" ");
    let key = hash_key(&[RECIPE.as_bytes(), pinned_text.as_bytes()]);
    let mut image = Image::found(BASE_REPO, &key);
    if docker.has_image(&image.reference) {
        docker.tag(&image.reference, &image.dev)?;
        return Ok(image);
    }
    let _lock = lock()?;
    if docker.has_image(&image.reference) {
        docker.tag(&image.reference, &image.dev)?;
        return Ok(image);
    }
    let started = Instant::now();
    progress(&format!(
        "building {} from Debian packages: {pinned_text}",
        image.reference
    ));
    let debs = binaries::cache_root()?.join("images/debs");
    fs::create_dir_all(&debs).map_err(io_err(format!("creating {}", debs.display())))?;
    let missing: Vec<&DebPackage> = packages
        .iter()
        .filter(|p| !debs.join(p.file_name()).is_file())
        .collect();
    if !missing.is_empty() {
        run(Command::new("apt-get")
            .arg("download")
            .args(missing.iter().map(|p| format!("{}={}", p.name, p.version)))
            .current_dir(&debs))?;
    }
    let work = work_dir(&format!("base-{key}"))?;
    let rootfs = work.join("rootfs");
    fs::create_dir_all(&rootfs).map_err(io_err("creating the root filesystem"))?;
    for package in &packages {
        run(Command::new("dpkg-deb")
            .arg("-x")
            .arg(debs.join(package.file_name()))
            .arg(&rootfs))?;
    }
    finish_rootfs(&rootfs)?;
    let tar = work.join("rootfs.tar");
    run(Command::new("tar")
        .arg("--numeric-owner")
        .arg("-C")
        .arg(&rootfs)
        .arg("-cf")
        .arg(&tar)
        .arg("."))?;
    run(docker
        .command()
        .arg("import")
        .args(["--change", &format!("USER {IMAGE_UID}:{IMAGE_UID}")])
        .args(["--change", "ENV PATH=/usr/local/bin:/usr/bin:/bin"])
        .args([
            "--change",
            "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
        ])
        .args(["--change", "WORKDIR /"])
        .args([
            "--change",
            &format!("LABEL meridian.debian-packages=\"{pinned_text}\""),
        ])
        .arg(&tar)
        .arg(&image.reference))?;
    docker.tag(&image.reference, &image.dev)?;
    let _ = fs::remove_dir_all(&work);
    image.built = true;
    image.secs = started.elapsed().as_secs_f64();
    progress(&format!("built {} in {:.1}s", image.reference, image.secs));
    Ok(image)
}

/// What a distroless root filesystem has besides the packages' files: users,
/// the CA bundle (normally made by a maintainer script), `/tmp`, UTC; and
/// without what no program in it reads (docs, man pages, locales, gconv).
fn finish_rootfs(rootfs: &Path) -> Result<(), ImageError> {
    for unused in [
        "usr/share/doc",
        "usr/share/man",
        "usr/share/info",
        "usr/share/locale",
        "usr/share/lintian",
        "usr/lib/x86_64-linux-gnu/gconv",
        "usr/lib/aarch64-linux-gnu/gconv",
    ] {
        let path = rootfs.join(unused);
        if path.exists() {
            fs::remove_dir_all(&path).map_err(io_err(format!("removing {}", path.display())))?;
        }
    }
    let write = |relative: &str, contents: &[u8]| {
        let path = rootfs.join(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io_err(format!("creating {}", parent.display())))?;
        }
        fs::write(&path, contents).map_err(io_err(format!("writing {}", path.display())))
    };
    let uid = IMAGE_UID;
    write(
        "etc/passwd",
        format!(
            "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nmeridian:x:{uid}:{uid}:meridian:/home/meridian:/sbin/nologin\n"
        )
        .as_bytes(),
    )?;
    write(
        "etc/group",
        format!("root:x:0:\nnogroup:x:65534:\nmeridian:x:{uid}:\n").as_bytes(),
    )?;
    write(
        "etc/nsswitch.conf",
        b"passwd: files\ngroup: files\nhosts: files dns\n",
    )?;
    write(
        "etc/os-release",
        b"PRETTY_NAME=\"Distroless-style (Meridian, from Debian 12 packages)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nID=debian\n",
    )?;
    write("etc/timezone", b"Etc/UTC\n")?;
    let localtime = rootfs.join("etc/localtime");
    if !localtime.exists() {
        std::os::unix::fs::symlink("/usr/share/zoneinfo/Etc/UTC", &localtime)
            .map_err(io_err("linking /etc/localtime"))?;
    }
    // The CA bundle update-ca-certificates would make.
    let mut certs = Vec::new();
    collect_files(&rootfs.join("usr/share/ca-certificates"), "crt", &mut certs)?;
    certs.sort();
    let mut bundle = Vec::new();
    for cert in &certs {
        let pem = fs::read(cert).map_err(io_err(format!("reading {}", cert.display())))?;
        bundle.extend_from_slice(&pem);
        if !pem.ends_with(b"\n") {
            bundle.push(b'\n');
        }
    }
    if certs.is_empty() {
        return Err(ImageError::Invalid(
            "ca-certificates brought no certificates".into(),
        ));
    }
    write("etc/ssl/certs/ca-certificates.crt", &bundle)?;
    for dir in [
        "tmp",
        "home/meridian",
        "root",
        "proc",
        "sys",
        "dev",
        "etc/ssl/private",
    ] {
        let path = rootfs.join(dir);
        fs::create_dir_all(&path).map_err(io_err(format!("creating {}", path.display())))?;
    }
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(rootfs.join("tmp"), fs::Permissions::from_mode(0o1777))
        .map_err(io_err("chmod /tmp"))?;
    Ok(())
}

fn collect_files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) -> Result<(), ImageError> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries {
        let path = entry
            .map_err(io_err(format!("listing {}", dir.display())))?
            .path();
        if path.is_dir() {
            collect_files(&path, ext, out)?;
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    Ok(())
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
    let mut image = Image::found(repo, &key);
    if docker.has_image(&image.reference) {
        docker.tag(&image.reference, &image.dev)?;
        return Ok(image);
    }
    let _lock = lock()?;
    if docker.has_image(&image.reference) {
        docker.tag(&image.reference, &image.dev)?;
        return Ok(image);
    }
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
    let _ = fs::remove_dir_all(&work);
    image.built = true;
    image.secs = started.elapsed().as_secs_f64();
    progress(&format!("built {} in {:.1}s", image.reference, image.secs));
    Ok(image)
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
    let meta = fs::metadata(kubectl).map_err(io_err(format!("reading {}", kubectl.display())))?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let key = hash_key(&[
        RECIPE.as_bytes(),
        base.reference.as_bytes(),
        kubectl.display().to_string().as_bytes(),
        &meta.len().to_le_bytes(),
        &modified.to_le_bytes(),
    ]);
    let mut image = Image::found("meridian/kubectl", &key);
    let _lock = lock()?;
    if docker.has_image(&image.reference) {
        docker.tag(&image.reference, &image.dev)?;
        return Ok(image);
    }
    let started = Instant::now();
    progress(&format!(
        "building {} on {}",
        image.reference, base.reference
    ));
    let work = work_dir(&format!("kubectl-{key}"))?;
    fs::copy(kubectl, work.join("kubectl")).map_err(io_err("copying kubectl"))?;
    fs::write(
        work.join("Dockerfile"),
        format!(
            "FROM {}\nCOPY kubectl /kubectl\nENTRYPOINT [\"/kubectl\"]\n",
            base.reference
        ),
    )
    .map_err(io_err("writing the Dockerfile"))?;
    run(docker
        .command()
        .args(["build", "--quiet", "-t", &image.reference, "-t", &image.dev])
        .arg(&work))?;
    let _ = fs::remove_dir_all(&work);
    image.built = true;
    image.secs = started.elapsed().as_secs_f64();
    Ok(image)
}

/// The binaries of the controller image: (name in the image, cargo binary).
pub const CONTROLLER_BINARIES: &[(&str, &str)] = &[
    ("controller", "controller"),
    ("destination", "destination"),
    ("sp-validator", "sp-validator"),
    ("linkerd-policy-controller", "policy-controller"),
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
    let mut image = Image::found(CONTROLLER_REPO, &key);
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
    let _ = fs::remove_dir_all(&work);
    image.built = true;
    image.secs = started.elapsed().as_secs_f64();
    progress(&format!("built {} in {:.1}s", image.reference, image.secs));
    Ok(image)
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
    fn package_list_skips_comments_and_blanks() {
        let list = "# base\nlibc6\n\n  tzdata  # zones\n";
        assert_eq!(parse_package_list(list), ["libc6", "tzdata"]);
    }

    #[test]
    fn apt_show_gives_the_first_stanza_of_each_package() {
        let text = "Package: libc6\nVersion: 2.36-9+deb12u10\nArchitecture: amd64\nDescription: x\n\nPackage: tzdata\nVersion: 1:2025b-0+deb12u1\nArchitecture: all\n\nPackage: libc6\nVersion: 0.1\nArchitecture: amd64\n";
        let found = parse_apt_show(text);
        assert_eq!(found["libc6"].version, "2.36-9+deb12u10");
        assert_eq!(
            found["tzdata"].file_name(),
            "tzdata_1%3a2025b-0+deb12u1_all.deb"
        );
    }

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
