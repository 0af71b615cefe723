//! Undoing what a real node left on the host, from its record: processes
//! (container processes and shims too), pod cgroups, mounts under the work
//! directory, iptables chains and the sysctls the kubelet changed.

use super::*;

/// Undoes what the node recorded in `/run/meridian/real-node.json`, if its
/// processes are gone or `force` is set (after stopping them): for
/// `cargo xtask cluster down` and leftovers of killed runs.
pub fn cleanup_host(force: bool) -> Result<bool, NodeError> {
    let Some(record) = HostRecord::load()? else {
        return Ok(false);
    };
    if record.alive() {
        if !force {
            return Err(NodeError::AlreadyRunning {
                work_dir: record.work_dir,
            });
        }
        for (_, pid) in record.pids.iter().rev() {
            process::terminate(*pid, Duration::from_secs(10));
        }
    }
    cleanup(&record);
    Ok(true)
}

/// Best effort, each step independent: what fails is reported and skipped.
pub(super) fn cleanup(record: &HostRecord) {
    let warn = |what: &str, error: &dyn std::fmt::Display| {
        progress(&format!("cleanup: {what}: {error}"));
    };
    for (_, pid) in record.pids.iter().rev() {
        process::terminate(*pid, Duration::from_secs(10));
    }
    // Container processes: everything in the kubelet's pod cgroups (one
    // real node per host, so they are this node's).
    for _ in 0..3 {
        let pids = cgroup_pids(Path::new("/sys/fs/cgroup/pids/kubepods"));
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            #[allow(unsafe_code)]
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    // containerd shims of this containerd (their command line names its socket).
    let address = record.containerd_address.display().to_string();
    for pid in processes_with_arg(&address) {
        process::terminate(pid, Duration::from_secs(2));
    }
    // Mounts under the work dir (rootfs overlays, netns, pod volumes), deepest first.
    let mut mounts = mounts_under(&record.work_dir);
    mounts.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    for mount in mounts {
        if let Err(e) = run("umount", &["-l", &mount.display().to_string()]) {
            warn("umount", &e);
        }
    }
    remove_pod_cgroups();
    if record.kube_proxy.is_file() {
        let _ = Command::new(&record.kube_proxy)
            .args(["--cleanup", "--v=0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    for iptables in ["iptables", "ip6tables"] {
        remove_chains(iptables);
    }
    let _ = run("ip", &["link", "del", BRIDGE]);
    for (name, value) in &record.sysctls {
        if let Err(e) = write_sysctl(name, value) {
            warn("restoring sysctl", &e);
        }
    }
    let _ = fs::remove_file(RECORD_FILE);
}

/// Pids in a cgroup v1 hierarchy and its children.
pub(super) fn cgroup_pids(dir: &Path) -> Vec<libc::pid_t> {
    let mut pids = Vec::new();
    if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(
            text.lines()
                .filter_map(|l| l.trim().parse::<libc::pid_t>().ok()),
        );
    }
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pids.extend(cgroup_pids(&entry.path()));
            }
        }
    }
    pids
}

/// Removes the kubelet's (now empty) pod cgroups in every v1 hierarchy.
pub(super) fn remove_pod_cgroups() {
    fn remove(dir: &Path) {
        if let Ok(entries) = fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    remove(&entry.path());
                }
            }
        }
        let _ = fs::remove_dir(dir);
    }
    if let Ok(hierarchies) = fs::read_dir("/sys/fs/cgroup") {
        for hierarchy in hierarchies.flatten() {
            remove(&hierarchy.path().join("kubepods"));
        }
    }
}

pub(super) fn processes_with_arg(needle: &str) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = fs::read(entry.path().join("cmdline")).ok()?;
            cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == needle.as_bytes())
                .then_some(pid)
        })
        .collect()
}

pub(super) fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(unescape_mount_path)
        .filter(|path| path.starts_with(dir))
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
pub(super) fn unescape_mount_path(field: &str) -> PathBuf {
    let mut out = Vec::new();
    let bytes = field.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(code) = u8::from_str_radix(&field[i + 1..i + 4], 8)
        {
            out.push(code);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    PathBuf::from(String::from_utf8_lossy(&out).into_owned())
}

/// Chains the node's components create: kube-proxy's and the kubelet's
/// (`KUBE-`), the CNI plugins' (`CNI-`) and ours (`MERIDIAN-`).
pub(super) fn is_node_chain(chain: &str) -> bool {
    ["KUBE-", "CNI-", "MERIDIAN-"]
        .iter()
        .any(|prefix| chain.starts_with(prefix))
}

/// Deletes the rules that jump to node chains from built-in chains, then
/// flushes and deletes the node chains, in every table.
pub(super) fn remove_chains(iptables: &str) {
    for table in ["filter", "nat", "mangle", "raw"] {
        let Ok(saved) = run(&format!("{iptables}-save"), &["-t", table]) else {
            continue;
        };
        let (chains, jumps) = parse_saved(&saved);
        for rule in jumps {
            let mut args = vec!["-w".to_string(), "-t".into(), table.into(), "-D".into()];
            args.extend(rule);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let _ = run(iptables, &args);
        }
        for chain in &chains {
            let _ = run(iptables, &["-w", "-t", table, "-F", chain]);
        }
        for chain in &chains {
            let _ = run(iptables, &["-w", "-t", table, "-X", chain]);
        }
    }
}

/// From `iptables-save` output: the node chains, and the rules (as
/// arguments after `-A`, i.e. chain then spec) of built-in or other chains
/// that jump to one.
pub(super) fn parse_saved(saved: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut chains = Vec::new();
    let mut jumps = Vec::new();
    for line in saved.lines() {
        if let Some(rest) = line.strip_prefix(':') {
            if let Some(chain) = rest.split_whitespace().next()
                && is_node_chain(chain)
            {
                chains.push(chain.to_string());
            }
        } else if let Some(rest) = line.strip_prefix("-A ") {
            let words = split_words(rest);
            let Some(chain) = words.first() else { continue };
            if is_node_chain(chain) {
                continue;
            }
            let jumps_to_node = words
                .windows(2)
                .any(|w| (w[0] == "-j" || w[0] == "-g") && is_node_chain(&w[1]));
            if jumps_to_node {
                jumps.push(words);
            }
        }
    }
    (chains, jumps)
}

/// Splits an iptables-save rule into words (double quotes group, `\"` escapes).
pub(super) fn split_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_quotes = false;
    let mut has_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_quotes => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            '"' => {
                in_quotes = !in_quotes;
                has_word = true;
            }
            ' ' if !in_quotes => {
                if has_word {
                    words.push(std::mem::take(&mut word));
                    has_word = false;
                }
            }
            c => {
                word.push(c);
                has_word = true;
            }
        }
    }
    if has_word {
        words.push(word);
    }
    words
}
