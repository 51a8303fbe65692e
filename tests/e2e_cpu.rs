//! End to end on the CPU with the real workers: every fixture gets its expected verdict
//! (tests/fixtures/cpu/expected.toml), the run finishes, the reports agree, exit codes hold,
//! and --resume continues without redoing work. Needs the project venv (tests/setup-python.sh)
//! or KBENCH_PYTHON pointing at a Python with torch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    std::env::var("KBENCH_PYTHON")
        .unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string())
}

fn eval(dir: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kbench"))
        .arg("eval")
        .arg(dir)
        .args([
            "--device",
            "cpu",
            "--scale",
            "small",
            "--trials",
            "2",
            "--samples",
            "4",
            "--timeout-call",
            "15",
        ])
        .arg("--python")
        .arg(python())
        .arg("--out")
        .arg(out)
        .args(extra)
        // Builds persist across test runs in the target folder; CI starts empty.
        .env("KBENCH_CACHE", root().join("target/kbench-test-cache"))
        .output()
        .expect("run kbench")
}

fn verdicts(out: &Path) -> BTreeMap<String, String> {
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    record["evaluations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["file"].as_str().unwrap().to_string(),
                e["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn expected(dir: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(dir.join("expected.toml")).unwrap();
    let table: toml::Table = text.parse().unwrap();
    table
        .into_iter()
        .map(|(k, v)| (k, v.as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn fixtures_get_their_expected_verdicts_and_resume_continues() {
    let fixtures = root().join("tests/fixtures/cpu");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let first = eval(&fixtures, &out, &[]);
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert_eq!(
        first.status.code(),
        Some(1),
        "faulty fixtures fail the gate\n{stderr}"
    );
    assert_eq!(verdicts(&out), expected(&fixtures), "\n{stderr}");

    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), expected(&fixtures).len() + 1);
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    let failing = expected(&fixtures)
        .values()
        .filter(|v| !matches!(v.as_str(), "pass" | "no_kernel"))
        .count();
    assert!(
        junit.contains(&format!("failures=\"{failing}\"")),
        "{junit}"
    );
    // What a flooding kernel prints is capped in its log, not in memory or on the console.
    let logs: Vec<_> = std::fs::read_dir(out.join("logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let flood = logs
        .iter()
        .find(|p| {
            p.to_string_lossy().contains("output_flood")
                && p.to_string_lossy().ends_with("candidate.log")
        })
        .unwrap();
    let size = flood.metadata().unwrap().len();
    assert!(
        size > 1 << 20 && size < (4 << 20) + 4096,
        "flood log is {size} bytes"
    );
    assert!(std::fs::read_to_string(flood)
        .unwrap()
        .contains("more bytes of output dropped"));

    // A second run into the same folder refuses without --resume, and resumes with nothing to do.
    assert_eq!(eval(&fixtures, &out, &[]).status.code(), Some(2));
    let again = eval(&fixtures, &out, &["--resume"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("0 submission(s) to evaluate"));
    assert_eq!(verdicts(&out), expected(&fixtures));
}

#[test]
fn the_bundled_cpu_example_passes_the_gate() {
    let example = root().join("benchmarks/example/cpu");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let run = eval(&example, &out, &[]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(verdicts(&out), expected(&example));
    assert!(String::from_utf8_lossy(&run.stdout).contains("gate: passed"));

    // Upstream's loop for comparison: same verdicts, timed candidate first, ratio of means.
    let kb = tmp.path().join("kernelbench");
    let run = eval(&example, &kb, &["--mode", "kernelbench"]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(verdicts(&kb), expected(&example));
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(kb.join("results.json")).unwrap()).unwrap();
    assert_eq!(record["config"]["mode"], "kernelbench");
    for e in record["evaluations"].as_array().unwrap() {
        let t = &e["timing"];
        assert_eq!(t["method"], "kernelbench_cpu_perf_counter");
        assert_eq!(t["speedup"], t["mean_ratio"]);
    }
}
