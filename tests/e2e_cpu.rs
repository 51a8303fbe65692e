//! End to end on the CPU with the real workers: every fixture gets its expected verdict, with
//! the named check as evidence where one is given (tests/fixtures/cpu/expected.toml: the CPU
//! part of the adversarial corpus, cheats per class, honest kernels and faults), the run
//! finishes, the reports agree, exit codes hold, and --resume continues without redoing work. Needs the project venv (tests/setup-python.sh)
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
    // Builds persist across test runs in the target folder; CI starts empty.
    eval_in(&root().join("target/kbench-test-cache"), dir, out, extra)
}

/// `eval` with the build cache at `cache`; a call times out after 15 s unless `extra` says.
fn eval_in(cache: &Path, dir: &Path, out: &Path, extra: &[&str]) -> Output {
    let timeout: &[&str] = if extra.contains(&"--timeout-call") {
        &[]
    } else {
        &["--timeout-call", "15"]
    };
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
            "--max-samples",
            "8",
        ])
        .args(timeout)
        .arg("--python")
        .arg(python())
        .arg("--out")
        .arg(out)
        .args(extra)
        .env("KBENCH_CACHE", cache)
        .output()
        .expect("run kbench")
}

fn evaluations(out: &Path) -> BTreeMap<String, serde_json::Value> {
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    record["evaluations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["file"].as_str().unwrap().to_string(), e.clone()))
        .collect()
}

fn verdicts(out: &Path) -> BTreeMap<String, String> {
    evaluations(out)
        .into_iter()
        .map(|(file, e)| (file, e["verdict"].as_str().unwrap().to_string()))
        .collect()
}

/// One row of an expected.toml: `"path" = { class = "...", expected = "...", check = "..." }`,
/// or the plain form `"path" = "verdict"`.
#[derive(Debug)]
struct Expected {
    class: String,
    verdict: String,
    check: Option<String>,
}

fn expected_table(dir: &Path) -> BTreeMap<String, Expected> {
    let text = std::fs::read_to_string(dir.join("expected.toml")).unwrap();
    let table: toml::Table = text.parse().unwrap();
    table
        .into_iter()
        .map(|(file, v)| {
            let row = match v {
                toml::Value::String(verdict) => Expected {
                    class: String::new(),
                    verdict,
                    check: None,
                },
                toml::Value::Table(t) => {
                    let field = |k: &str| t.get(k).and_then(|v| v.as_str()).map(str::to_string);
                    Expected {
                        class: field("class").unwrap_or_default(),
                        verdict: field("expected")
                            .unwrap_or_else(|| panic!("{file}: no `expected` verdict")),
                        check: field("check"),
                    }
                }
                other => panic!("{file}: expected a verdict or a table, got {other}"),
            };
            (file, row)
        })
        .collect()
}

fn expected(dir: &Path) -> BTreeMap<String, String> {
    expected_table(dir)
        .into_iter()
        .map(|(file, row)| (file, row.verdict))
        .collect()
}

/// Whether an evaluation names `check` as evidence: in its reason, as a failed or warning
/// runtime check, as a static finding's rule, or as a task flag.
fn has_evidence(e: &serde_json::Value, check: &str) -> bool {
    let list = |key: &str| e[key].as_array().cloned().unwrap_or_default();
    e["reason"].as_str().is_some_and(|r| r.contains(check))
        || list("checks")
            .iter()
            .any(|c| c["name"] == check && matches!(c["outcome"].as_str(), Some("fail" | "warn")))
        || list("findings").iter().any(|f| f["rule"] == check)
        || list("task_flags").iter().any(|f| f == check)
}

/// Every disagreement between a run and an expected table, one line each.
fn mismatches(out: &Path, dir: &Path) -> Vec<String> {
    let got = evaluations(out);
    let want = expected_table(dir);
    let mut lines = Vec::new();
    for (file, row) in &want {
        let Some(e) = got.get(file) else {
            lines.push(format!("{file}: not evaluated"));
            continue;
        };
        let verdict = e["verdict"].as_str().unwrap_or_default();
        let reason = e["reason"].as_str().unwrap_or_default();
        if verdict != row.verdict {
            lines.push(format!(
                "{file} ({}): expected {}, got {verdict}: {reason}",
                row.class, row.verdict
            ));
        } else if let Some(check) = row.check.as_deref().filter(|c| !has_evidence(e, c)) {
            let checks: Vec<String> = e["checks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    format!(
                        "{}={}",
                        c["name"].as_str().unwrap_or("?"),
                        c["outcome"].as_str().unwrap_or("?")
                    )
                })
                .collect();
            lines.push(format!(
                "{file} ({}): {verdict} as expected, but no evidence of {check} (reason: {reason:?}; checks: {})",
                row.class,
                checks.join(", ")
            ));
        }
    }
    for file in got.keys().filter(|f| !want.contains_key(*f)) {
        lines.push(format!("{file}: evaluated but not in expected.toml"));
    }
    lines
}

