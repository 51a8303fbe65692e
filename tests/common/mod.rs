//! What the end-to-end tests share to see the processes a kbench run leaves: every process a
//! test's kbench starts carries `MARK` in its environment (inherited by its workers and what
//! they start), so a scan of /proc finds them.

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// A forward that starts a process of its own (in the worker's process group: its `sleep 600`
/// says the forward runs), then never returns.
pub const HANG_WITH_CHILD: &str = r#"import subprocess
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        subprocess.Popen(["sleep", "600"])
        while True:
            pass
"#;

/// The environment variable that marks every process a test's kbench starts.
pub const MARK: &str = "KBENCH_TEST_MARK";

/// The processes (pid, command line) whose environment holds `MARK=mark`.
pub fn marked(mark: &str) -> Vec<(u32, String)> {
    let needle = format!("{MARK}={mark}\0");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| String::from_utf8_lossy(&env).contains(&needle))
        })
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (pid, cmd.chars().take(100).collect())
        })
        .collect()
}

/// Wait (a hang guard of `within`) until a marked process's command line starts with `prefix`.
pub fn wait_for_marked(mark: &str, prefix: &str, within: Duration) {
    let until = Instant::now() + within;
    while !marked(mark).iter().any(|(_, cmd)| cmd.starts_with(prefix)) {
        assert!(
            Instant::now() < until,
            "no {prefix:?} process within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The marked processes still alive `within` after asking (they may take a moment to die),
/// killed: what outlived kbench.
pub fn left_behind(mark: &str, within: Duration) -> Vec<(u32, String)> {
    let until = Instant::now() + within;
    let mut left = marked(mark);
    while !left.is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
        left = marked(mark);
    }
    for (pid, _) in &left {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    left
}

/// A kbench the test started, killed when dropped: a failing test leaves none running.
pub struct Started(pub Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `child`'s exit, within `within` (a hang guard: killed past it, and None).
pub fn exit_within(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}
