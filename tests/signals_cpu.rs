//! Red team: no process of a kbench run outlives kbench, however kbench ends. `kbench eval` of a
//! submission whose forward never returns, after its import started a process of its own, is
//! stopped once that process runs: by SIGTERM, SIGINT and SIGHUP unconfined (`--sandbox off`:
//! only kbench's kill of each worker's group ends the submission's own process), and by SIGKILL
//! in the sandbox (no handler runs: the workers die with kbench, PR_SET_PDEATHSIG, and what
//! they started with their PID namespace). Then no marked process is left, a handled signal
//! exits 130 and says so, and the record SIGTERM left holds nothing the signal cut short, so
//! `--resume` evaluates the submission again. Needs the project venv (tests/setup-python.sh) or
//! KBENCH_PYTHON.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{exit_within, left_behind, wait_for_marked, Started, MARK};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    std::env::var("KBENCH_PYTHON")
        .unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string())
}

/// `kbench eval` of `submissions` into `out`, with `extra` flags, every process it starts
/// marked with `mark`.
fn eval(submissions: &Path, out: &Path, extra: &[&str], mark: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kbench"));
    cmd.arg("eval")
        .arg(submissions)
        .args(["--device", "cpu", "--scale", "small", "--trials", "2"])
        .args(["--max-samples", "8"])
        .args(extra)
        .arg("--python")
        .arg(python())
        .arg("--out")
        .arg(out)
        .env("KBENCH_CACHE", root().join("target/kbench-test-cache"))
        .env(MARK, mark);
    cmd
}

/// The verdict of each evaluation in a run's results.json: (file, verdict).
fn verdicts(out: &Path) -> Vec<(String, String)> {
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    record["evaluations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (text(&e["file"]), text(&e["verdict"])))
        .collect()
}

#[test]
fn no_worker_outlives_kbench_stopped_by_a_signal() {
    // (signal, --sandbox, handled: exit 130 and a message; else killed by the signal)
    for (signal, sandbox, handled) in [
        ("TERM", "off", true),
        ("INT", "off", true),
        ("HUP", "off", true),
        ("KILL", "require", false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().display().to_string();
        let submissions = dir.path().join("submissions");
        let task = submissions.join("level1/19_ReLU");
        std::fs::create_dir_all(&task).unwrap();
        std::fs::write(task.join("hang.py"), common::HANG_WITH_CHILD).unwrap();
        let (out, log) = (dir.path().join("run"), dir.path().join("stderr"));
        let flags = ["--timeout-call", "600", "--sandbox", sandbox];
        let mut kbench = Started(
            eval(&submissions, &out, &flags, &mark)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("start kbench eval"),
        );
        wait_for_marked(&mark, "sleep 600", Duration::from_secs(180));
        let pid = kbench.0.id().to_string();
        assert!(Command::new("kill")
            .args(["-s", signal, &pid])
            .status()
            .unwrap()
            .success());
        let status = exit_within(&mut kbench.0, Duration::from_secs(60));
        let left = left_behind(&mark, Duration::from_secs(10));
        let said = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            left,
            Vec::new(),
            "SIG{signal}: outlived kbench; kbench said {said}"
        );
        let status = status.unwrap_or_else(|| panic!("SIG{signal}: kbench never ended: {said}"));
        if handled {
            assert_eq!(status.code(), Some(130), "SIG{signal}: {said}");
            assert!(
                said.contains("kbench: stopped by a signal"),
                "SIG{signal}: {said}"
            );
        } else {
            assert_eq!(status.signal(), Some(libc::SIGKILL), "SIG{signal}");
        }
        if signal == "TERM" {
            // Nothing cut short is recorded, and --resume evaluates it (its forward now
            // times out soon).
            assert_eq!(verdicts(&out), Vec::new(), "{said}");
            let flags = ["--timeout-call", "5", "--sandbox", "off", "--resume"];
            let resumed = eval(&submissions, &out, &flags, &mark).output().unwrap();
            let said = String::from_utf8_lossy(&resumed.stderr);
            assert_eq!(resumed.status.code(), Some(1), "the gate fails: {said}");
            let want = ("level1/19_ReLU/hang.py".to_string(), "timeout".to_string());
            assert_eq!(verdicts(&out), vec![want], "{said}");
            assert_eq!(left_behind(&mark, Duration::from_secs(10)), Vec::new());
        }
    }
}