#[test]
fn fixtures_get_their_expected_verdicts_and_resume_continues() {
    let fixtures = root().join("tests/fixtures/cpu");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    // A folder of the host's with a file, which drift_and_own_error.py and
    // drift_and_own_error_fallback.py link to from the build folders kbench removes (the
    // rebuild's scratch folder among them).
    let victim = Path::new("/tmp/kbench-red-team-drift-victim");
    std::fs::create_dir_all(victim).unwrap();
    std::fs::write(victim.join("keep"), "kbench must not remove this").unwrap();
    // The two fixtures that never return wait out the call's timeout; an honest call at the
    // small size takes milliseconds.
    let quick = ["--timeout-call", "5"];
    let first = eval(&fixtures, &out, &quick);
    let stderr = String::from_utf8_lossy(&first.stderr);
    // Verdicts first: they say more than the exit code when something is off.
    let wrong = if out.join("results.json").exists() {
        mismatches(&out, &fixtures)
    } else {
        vec!["no results.json".to_string()]
    };
    assert!(
        wrong.is_empty(),
        "{} of {} fixtures not as expected:\n{}\n\n{stderr}",
        wrong.len(),
        expected(&fixtures).len(),
        wrong.join("\n")
    );
    assert_eq!(
        first.status.code(),
        Some(1),
        "faulty fixtures fail the gate\n{stderr}"
    );
    // The attacks on the trusted side fail because submission code ran confined.
    for (file, e) in evaluations(&out) {
        let sandbox = e["sandbox"].as_str().unwrap_or_default();
        assert!(
            sandbox.starts_with("namespaces"),
            "{file}: sandbox {sandbox:?}"
        );
    }

    // kbench wrote nothing through the links a submission planted in its build folder, and no
    // candidate's copy of another's source reached the cache.
    for victim in [
        "/tmp/kbench-red-team-victim.json",
        "/tmp/kbench-red-team-victim-folder",
    ] {
        assert!(!Path::new(victim).exists(), "kbench wrote {victim}");
    }
    let stolen: Vec<_> = walkdir::WalkDir::new(root().join("target/kbench-test-cache/builds"))
        .into_iter()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("stolen-"))
        .map(|e| e.path().display().to_string())
        .collect();
    assert!(stolen.is_empty(), "another's source was copied: {stolen:?}");
    assert!(
        victim.join("keep").exists(),
        "kbench removed a folder through a link planted in a build folder"
    );

    // Processes that burn the CPU while the candidate's worker is idle gain it nothing: they are
    // stopped whenever the reference runs (unstopped, an honest ReLU read 1.79x FASTER).
    let slowed = &evaluations(&out)["level1/19_ReLU/cheat_slow_reference_processes.py"]["timing"];
    assert_ne!(slowed["label"], "faster", "{slowed}");

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
    // Extensions built in __init__ and in the first forward are built in the compile pool
    // (it constructs ModelNew and calls it on fake tensors); the evaluation slot only loads.
    let evals = evaluations(&out);
    for (file, reached) in [
        ("level1/19_ReLU/build_in_init.py", "forward"),
        ("level1/19_ReLU/honest_lazy_build_in_forward.py", "forward"),
    ] {
        let build = &evals[file]["build"];
        assert_eq!(build["warmed"], reached, "{file}: {build}");
        assert_eq!(
            build["pool_compiled"].as_array().map(Vec::len),
            Some(1),
            "{file}: {build}"
        );
        assert_eq!(
            build["slot_compiled"],
            serde_json::json!([]),
            "{file}: {build}"
        );
    }
    // Forged times are charged what kbench's own clock does not explain: the forgery reads
    // about as slow as it is, and charged times label nothing FASTER.
    let forged = &evals["level1/19_ReLU/cheat_forge_times_gc.py"]["timing"];
    assert_eq!(forged["method"], "charged_wall_envelope", "{forged}");
    assert!(forged["speedup"].as_f64().unwrap() < 1.0, "{forged}");
    assert_ne!(forged["label"], "faster", "{forged}");
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
    assert_eq!(eval(&fixtures, &out, &quick).status.code(), Some(2));
    let again = eval(&fixtures, &out, &["--resume", "--timeout-call", "5"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("0 submission(s) to evaluate"));
    assert_eq!(verdicts(&out), expected(&fixtures));
}

