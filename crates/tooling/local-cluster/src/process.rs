//! Child processes of the control plane: spawned with their output in a log
//! file, either tied to the spawning thread (killed by the kernel if this
//! process dies, so a panicking test leaves no orphans) or detached (for
//! `cargo xtask cluster up`, stopped later by pid).

use std::os::unix::process::CommandExt as _;
use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// How long a child outlives us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// The kernel kills the child when the spawning thread exits
    /// (`PR_SET_PDEATHSIG`); dropping the handle stops it too. Spawn from a
    /// thread that lives as long as the child should.
    Tied,
    /// The child runs on its own in a new process group until stopped by pid.
    Detached,
}

/// A running child with its log file.
#[derive(Debug)]
pub struct ManagedProcess {
    name: String,
    child: Option<Child>,
    log: PathBuf,
    lifetime: Lifetime,
}

impl ManagedProcess {
    /// Spawns `program args…`, appending stdout and stderr to `log`.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
        lifetime: Lifetime,
    ) -> std::io::Result<Self> {
        Self::spawn_with_env(name, program, args, &[], log, lifetime)
    }

    /// [`Self::spawn`] with `env` added to the child's environment.
    pub fn spawn_with_env(
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        log: &Path,
        lifetime: Lifetime,
    ) -> std::io::Result<Self> {
        let out = fs::OpenOptions::new().create(true).append(true).open(log)?;
        let err = out.try_clone()?;
        let mut command = Command::new(program);
        command.stdout(out).stderr(err);
        command.envs(env.iter().map(|(k, v)| (k, v)));
        Self::start(name, command, args, log.to_path_buf(), lifetime)
    }

    /// Spawns `program args…` with stdout and stderr on this terminal.
    pub fn spawn_inheriting_output(
        name: &str,
        program: &Path,
        args: &[String],
        lifetime: Lifetime,
    ) -> std::io::Result<Self> {
        Self::spawn_inheriting_output_with_env(name, program, args, &[], lifetime)
    }

    /// [`Self::spawn_inheriting_output`] with `env` added to the child's
    /// environment.
    pub fn spawn_inheriting_output_with_env(
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
        lifetime: Lifetime,
    ) -> std::io::Result<Self> {
        let mut command = Command::new(program);
        command.envs(env.iter().copied());
        Self::start(name, command, args, PathBuf::new(), lifetime)
    }

    /// Starts `command` in its own process group, tied to this thread if asked.
    fn start(
        name: &str,
        mut command: Command,
        args: &[String],
        log: PathBuf,
        lifetime: Lifetime,
    ) -> std::io::Result<Self> {
        command.args(args).stdin(Stdio::null()).process_group(0);
        if lifetime == Lifetime::Tied {
            tie_to_parent(&mut command);
        }
        let child = command.spawn().map_err(|e| {
            let program = command.get_program().to_string_lossy().into_owned();
            std::io::Error::new(e.kind(), format!("failed to start {program}: {e}"))
        })?;
        Ok(Self {
            name: name.to_string(),
            child: Some(child),
            log,
            lifetime,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// `Some(status)` if the child has exited.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// The last `lines` lines of the log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// Stops the child: SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        if let Some(mut child) = self.child.take() {
            terminate(child.id(), grace);
            // Reap it (and make sure it is gone if it ignored SIGTERM).
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the child at once (SIGKILL, no grace), as a crash or an OOM
    /// kill would, and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Forgets the child without stopping it (for detached processes).
    pub fn release(mut self) -> Option<u32> {
        self.child.take().map(|c| c.id())
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        if self.lifetime == Lifetime::Tied {
            self.stop(Duration::from_secs(5));
        }
    }
}

/// The last `lines` lines of a file (empty if unreadable).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Sends SIGTERM to `pid` and waits up to `grace` for it to exit, then
/// SIGKILLs it. Works for processes that are not our children too.
pub fn terminate(pid: u32, grace: Duration) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if !signal(pid, libc::SIGTERM) {
        return;
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if !is_alive(pid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(pid, libc::SIGKILL);
}

/// Whether a process with this pid exists (and is not a zombie we could reap).
pub fn is_alive(pid: libc::pid_t) -> bool {
    // Reap it first in case it is our own exited child.
    #[allow(unsafe_code)]
    // SAFETY: waitpid with WNOHANG on a pid only inspects process state.
    unsafe {
        libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
    }
    signal(pid, 0)
}

fn signal(pid: libc::pid_t, sig: libc::c_int) -> bool {
    #[allow(unsafe_code)]
    // SAFETY: kill(2) has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, sig) };
    rc == 0
}

#[allow(unsafe_code)]
fn tie_to_parent(command: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and only calls
    // async-signal-safe functions (prctl, getppid, _exit).
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // If the parent died between fork and prctl, we were reparented.
            if libc::getppid() == 1 {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_log_and_stop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("sleep.log");
        let mut child = ManagedProcess::spawn(
            "sh",
            Path::new("/bin/sh"),
            &["-c".into(), "echo started; exec sleep 30".into()],
            &log,
            Lifetime::Tied,
        )
        .expect("spawn");
        let pid = libc::pid_t::try_from(child.pid().expect("pid")).expect("pid fits");
        let deadline = Instant::now() + Duration::from_secs(5);
        while child.log_tail(1) != "started" && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(child.log_tail(1), "started");
        assert!(is_alive(pid));
        child.stop(Duration::from_secs(5));
        assert!(!is_alive(pid), "child is gone after stop");
    }
}
