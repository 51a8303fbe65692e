//! A run split into shards, end to end on the CPU: three `kbench eval --shard I/3` processes at
//! once over CPU fixtures, then `kbench merge`, against one unsharded run with the same seed:
//! the same verdicts and reports, and merges that are not one run's shards refused, nor shards
//! whose records do not authenticate under the run's seed file. Needs the project venv
//! (tests/setup-python.sh) or KBENCH_PYTHON pointing at a Python with torch.

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

/// `record` written into `dir` as a run with the seed `seed` from a seed file writes it (sealed
/// with its MAC), e.g. a shard's record as a run killed part-way leaves it.
fn write_sealed(dir: &Path, mut record: serde_json::Value, seed: u64) {
    record.as_object_mut().unwrap().remove("record_mac");
    let json = serde_json::to_vec_pretty(&record).unwrap();
    let sealed = kbench::record_mac::RecordKey::from_seed(seed).seal(&json);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("results.json"), sealed).unwrap();
}

#[test]
fn three_shards_merge_into_the_single_run() {
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed");
    const SEED: u64 = 8106604497;
    std::fs::write(&seed, format!("{SEED}\n")).unwrap();
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
    // A shard's record edited (a failing row made a pass at 9.5x) is not sealed again by a
    // resume: the edit would pass as the run's.
    let honest = std::fs::read(shards[1].join("results.json")).unwrap();
    let forged = forge_a_pass(&honest);
    std::fs::write(shards[1].join("results.json"), &forged).unwrap();
    let laundered = eval(&shards[1], &seed, &["--shard", "1/3", "--resume"])
        .output()
        .unwrap();
    assert_eq!(laundered.status.code(), Some(2), "{}", stderr(&laundered));
    assert!(
        stderr(&laundered).contains("a MAC that does not verify"),
        "{}",
        stderr(&laundered)
    );
    assert_eq!(
        std::fs::read(shards[1].join("results.json")).unwrap(),
        forged
    );
    std::fs::write(shards[1].join("results.json"), &honest).unwrap();

    let merged = tmp.path().join("merged");
    let merge = |extra: &[&str]| {
        let mut cmd = kbench(&["merge", "--seed-file"]);
        cmd.arg(&seed)
            .args(shards.iter().rev())
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
    write_sealed(&unfinished, cut, SEED);
    let early = kbench(&["merge", "--if-complete", "--seed-file"])
        .arg(&seed)
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
    let refused_as = |flags: &[&std::ffi::OsStr], runs: &[&Path], why: &str| {
        let out = tmp.path().join("refused");
        let mut cmd = kbench(&["merge"]);
        cmd.args(flags).args(runs).arg("--out").arg(&out);
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(why), "{}", stderr(&o));
        assert!(!out.join("results.json").exists());
    };
    let with_seed = ["--seed-file".as_ref(), seed.as_os_str()];
    let refused = |runs: &[&Path], why: &str| refused_as(&with_seed, runs, why);
    refused(&[&shards[0], &shards[1]], "shard 2/3 is missing");
    refused(&[&shards[0], &single], "is not a shard");
    // Records that do not authenticate under the run's seed file. A shard's row edited to pass:
    let edited = tmp.path().join("edited");
    std::fs::create_dir_all(&edited).unwrap();
    std::fs::write(edited.join("results.json"), forge_a_pass(&honest)).unwrap();
    let why = format!(
        "{}: its results.json has a MAC that does not verify",
        edited.display()
    );
    refused(&[&shards[0], &edited, &shards[2]], &why);
    // A shard whose record carries no MAC (written, or rewritten, without the seed):
    let bare = tmp.path().join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::write(bare.join("results.json"), record(&shards[1]).to_string()).unwrap();
    refused(&[&shards[0], &bare, &shards[2]], "has no MAC");
    // A shard sealed under another run's seed file:
    let foreign = tmp.path().join("foreign");
    write_sealed(&foreign, record(&shards[1]), SEED + 1);
    refused(&[&shards[0], &foreign, &shards[2]], "does not verify");
    // Without the seed file nothing authenticates them; --unauthenticated takes them as they
    // are, and the merged record says so.
    let all: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    refused_as(&[], &all, "--seed-file FILE");
    let unchecked = tmp.path().join("unchecked");
    let o = kbench(&["merge", "--unauthenticated", "--out"])
        .arg(&unchecked)
        .args(&all)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--unauthenticated"), "{}", stderr(&o));
    assert_eq!(record(&unchecked)["unauthenticated"], true);
    assert!(record(&merged).get("unauthenticated").is_none());
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

/// `results.json`'s bytes with its first failing row made a pass at 9.5x, edited in place as an
/// attacker without the seed would (its MAC left as it was).
fn forge_a_pass(results: &[u8]) -> Vec<u8> {
    let text = String::from_utf8(results.to_vec()).unwrap();
    let record: serde_json::Value = serde_json::from_str(&text).unwrap();
    let failing = record["evaluations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["verdict"].as_str().unwrap())
        .find(|v| *v != "pass")
        .expect("a shard with a failing row");
    let forged = text.replacen(
        &format!("\"verdict\": \"{failing}\""),
        "\"verdict\": \"pass\",\n      \"speedup\": 9.5",
        1,
    );
    assert_ne!(forged, text);
    forged.into_bytes()
}