/// The sandbox attacks of the corpus are real: unconfined (`--sandbox off`, kbench and its
/// workers as one user in one set of namespaces) each one reaches the trusted side (the reply
/// key still refuses the impersonator's answers). Run on a
/// cache of their own, since one of them rewrites the cached worker code.
#[test]
fn attacks_succeed_unconfined() {
    const ATTACKS: [&str; 5] = [
        "cheat_read_parent_memory.py",
        "cheat_kill_reference.py",
        "cheat_impersonate_reference.py",
        "cheat_outlive_run.py",
        "cheat_rewrite_worker_code.py",
    ];
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("attacks/level1/19_ReLU");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ATTACKS {
        std::fs::copy(
            root().join("tests/fixtures/cpu/level1/19_ReLU").join(file),
            dir.join(file),
        )
        .unwrap();
    }
    let out = tmp.path().join("run");
    let cache = tmp.path().join("cache");
    let run = Command::new(env!("CARGO_BIN_EXE_kbench"))
        .arg("eval")
        .arg(tmp.path().join("attacks"))
        .args(["--device", "cpu", "--scale", "small", "--trials", "2"])
        .args([
            "--max-samples",
            "8",
            "--timeout-call",
            "15",
            "--sandbox",
            "off",
        ])
        .arg("--python")
        .arg(python())
        .arg("--out")
        .arg(&out)
        .env("KBENCH_CACHE", &cache)
        .output()
        .expect("run kbench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    let got = evaluations(&out);
    let e = |name: &str| &got[&format!("level1/19_ReLU/{name}")];
    let verdict = |name: &str| {
        format!(
            "{} {}",
            e(name)["verdict"].as_str().unwrap(),
            e(name)["reason"].as_str().unwrap()
        )
    };
    assert_eq!(e(ATTACKS[0])["sandbox"], "none (--sandbox off)");
    // It found request lines with their nonces in kbench's memory, so it computed honestly.
    let read = verdict("cheat_read_parent_memory.py");
    assert!(
        read.starts_with("no_kernel"),
        "{read}
{stderr}"
    );
    // It killed its reference: the evaluation fails instead of being skipped.
    let killed = verdict("cheat_kill_reference.py");
    assert!(
        killed.starts_with("crashed the reference worker died"),
        "{killed}"
    );
    // It took the reference's pipes and answered in its place, echoing every nonce; without the
    // reference's key its replies were refused (they passed all-zeros outputs before the key).
    let impersonated = verdict("cheat_impersonate_reference.py");
    assert!(
        impersonated.starts_with("cheat the reference worker's reply was forged"),
        "{impersonated}"
    );
    // It wrote into the cached worker code (a later run writes it again).
    let rewrote = verdict("cheat_rewrite_worker_code.py");
    assert!(rewrote.starts_with("no_kernel"), "{rewrote}");
    // Its daemon outlived kbench and rewrote the reports.
    let outlived = verdict("cheat_outlive_run.py");
    assert!(outlived.starts_with("incorrect"), "{outlived}");
    let rewritten = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(200));
        !std::fs::read_to_string(out.join("results.csv"))
            .unwrap()
            .contains("incorrect")
    });
    assert!(rewritten, "the daemon did not rewrite the reports");
}

