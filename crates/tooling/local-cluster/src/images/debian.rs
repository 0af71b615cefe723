//! Images made from Debian packages without a package manager inside: the
//! packages (versions resolved from the machine's apt lists) are downloaded
//! once with `apt-get download` into the cache and unpacked with
//! `dpkg-deb -x` (no maintainer scripts), as distroless images are made. The
//! runtime base `meridian/base-debian12` is such a root filesystem; the DNS
//! debugging image `meridian/dnsutils` adds Debian's `getent` and static
//! BusyBox (`nslookup`, `sh`, …) on top of it.

use std::collections::BTreeMap;

use super::*;

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

fn resolve_packages(names: &[String], list: &Path) -> Result<Vec<DebPackage>, ImageError> {
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
                    "apt knows no package {name:?} (from {}); run `apt-get update`",
                    list.display()
                ))
            })
        })
        .collect()
}

/// Packages of a list under `images/`, resolved to the versions apt would
/// install.
struct PackageSet {
    packages: Vec<DebPackage>,
    /// `name=version …`, the image's label and part of its key.
    pinned: String,
}

impl PackageSet {
    /// Reads and resolves `images/<dir>/packages`.
    fn read(dir: &str) -> Result<Self, ImageError> {
        let list_path = images_dir().join(dir).join("packages");
        let list = fs::read_to_string(&list_path)
            .map_err(io_err(format!("reading {}", list_path.display())))?;
        let packages = resolve_packages(&parse_package_list(&list), &list_path)?;
        let pinned = packages
            .iter()
            .map(|p| format!("{}={}", p.name, p.version))
            .collect::<Vec<_>>()
            .join(" ");
        Ok(Self { packages, pinned })
    }

    /// Downloads the packages the cache lacks, then unpacks them all into
    /// `rootfs`.
    fn unpack(&self, rootfs: &Path) -> Result<(), ImageError> {
        let debs = binaries::cache_root()?.join("images/debs");
        fs::create_dir_all(&debs).map_err(io_err(format!("creating {}", debs.display())))?;
        let missing: Vec<&DebPackage> = self
            .packages
            .iter()
            .filter(|p| !debs.join(p.file_name()).is_file())
            .collect();
        if !missing.is_empty() {
            run(Command::new("apt-get")
                .arg("download")
                .args(missing.iter().map(|p| format!("{}={}", p.name, p.version)))
                .current_dir(&debs))?;
        }
        fs::create_dir_all(rootfs).map_err(io_err("creating the root filesystem"))?;
        for package in &self.packages {
            run(Command::new("dpkg-deb")
                .arg("-x")
                .arg(debs.join(package.file_name()))
                .arg(rootfs))?;
        }
        Ok(())
    }
}

/// `tar -cf rootfs.tar -C rootfs .` beside `rootfs`; returns the tar's path.
fn tar_rootfs(rootfs: &Path) -> Result<PathBuf, ImageError> {
    let tar = rootfs.with_file_name("rootfs.tar");
    run(Command::new("tar")
        .arg("--numeric-owner")
        .arg("-C")
        .arg(rootfs)
        .arg("-cf")
        .arg(&tar)
        .arg("."))?;
    Ok(tar)
}

/// The runtime base image, built from `images/base/packages` unless an image
/// with the same inputs exists.
pub fn ensure_base(docker: &Docker, progress: &dyn Fn(&str)) -> Result<Image, ImageError> {
    let set = PackageSet::read("base")?;
    let key = hash_key(&[RECIPE.as_bytes(), set.pinned.as_bytes()]);
    let image = Image::found(BASE_REPO, &key);
    let Some(_lock) = lock_unless_present(docker, &image)? else {
        return Ok(image);
    };
    let started = Instant::now();
    progress(&format!(
        "building {} from Debian packages: {}",
        image.reference, set.pinned
    ));
    let work = work_dir(&format!("base-{key}"))?;
    let rootfs = work.join("rootfs");
    set.unpack(&rootfs)?;
    finish_rootfs(&rootfs)?;
    let tar = tar_rootfs(&rootfs)?;
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
            &format!("LABEL meridian.debian-packages=\"{}\"", set.pinned),
        ])
        .arg(&tar)
        .arg(&image.reference))?;
    docker.tag(&image.reference, &image.dev)?;
    Ok(image.finish_build(started, &work, progress))
}

/// The BusyBox applets `meridian/dnsutils` links in `/bin` (Debian's
/// busybox-static installs the multi-call binary alone).
pub const BUSYBOX_APPLETS: &[&str] = &[
    "sh", "sleep", "nslookup", "wget", "nc", "cat", "ls", "env", "hostname", "ps", "grep",
];

/// The DNS debugging image: `images/dnsutils/packages` unpacked on the
/// runtime base `base` by `images/dnsutils/Dockerfile`, with the applets of
/// [`BUSYBOX_APPLETS`] linked in `/bin`.
pub fn ensure_dnsutils(
    docker: &Docker,
    base: &Image,
    progress: &dyn Fn(&str),
) -> Result<Image, ImageError> {
    let set = PackageSet::read("dnsutils")?;
    let dockerfile_path = images_dir().join("dnsutils/Dockerfile");
    let dockerfile = fs::read(&dockerfile_path)
        .map_err(io_err(format!("reading {}", dockerfile_path.display())))?;
    let key = hash_key(&[
        RECIPE.as_bytes(),
        base.reference.as_bytes(),
        set.pinned.as_bytes(),
        BUSYBOX_APPLETS.join(" ").as_bytes(),
        &dockerfile,
    ]);
    let image = Image::found(DNSUTILS_REPO, &key);
    let Some(_lock) = lock_unless_present(docker, &image)? else {
        return Ok(image);
    };
    let started = Instant::now();
    progress(&format!(
        "building {} on {} from Debian packages: {}",
        image.reference, base.reference, set.pinned
    ));
    let work = work_dir(&format!("dnsutils-{key}"))?;
    let rootfs = work.join("rootfs");
    set.unpack(&rootfs)?;
    drop_unused(&rootfs)?;
    for applet in BUSYBOX_APPLETS {
        let link = rootfs.join("bin").join(applet);
        if !link.exists() {
            std::os::unix::fs::symlink("busybox", &link)
                .map_err(io_err(format!("linking {}", link.display())))?;
        }
    }
    tar_rootfs(&rootfs)?;
    fs::remove_dir_all(&rootfs).map_err(io_err("removing the unpacked root filesystem"))?;
    fs::write(work.join("Dockerfile"), &dockerfile).map_err(io_err("writing the Dockerfile"))?;
    run(docker
        .command()
        .args(["build", "--quiet"])
        .args(["--build-arg", &format!("BASE_IMAGE={}", base.reference)])
        .args(["-t", &image.reference, "-t", &image.dev])
        .arg(&work))?;
    Ok(image.finish_build(started, &work, progress))
}

/// What a distroless root filesystem has besides the packages' files: users,
/// the CA bundle (normally made by a maintainer script), `/tmp`, UTC; and
/// without what no program in it reads (docs, man pages, locales, gconv).
fn finish_rootfs(rootfs: &Path) -> Result<(), ImageError> {
    drop_unused(rootfs)?;
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

/// Removes what no program of an image reads: docs, man pages, locales,
/// gconv modules.
fn drop_unused(rootfs: &Path) -> Result<(), ImageError> {
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
}
