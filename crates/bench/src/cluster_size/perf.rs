//! A `perf record` of the destination during the endpoint changes
//! (`--perf-dir`): `cpu-clock` samples (this VM has no hardware counters)
//! with DWARF call graphs (release builds keep line tables but no frame
//! pointers, so `-g` alone would cut the stacks short).

use std::{path::Path, process::Child, time::Duration};

/// A running `perf record`; [`Recorder::stop`] makes it write its file.
pub struct Recorder(Option<Child>);

impl Recorder {
    /// Starts recording `pid` into `dir/<label>.data`.
    pub fn start(dir: &Path, label: &str, pid: u32) -> Self {
        let _ = std::fs::create_dir_all(dir);
        let out = dir.join(format!("{label}.data"));
        let child = std::process::Command::new("perf")
            .args([
                "record",
                "-e",
                "cpu-clock",
                "-F",
                "999",
                "--call-graph",
                "dwarf,16384",
                "-p",
                &pid.to_string(),
                "-o",
            ])
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match child {
            Ok(child) => {
                println!("  perf record (cpu-clock) of {label} → {}", out.display());
                // perf needs a moment to attach.
                std::thread::sleep(Duration::from_millis(500));
                Self(Some(child))
            }
            Err(error) => {
                println!("  perf record of {label} not started: {error}");
                Self(None)
            }
        }
    }

    /// Stops the recording (SIGINT, so that perf writes its file).
    pub fn stop(mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = std::process::Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }
}