/// One submission cannot corrupt another's cached build: a pure-PyTorch attack evaluated after an
/// honest file was built rewrites every other build record it can reach to `failed` (appending
/// to the artifacts and hashing them again as kbench does). Confined it reaches none, and the
/// honest file is reused from the cache untouched; unconfined it rewrites the record, which then
/// does not authenticate under the cache's key, so the honest file is built again and passes, its
/// evaluation saying why. On a cache of its own.
#[test]
fn a_submission_cannot_poison_anothers_cached_build() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let fixtures = root().join("tests/fixtures/cpu/level1/19_ReLU");
    for (tree, file) in [
        ("victim", "build_in_init.py"),
        ("attack", "cheat_poison_build_cache.py"),
    ] {
        let dir = tmp.path().join(tree).join("level1/19_ReLU");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(fixtures.join(file), dir.join(file)).unwrap();
    }
    let mut runs = 0;
    let mut run = |tree: &str, extra: &[&str]| {
        runs += 1;
        let out = tmp.path().join(format!("run-{runs}"));
        let output = eval_in(&cache, &tmp.path().join(tree), &out, extra);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let evals = evaluations(&out);
        let (_, e) = evals
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("{stderr}"));
        let said = format!("{} {}: {stderr}", e["verdict"], e["reason"]);
        (e, said)
    };
    let (built, said) = run("victim", &[]);
    assert_eq!(built["verdict"], "pass", "{said}");
    for sandbox in ["auto", "off"] {
        let (attack, said) = run("attack", &["--sandbox", sandbox]);
        assert_eq!(attack["verdict"], "no_kernel", "{said}");
        let (victim, said) = run("victim", &[]);
        assert_eq!(
            victim["verdict"], "pass",
            "after the {sandbox} attack: {said}"
        );
        let build = &victim["build"];
        // The slot loaded the pool's build where the pool built it: nothing compiled again.
        assert_eq!(build["slot_compiled"], serde_json::json!([]), "{build}");
        if sandbox == "auto" {
            assert_eq!(build["cache_hit"], true, "{build}");
        } else {
            assert_eq!(build["cache_hit"], false, "{build}");
            let note = build["cache_note"].as_str().unwrap_or_default();
            assert!(note.contains("not trusted"), "{build}");
        }
    }
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
    // What came before the first build, and how long it took.
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("static checks of 2 file(s) in") && stderr.contains("facts of 2 task(s)"),
        "{stderr}"
    );

    // Upstream's loop for comparison: same verdicts, timed candidate first, ratio of means.
    // In two lanes: both evaluations load and check side by side, and time one at a time.
    let kb = tmp.path().join("kernelbench");
    let run = eval(&example, &kb, &["--mode", "kernelbench", "--lanes", "2"]);
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

    // The torch.compile baseline: a third arm in the same rounds, its own speedup and samples;
    // and the process check, the reference timed in the candidate's worker too (asked for every
    // label here: by default only FASTER and SLOWER near 1 get it).
    let compiled = tmp.path().join("compiled");
    let run = eval(
        &example,
        &compiled,
        &[
            "--baseline",
            "eager,compile",
            "--process-check",
            "always",
            "--only",
            "2/76",
        ],
    );
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(compiled.join("results.json")).unwrap()).unwrap();
    assert_eq!(record["config"]["compile_baseline"], true);
    assert_eq!(record["config"]["process_check_always"], true);
    let t = &record["evaluations"][0]["timing"];
    let p = &t["process"];
    assert_eq!(p["rounds"], 6, "{t}");
    let ratio = p["ratio"].as_f64().unwrap();
    assert!(p["ci_low"].as_f64().unwrap() <= ratio && ratio <= p["ci_high"].as_f64().unwrap());
    assert!(p["reference_ms"].as_f64().unwrap() > 0.0 && p["control_ms"].as_f64().unwrap() > 0.0);
    // The interval reported covers the one measured.
    assert!(t["speedup_ci_low"].as_f64() <= p["measured_ci_low"].as_f64());
    assert!(t["speedup_ci_high"].as_f64() >= p["measured_ci_high"].as_f64());
    let b = &t["compile"];
    assert!(b["compile_s"].as_f64().unwrap() > 0.0, "{t}");
    assert!(b["speedup"].as_f64().unwrap() > 0.0);
    assert!(b["speedup_ci_low"].as_f64() <= b["speedup"].as_f64());
    // Every round holds every arm: B has as many samples as the eager reference.
    assert_eq!(
        b["reference"]["samples_ms"].as_array().unwrap().len(),
        t["reference"]["samples_ms"].as_array().unwrap().len()
    );
    // The suite aggregates against torch.compile, beside the eager ones.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(compiled.join("summary.json")).unwrap()).unwrap();
    let all = summary["levels"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(all["versus_compile"]["timed"], 1, "{all}");
    assert!(String::from_utf8_lossy(&run.stdout).contains("vs torch.compile (1 task(s)"));
}

