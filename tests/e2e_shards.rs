//! A run split into shards, end to end on the CPU: three `kbench eval --shard I/3` processes at
//! once over CPU fixtures, then `kbench merge`, against one unsharded run with the same seed:
//! the same verdicts and reports, and merges that are not one run's shards refused. Needs the
//! project venv (tests/setup-python.sh) or KBENCH_PYTHON pointing at a Python with torch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn kbench(args: &[&str]) -> Command {
    let python = std::env::var("KBENCH_PYTHON")
        .unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kbench"));
    cmd.args(args)
        .env("KBENCH_PYTHON", python)
        // Builds persist across test runs in the target folder; CI starts empty.
        .env("KBENCH_CACHE", root().join("target/kbench-test-cache"));
    cmd
}

/// `kbench eval` of a few CPU fixtures at the small sizes, with the seed from `seed_file`.
fn eval(out: &Path, seed_file: &Path, extra: &[&str]) -> Command {
    let fixtures = root().join("tests/fixtures/cpu");
    let mut cmd = kbench(&["eval"]);
    cmd.arg(fixtures)
        .args(["--device", "cpu", "--scale", "small", "--trials", "2"])
        .args(["--max-samples", "8", "--timeout-call", "15", "--jobs", "1"])
        .args(["--only", "1/40,2/76,2/83"])
        .arg("--seed-file")
        .arg(seed_file)
        .arg("--out")
        .arg(out)
        .args(extra);
    cmd
}

fn record(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap()
}

fn verdicts(out: &Path) -> BTreeMap<String, String> {
    record(out)["evaluations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let verdict = e["verdict"].as_str().unwrap().to_string();
            (e["file"].as_str().unwrap().to_string(), verdict)
        })
        .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn three_shards_merge_into_the_single_run() {
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed");
    std::fs::write(&seed, "8106604497\n").unwrap();
    let shards: Vec<PathBuf> = (0..3)
        .map(|i| tmp.path().join(format!("shard{i}")))
        .collect();
    // The shards run as separate processes at once, as on three machines, with --resume as the
    // cluster examples pass it: a fresh folder starts the shard.
    let running: Vec<Child> = shards
        .iter()
        .enumerate()
        .map(|(i, out)| {
            eval(out, &seed, &["--shard", &format!("{i}/3"), "--resume"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let single = tmp.path().join("single");
    let whole = eval(&single, &seed, &[]).output().unwrap();
    assert_eq!(whole.status.code(), Some(1), "{}", stderr(&whole));
    for child in running {
        // A shard's gate is its part's: one holding only correct kernels passes.
        let done = child.wait_with_output().unwrap();
        assert!(
            matches!(done.status.code(), Some(0 | 1)),
            "{}",
            stderr(&done)
        );
    }
    // Each shard holds its part; together every submission once.
    let sizes: Vec<usize> = shards.iter().map(|s| verdicts(s).len()).collect();
    assert_eq!(
        sizes.iter().sum::<usize>(),
        verdicts(&single).len(),
        "{sizes:?}"
    );
    assert!(sizes.iter().all(|n| *n >= 1), "{sizes:?}");
    // The seed from the file stays secret: only its hash is recorded.
    let config = &record(&shards[0])["config"];
    assert!(config["seed"].is_null(), "{config}");
    assert!(config["seed_sha256"]
        .as_str()
        .is_some_and(|h| h.len() == 64));
    assert!(!std::fs::read_to_string(shards[0].join("results.json"))
        .unwrap()
        .contains("8106604497"));

    // A finished shard run again with --resume (a requeued cluster task) resumes it: nothing
    // is evaluated again and its record stays.
    let before = record(&shards[1]);
    let again = eval(&shards[1], &seed, &["--shard", "1/3", "--resume"])
        .output()
        .unwrap();
    assert!(
        matches!(again.status.code(), Some(0 | 1)),
        "{}",
        stderr(&again)
    );
    assert_eq!(record(&shards[1])["evaluations"], before["evaluations"]);
    assert_eq!(record(&shards[1])["run_id"], before["run_id"]);

    let merged = tmp.path().join("merged");
    let merge = |extra: &[&str]| {
        let mut cmd = kbench(&["merge"]);
        cmd.args(shards.iter().rev())
            .arg("--out")
            .arg(&merged)
            .args(extra);
        cmd.output().unwrap()
    };
    // --if-complete before every shard has finished: nothing written, not a failure.
    let unfinished = tmp.path().join("unfinished");
    std::fs::create_dir_all(&unfinished).unwrap();
    let mut cut = record(&shards[2]);
    cut["evaluations"].as_array_mut().unwrap().pop();
    std::fs::write(unfinished.join("results.json"), cut.to_string()).unwrap();
    let early = kbench(&["merge", "--if-complete"])
        .args([&shards[0], &shards[1], &unfinished])
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert_eq!(early.status.code(), Some(0), "{}", stderr(&early));
    assert!(stderr(&early).contains("not yet"), "{}", stderr(&early));
    assert!(!merged.join("results.json").exists());

    let joined = merge(&["--if-complete"]);
    assert_eq!(joined.status.code(), Some(1), "{}", stderr(&joined));
    assert_eq!(verdicts(&merged), verdicts(&single));
    assert_eq!(record(&merged)["config"], record(&single)["config"]);
    assert!(record(&merged)["shard"].is_null());
    // The merged run is a run of its own: its command is the merge's, its logs are inside it.
    assert_eq!(record(&merged)["command"][1], "merge");
    assert!(record(&merged)["run_id"]
        .as_str()
        .is_some_and(|id| id.starts_with("merge-")));
    assert!(merged.join("report.html").is_file());
    let logs: Vec<String> = record(&merged)["evaluations"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["logs"].as_array().unwrap().clone())
        .map(|log| log.as_str().unwrap().to_string())
        .collect();
    assert!(!logs.is_empty());
    for log in logs {
        assert!(merged.join(&log).is_file(), "{log}");
    }
    // A merged run is replaced only when asked.
    let twice = merge(&[]);
    assert_eq!(twice.status.code(), Some(2), "{}", stderr(&twice));
    assert!(stderr(&twice).contains("--replace"), "{}", stderr(&twice));
    let replaced = merge(&["--replace"]);
    assert_eq!(replaced.status.code(), Some(1), "{}", stderr(&replaced));
    assert_eq!(verdicts(&merged), verdicts(&single));
    for report in ["results.csv", "junit.xml"] {
        let lines = |dir: &Path| {
            let text = std::fs::read_to_string(dir.join(report)).unwrap();
            (text.lines().count(), text.matches("<failure").count())
        };
        assert_eq!(lines(&merged), lines(&single), "{report}");
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(merged.join("summary.json")).unwrap()).unwrap();
    assert!(summary["levels"].as_array().is_some_and(|l| !l.is_empty()));

    // Not one run's shards: a shard missing, a whole run given as a shard.
    let refused = |runs: &[&Path], why: &str| {
        let out = tmp.path().join("refused");
        let mut cmd = kbench(&["merge"]);
        cmd.args(runs).arg("--out").arg(&out);
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(why), "{}", stderr(&o));
        assert!(!out.join("results.json").exists());
    };
    refused(&[&shards[0], &shards[1]], "shard 2/3 is missing");
    refused(&[&shards[0], &single], "is not a shard");
    // A shard needs a seed shared with the other shards.
    let fixtures = root().join("tests/fixtures/cpu");
    let o = kbench(&["eval", "--device", "cpu", "--shard", "0/3"])
        .arg(&fixtures)
        .arg("--out")
        .arg(tmp.path().join("unseeded"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--seed-file"), "{}", stderr(&o));
}