/// A KernelBench-format tree from elsewhere: no scale.toml, a level past 3, a task file that
/// cannot be imported here. Every task is evaluated and the run finishes.
#[test]
fn a_foreign_tree_without_scale_toml_runs_every_task() {
    let tmp = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let path = tmp.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let task = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\
                batch_size = 8\ndim = 64\n\
                def get_inputs():\n    return [torch.rand(batch_size, dim)]\n\
                def get_init_inputs():\n    return []\n";
    write("tree/level1/1_Double.py", task);
    write(
        "tree/level4/1_Needs_a_hub.py",
        &format!("import kbench_no_such_module\n{task}"),
    );
    let submission = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x + x\n";
    write("sub/level1/1_Double.py", submission);
    write("sub/level4/1_Needs_a_hub.py", submission);
    let out = tmp.path().join("run");
    let run = Command::new(env!("CARGO_BIN_EXE_kbench"))
        .arg("eval")
        .arg(tmp.path().join("sub"))
        .arg("--tasks")
        .arg(tmp.path().join("tree"))
        .args(["--device", "cpu", "--trials", "2", "--max-samples", "8"])
        .arg("--python")
        .arg(python())
        .arg("--out")
        .arg(&out)
        .env("KBENCH_CACHE", root().join("target/kbench-test-cache"))
        .output()
        .expect("run kbench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let got = evaluations(&out);
    let double = &got["level1/1_Double.py"];
    assert_eq!(double["verdict"], "no_kernel", "{double}");
    let hub = &got["level4/1_Needs_a_hub.py"];
    assert_eq!(hub["verdict"], "skipped", "{hub}");
    assert!(
        hub["reason"]
            .as_str()
            .unwrap()
            .contains("kbench_no_such_module"),
        "{hub}"
    );
    // The facts of the task that does not import are a warning on its own evaluation.
    assert!(has_evidence(hub, "task.facts"), "{hub}");
    assert!(!has_evidence(double, "task.facts"), "{double}");
}

/// A level-1 task `name` under `root/tree` (doubling a `batch_size x dim` input, no scale.toml)
/// and its submission under `root/sub`.
fn doubling_task(root: &Path, name: &str, batch_size: u64, dim: u64) {
    let write = |rel: String, text: String| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        format!("tree/level1/{name}"),
        format!(
            "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\
             batch_size = {batch_size}\ndim = {dim}\n\
             def get_inputs():\n    return [torch.rand(batch_size, dim)]\n\
             def get_init_inputs():\n    return []\n"
        ),
    );
    write(
        format!("sub/level1/{name}"),
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x + x\n".into(),
    );
}

/// `--scale small` on a tree without scale.toml: the small size derived in the task's facts
/// stands in (a task too large for the CPU at full size is evaluated, not skipped).
#[test]
fn a_foreign_tree_runs_at_its_derived_small_size() {
    let tmp = tempfile::tempdir().unwrap();
    // 4096 x 32768 floats: 512 MiB of input at full size, over the derived size's limit.
    doubling_task(tmp.path(), "1_Big.py", 4096, 32768);
    let out = tmp.path().join("run");
    let tree = tmp.path().join("tree");
    let run = eval(
        &tmp.path().join("sub"),
        &out,
        &["--tasks", tree.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let big = &evaluations(&out)["level1/1_Big.py"];
    assert_eq!(big["verdict"], "no_kernel", "{big}");
}

/// On the CPU at full size, a task whose inputs and outputs cannot fit the host's memory is
/// skipped before its workers start, warned of first, the reason giving the estimate and the
/// memory available; a run that evaluated nothing fails the gate unless --allow-empty, and so
/// does an empty folder.
#[test]
fn a_task_too_large_for_the_cpu_is_skipped_and_a_run_of_nothing_fails_the_gate() {
    let tmp = tempfile::tempdir().unwrap();
    // 2^20 x 2^20 floats: 4 TiB of input at full size (the facts count it on the meta device).
    doubling_task(tmp.path(), "1_Huge.py", 1 << 20, 1 << 20);
    std::fs::create_dir_all(tmp.path().join("empty")).unwrap();
    let run = |sub: &str, out: &str, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kbench"))
            .arg("eval")
            .arg(tmp.path().join(sub))
            .arg("--tasks")
            .arg(tmp.path().join("tree"))
            .args(["--device", "cpu", "--trials", "2", "--max-samples", "8"])
            .arg("--python")
            .arg(python())
            .arg("--out")
            .arg(tmp.path().join(out))
            .args(extra)
            .env("KBENCH_CACHE", root().join("target/kbench-test-cache"))
            .output()
            .expect("run kbench")
    };
    let huge = run("sub", "huge", &[]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&huge.stdout),
        String::from_utf8_lossy(&huge.stderr),
    );
    assert_eq!(huge.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "warning: --device cpu at full size: 1 task(s) need more than the \
             ",
        ) && stderr.contains("(the largest, level1/1_Huge: at least 16384.0 GiB)"),
        "{stderr}"
    );
    let skipped = &evaluations(&tmp.path().join("huge"))["level1/1_Huge.py"];
    assert_eq!(skipped["verdict"], "skipped", "{skipped}");
    let reason = skipped["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("needs at least 16384.0 GiB on the CPU at full size")
            && reason.contains("GiB is available: run it with --scale small"),
        "{reason}"
    );
    assert!(
        stdout.contains("nothing was evaluated: all 1 evaluation(s) skipped"),
        "{stdout}"
    );
    let allowed = run("sub", "allowed", &["--allow-empty"]);
    assert_eq!(allowed.status.code(), Some(0));
    let empty = run("empty", "empty", &[]);
    assert_eq!(empty.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&empty.stdout)
            .contains("nothing was evaluated: no submission of a selected task"),
        "{}",
        String::from_utf8_lossy(&empty.stdout)
    );
}

/// `--profile ncu` profiles GPU kernels: on the CPU it is refused before anything runs (before
/// the tool is looked for), and nothing is written.
#[test]
fn profile_ncu_is_refused_on_the_cpu() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("subs/level1/19_ReLU");
    std::fs::create_dir_all(&tree).unwrap();
    let honest = root().join("benchmarks/example/cpu/level1/19_ReLU/honest_cpp.py");
    std::fs::copy(&honest, tree.join("honest_cpp.py")).unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_kbench"))
        .arg("eval")
        .arg(tmp.path().join("subs"))
        .args(["--device", "cpu", "--profile", "ncu", "--python"])
        .arg(python())
        .arg("--out")
        .arg(tmp.path().join("refused"))
        .output()
        .expect("run kbench");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(
        said.contains("--profile ncu profiles GPU kernels"),
        "{said}"
    );
    assert!(!tmp.path().join("refused/results.json").exists());
}

/// `kbench eval SUB --sanitize` on the CPU with the test's stand-in compute-sanitizer first on
/// PATH (tests/fixtures/tools), the results in `out`, with `extra`.
fn sanitized(sub: &Path, out: &Path, extra: &[&str]) -> Output {
    let path = format!(
        "{}:{}",
        root().join("tests/fixtures/tools").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(env!("CARGO_BIN_EXE_kbench"))
        .arg("eval")
        .arg(sub)
        .args(["--device", "cpu", "--trials", "2", "--max-samples", "8"])
        .args(["--timeout-call", "15", "--sanitize", "--python", &python()])
        .arg("--out")
        .arg(out)
        .args(extra)
        .env("KBENCH_CACHE", root().join("target/kbench-test-cache"))
        .env("PATH", &path)
        .output()
        .expect("run kbench")
}

/// `--sanitize` through a stand-in compute-sanitizer (tests/fixtures/tools: it logs one report in
/// a kernel no submission has, then runs the worker it was given): each of the four tools starts
/// a worker of its own that loads the build (a copy, the four side by side, found built) and runs
/// a trial, its log is read back, the report is
/// a library's and changes no verdict (on the CPU no kernel is profiled as the submission's own:
/// each check says there was nothing of its own to check), and the run records the setting. Without the tool,
/// `--sanitize` is refused before anything runs.
#[test]
fn sanitize_runs_each_tool_and_keeps_a_library_s_report_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("subs/level1/19_ReLU");
    std::fs::create_dir_all(&tree).unwrap();
    let honest = root().join("benchmarks/example/cpu/level1/19_ReLU/honest_cpp.py");
    std::fs::copy(&honest, tree.join("honest_cpp.py")).unwrap();
    let out = tmp.path().join("run");
    let run = sanitized(&tmp.path().join("subs"), &out, &["--scale", "small"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let evals = evaluations(&out);
    let eval = evals.values().next().expect("one evaluation");
    assert_eq!(eval["verdict"], "pass", "{eval}");
    for tool in ["memcheck", "racecheck", "initcheck", "synccheck"] {
        let name = format!("sanitizer.{tool}");
        let check = eval["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name.as_str())
            .unwrap_or_else(|| panic!("no {name}: {}", eval["checks"]));
        // On the CPU nothing is profiled as the submission's own: nothing of its own to check.
        assert_eq!(check["outcome"], "skip", "{check}");
        let evidence = check["evidence"].as_str().unwrap();
        assert!(
            evidence.contains("nothing of its own to check")
                && evidence.contains("1 report(s) in library kernels, not the submission's")
                && evidence.contains("library_kernel"),
            "{evidence}"
        );
        let log = format!("sanitizer-{tool}.log");
        let kept = eval["logs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l.as_str())
            .find(|l| l.ends_with(&log))
            .unwrap_or_else(|| panic!("no {log}: {}", eval["logs"]));
        // The tools run side by side, each with a copy of the build where confined: each
        // worker finds it built (as many ninja steps after the import as before).
        let text = std::fs::read_to_string(out.join(kept)).unwrap();
        let steps: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("ninja steps so far"))
            .map(|l| l.split(": ").last().unwrap())
            .collect();
        assert!(
            steps.len() >= 2 && steps.iter().all(|s| *s == steps[0]),
            "{text}"
        );
    }
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(record["config"]["sanitize"], true);
    // No tool where kbench looks: refused, nothing run.
    let refused = Command::new(env!("CARGO_BIN_EXE_kbench"))
        .arg("eval")
        .arg(tmp.path().join("subs"))
        .args(["--device", "cpu", "--sanitize", "--python"])
        .arg(python())
        .arg("--out")
        .arg(tmp.path().join("refused"))
        .env("PATH", "/usr/bin:/bin")
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .output()
        .expect("run kbench");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(
        said.contains("--sanitize: compute-sanitizer is not on PATH"),
        "{said}"
    );
    assert!(!tmp.path().join("refused/results.json").exists());
}

/// A kernel made for the task's size may refuse the small one, where the sanitizer's trial runs:
/// there each tool runs the trial again at the run's size, in another worker, and says so. Here
/// the run's size is 8 rows, the tree's scale.toml makes the small size 4, and the submission
/// refuses a row count that is not a multiple of 8.
#[test]
fn sanitize_runs_at_the_run_s_size_where_the_small_size_raised() {
    let tmp = tempfile::tempdir().unwrap();
    doubling_task(tmp.path(), "1_Rows8.py", 8, 64);
    std::fs::write(
        tmp.path().join("tree/level1/scale.toml"),
        "[\"1_Rows8\"]\nsmall = { batch_size = 4 }\n",
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("sub/level1/1_Rows8.py"),
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n\
         \x20       if x.shape[0] % 8:\n\
         \x20           raise RuntimeError('rows8: the row count must be a multiple of 8')\n\
         \x20       return x + x\n",
    )
    .unwrap();
    let out = tmp.path().join("run");
    let tree = tmp.path().join("tree");
    let run = sanitized(
        &tmp.path().join("sub"),
        &out,
        &["--tasks", tree.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let eval = &evaluations(&out)["level1/1_Rows8.py"];
    assert_eq!(eval["verdict"], "no_kernel", "{eval}");
    for tool in ["memcheck", "racecheck", "initcheck", "synccheck"] {
        let name = format!("sanitizer.{tool}");
        let checks = eval["checks"].as_array().unwrap();
        let check = checks.iter().find(|c| c["name"] == name.as_str());
        let evidence = check.unwrap_or_else(|| panic!("no {name}: {eval}"))["evidence"]
            .as_str()
            .unwrap();
        // The trial finished at the run's size: the tool's report (the stand-in's, in both logs)
        // was read, and the small size's refusal is named.
        assert!(
            evidence.contains("nothing of its own to check")
                && evidence.contains("2 report(s) in library kernels")
                && evidence.contains(
                    "the trial ran at the run's size, having raised at the small size \
                     (forward: RuntimeError: rows8: the row count must be a multiple of 8)"
                ),
            "{evidence}"
        );
        let logs = eval["logs"].as_array().unwrap();
        for log in [
            format!("sanitizer-{tool}.log"),
            format!("sanitizer-{tool}-sized.log"),
        ] {
            assert!(
                logs.iter().any(|l| l.as_str().unwrap().ends_with(&log)),
                "no {log}: {logs:?}"
            );
        }
    }
}
