//! The real binary's exit codes and messages for kbench's own failures (no Python needed).

use std::process::{Command, Output};

fn kbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kbench"))
        .args(args)
        .env("KBENCH_CACHE", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("run kbench")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_documents_exit_codes() {
    let out = kbench(&["eval", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Exit codes:") && text.contains("2  kbench itself failed"),
        "{text}"
    );
}

#[test]
fn list_shows_the_bundled_250_tasks() {
    let out = kbench(&["list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 250);
    assert!(text
        .lines()
        .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["1", "19", "19_ReLU"]));
    let level3 = kbench(&["list", "--level", "3"]);
    assert_eq!(String::from_utf8_lossy(&level3.stdout).lines().count(), 50);
}

#[test]
fn a_missing_submission_path_is_kbench_failing() {
    let out = kbench(&["eval", "/no/such/submission"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("kbench: failed to evaluate /no/such/submission: no such file or directory"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_single_file_needs_a_task() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kernel.py");
    std::fs::write(&file, "").unwrap();
    let out = kbench(&["eval", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("needs --task"), "{}", stderr(&out));
}

#[test]
fn a_tree_without_tasks_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = kbench(&["list", "--tasks", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("has no levelN/"), "{}", stderr(&out));
}

#[test]
fn bad_flags_are_usage_errors() {
    assert_eq!(
        kbench(&["eval", ".", "--only", "19"]).status.code(),
        Some(2)
    );
    assert_eq!(
        kbench(&["eval", ".", "--precision", "fp8"]).status.code(),
        Some(2)
    );
    assert_eq!(kbench(&["list", "--level", "4"]).status.code(), Some(2));
    assert_eq!(
        kbench(&["eval", ".", "--kernelbench-tolerance", "tight"])
            .status
            .code(),
        Some(2)
    );
    // Clocks are only ever locked on a GPU declared dedicated.
    let out = kbench(&["eval", ".", "--lock-clocks", "base"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--dedicated"), "{}", stderr(&out));
    // The eager reference is always timed; torch.compile is an extra arm of the offline mode.
    let out = kbench(&["eval", ".", "--baseline", "compile"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("without eager"), "{}", stderr(&out));
    let out = kbench(&[
        "eval",
        ".",
        "--baseline",
        "eager,compile",
        "--mode",
        "server",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("offline mode"), "{}", stderr(&out));
}

#[test]
fn a_python_without_torch_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = kbench(&[
        "eval",
        dir.path().to_str().unwrap(),
        "--python",
        "/no/such/python",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("failed to start the Python worker (/no/such/python)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn check_flags_timer_patching_without_torch() {
    let dir = tempfile::tempdir().unwrap();
    let cheat = dir.path().join("cheat.py");
    std::fs::write(
        &cheat,
        "import torch\nsetattr(torch.cuda.Event, 'elapsed' + '_time', lambda a, b: 0.0)\n",
    )
    .unwrap();
    let honest = dir.path().join("honest.py");
    std::fs::write(&honest, "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n").unwrap();
    // The system python3 has no torch: the static checks need none.
    let out = kbench(&["check", cheat.to_str().unwrap(), "--python", "python3"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cheat.py:2: error python.patch_attribute"),
        "{text}"
    );
    let out = kbench(&["check", honest.to_str().unwrap(), "--python", "python3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        kbench(&["check", "/no/such/file.py"]).status.code(),
        Some(2)
    );
}

/// A real run (a doing-twice submission on an H100) as run folder `name` under `dir`, altered by
/// `edit` first.
fn fixture_run(
    dir: &std::path::Path,
    name: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) -> std::path::PathBuf {
    let text = include_str!("fixtures/runs/h100-twice.results.json");
    let mut record: serde_json::Value = serde_json::from_str(text).unwrap();
    edit(&mut record);
    let run = dir.join(name);
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("results.json"), record.to_string()).unwrap();
    run
}

/// Make the candidate of evaluation `index` `factor` times slower, samples and all.
fn slow_down(record: &mut serde_json::Value, index: usize, factor: f64) {
    let t = &mut record["evaluations"][index]["timing"];
    let scale = |v: &mut serde_json::Value, f: f64| *v = (v.as_f64().unwrap() * f).into();
    for s in t["candidate"]["samples_ms"].as_array_mut().unwrap() {
        scale(s, factor);
    }
    scale(&mut t["candidate"]["median_ms"], factor);
    for k in ["speedup", "speedup_ci_low", "speedup_ci_high"] {
        scale(&mut t[k], 1.0 / factor);
    }
}

#[test]
fn compare_gates_on_regressions() {
    let dir = tempfile::tempdir().unwrap();
    let a = fixture_run(dir.path(), "a", |_| {});
    let b = fixture_run(dir.path(), "b", |r| slow_down(r, 1, 1.5));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let same = kbench(&["compare", a, a, "--fail-on-regression", "0.05"]);
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    let text = String::from_utf8_lossy(&same.stdout);
    assert!(
        text.contains("3 task(s): 0 improved, 0 regressed, 3 same"),
        "{text}"
    );
    let worse = kbench(&["compare", a, b, "--fail-on-regression", "0.05"]);
    assert_eq!(worse.status.code(), Some(1), "{}", stderr(&worse));
    let text = String::from_utf8_lossy(&worse.stdout);
    assert!(
        text.contains("regression: level2/76_Gemm_Add_ReLU: B/A 0.667"),
        "{text}"
    );
    // no gate without the flag; a 40 % threshold lets a 33 % regression through
    assert_eq!(kbench(&["compare", a, b]).status.code(), Some(0));
    let lax = kbench(&["compare", a, b, "--fail-on-regression", "0.4"]);
    assert_eq!(lax.status.code(), Some(0));
    // better is not a regression
    assert_eq!(
        kbench(&["compare", b, a, "--fail-on-regression", "0"])
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn compare_gates_on_a_kernel_that_broke() {
    let dir = tempfile::tempdir().unwrap();
    let a = fixture_run(dir.path(), "a", |_| {});
    let b = fixture_run(dir.path(), "b", |r| {
        r["evaluations"][2]["verdict"] = "incorrect".into();
        r["evaluations"][2]["timing"] = serde_json::Value::Null;
    });
    let out = kbench(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--fail-on-regression",
        "0.5",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("regression: level3/10_ResNet101: no_kernel in A, incorrect in B"),
        "{text}"
    );
}

#[test]
fn bad_run_folders_are_kbench_failing() {
    let dir = tempfile::tempdir().unwrap();
    let a = fixture_run(dir.path(), "a", |_| {});
    let a = a.to_str().unwrap();
    let missing = kbench(&["compare", a, "/no/such/run"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("kbench: failed to read /no/such/run"),
        "{}",
        stderr(&missing)
    );
    let garbage = dir.path().join("garbage");
    std::fs::create_dir(&garbage).unwrap();
    std::fs::write(garbage.join("results.json"), "{not json").unwrap();
    for args in [
        vec!["compare", a, garbage.to_str().unwrap()],
        vec!["report", garbage.to_str().unwrap()],
        vec!["leaderboard", a, garbage.to_str().unwrap()],
    ] {
        let out = kbench(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&out).contains("failed to read results.json"),
            "{}",
            stderr(&out)
        );
    }
    let newer = fixture_run(dir.path(), "newer", |r| r["schema_version"] = 99.into());
    let out = kbench(&["report", newer.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("it has schema 99"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn report_writes_one_page_beside_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = fixture_run(dir.path(), "run", |_| {});
    let out = kbench(&["report", run.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert_eq!(page.matches("<figure class=\"plot\"").count(), 5);
    assert_eq!(page.matches("<tr class=\"evaluation\"").count(), 3);
    // beside the run, log links are relative to it
    assert!(page.contains("href=\"logs/level3_10_ResNet101-f7e98586.candidate.log\""));
    // two runs into one page elsewhere: links by the run folders' paths
    let other = fixture_run(dir.path(), "other", |_| {});
    let page_path = dir.path().join("both.html");
    let out = kbench(&[
        "report",
        run.to_str().unwrap(),
        other.to_str().unwrap(),
        "--out",
        page_path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = std::fs::read_to_string(&page_path).unwrap();
    assert_eq!(page.matches("<section class=\"run\"").count(), 2);
    assert!(page.contains(&format!("href=\"{}/logs/", other.display())));
}

/// A page named without a folder (`--out page.html`, or the default `report.html` of several
/// runs) goes to the working folder.
#[test]
fn report_writes_a_page_named_without_a_folder_to_the_working_folder() {
    let dir = tempfile::tempdir().unwrap();
    fixture_run(dir.path(), "run", |_| {});
    let other = fixture_run(dir.path(), "other", |_| {});
    for args in [
        vec!["report", "run", "--out", "page.html"],
        vec!["report", "run", "other"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_kbench"))
            .args(&args)
            .current_dir(dir.path())
            .output()
            .expect("run kbench");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    }
    let page = std::fs::read_to_string(dir.path().join("page.html")).unwrap();
    assert_eq!(page.matches("<section class=\"run\"").count(), 1);
    let both = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert_eq!(both.matches("<section class=\"run\"").count(), 2);
    assert!(both.contains(&format!("href=\"{}/logs/", other.display())));
}

#[test]
fn leaderboard_ranks_submitters() {
    let dir = tempfile::tempdir().unwrap();
    let pass_all = |r: &mut serde_json::Value| {
        for e in r["evaluations"].as_array_mut().unwrap() {
            e["verdict"] = "pass".into();
        }
    };
    let slow = fixture_run(dir.path(), "slow", pass_all);
    let fast = fixture_run(dir.path(), "fast", |r| {
        pass_all(r);
        for i in 0..3 {
            slow_down(r, i, 0.25);
        }
    });
    let board = dir.path().join("board.csv");
    let out = kbench(&[
        "leaderboard",
        slow.to_str().unwrap(),
        fast.to_str().unwrap(),
        "--out",
        board.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&board).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert_eq!(&rows[0][..3], ["board_schema", "rank", "submitter"]);
    assert_eq!(&rows[1][..3], ["1", "1", "fast"]);
    assert_eq!(&rows[2][..3], ["1", "2", "slow"]);
    // runs on other settings are refused
    let fp16 = fixture_run(dir.path(), "fp16", |r| {
        r["config"]["precision"] = "fp16".into()
    });
    let out = kbench(&[
        "leaderboard",
        slow.to_str().unwrap(),
        fp16.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("precision fp16 vs fp32"),
        "{}",
        stderr(&out)
    );
}

/// The fixture run (three `no_kernel` rows timed at 0.5x) as the one shard of a seeded run,
/// altered by `edit` first.
fn one_shard(
    dir: &std::path::Path,
    name: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) -> std::path::PathBuf {
    fixture_run(dir, name, |r| {
        r["config"]["seed"] = 42.into();
        edit(r);
        let n = r["evaluations"].as_array().unwrap().len();
        r["shard"] = serde_json::json!({"index": 0, "count": 1, "total": n, "selected": n});
    })
}

/// `kbench merge` of the one shard `run` with `extra` flags: the exit code and stdout.
fn merge(run: &std::path::Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = run.with_extension("merged");
    let mut args = vec![
        "merge",
        run.to_str().unwrap(),
        "--unauthenticated",
        "--replace",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    let o = kbench(&args);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn the_gate_fails_a_run_that_evaluated_nothing_or_left_files_unmatched_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let empty = one_shard(dir.path(), "empty", |r| {
        r["evaluations"] = serde_json::json!([])
    });
    let (code, text) = merge(&empty, &[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("gate: failed\n  nothing was evaluated: no submission of a selected task"),
        "{text}"
    );
    assert_eq!(merge(&empty, &["--allow-empty"]).0, Some(0));
    let unmatched =
        one_shard(
            dir.path(),
            "unmatched",
            |r| {
                r["unmatched"] =
                    serde_json::json!([{"file": "notes.py", "why": "not in a levelN/ folder"}])
            },
        );
    let (code, text) = merge(&unmatched, &[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("1 file(s) matched no task (listed above); pass --allow-unmatched"),
        "{text}"
    );
    assert_eq!(merge(&unmatched, &["--allow-unmatched"]).0, Some(0));
}

#[test]
fn no_kernel_passes_the_gate_unless_a_kernel_is_required_or_a_floor_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let run = one_shard(dir.path(), "run", |_| {});
    for (extra, code, said) in [
        (vec![], Some(0), "gate: passed"),
        (vec!["--min-speedup", "0.4"], Some(0), "gate: passed"),
        (
            vec!["--min-speedup", "1"],
            Some(1),
            "level1/1_Square_matrix_multiplication_ level1/1_Square_matrix_multiplication_.py: speedup 0.501 below --min-speedup 1",
        ),
        (vec!["--require-kernel"], Some(1), ": no_kernel under --require-kernel: "),
    ] {
        let (got, text) = merge(&run, &extra);
        assert_eq!(got, code, "{extra:?}: {text}");
        assert!(text.contains(said), "{extra:?}: {text}");
    }
}

#[test]
fn a_scale_no_task_has_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = kbench(&[
        "eval",
        dir.path().to_str().unwrap(),
        "--scale",
        "tiny",
        "--python",
        "/no/such/python",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "kbench: failed to use --scale tiny: no task has that scale; the tasks have full, small"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn serve_s_help_lists_only_what_serve_accepts() {
    let out = kbench(&["serve", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for refused in [
        "--task ",
        "--published",
        "--shard",
        "--lock-clocks",
        "--min-speedup",
        "--require-kernel",
        "--allow-empty",
        "--allow-unmatched",
        "[PATH]",
    ] {
        assert!(!text.contains(refused), "{refused}: {text}");
    }
    assert!(
        text.contains("--scale") && text.contains("--listen"),
        "{text}"
    );
    // still refused when given
    let out = kbench(&["serve", "--min-speedup", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("failed to serve with --min-speedup: it is eval's"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn doctor_fails_when_what_the_device_needs_is_missing() {
    let out = kbench(&["doctor", "--python", "/no/such/python", "--device", "cpu"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.ends_with("kbench doctor: not ready for --device cpu: python + torch missing\n"),
        "{text}"
    );
}

#[test]
fn usage_errors_read_after_failed_to() {
    let dir = tempfile::tempdir().unwrap();
    let a = fixture_run(dir.path(), "a", |_| {});
    let a = a.to_str().unwrap();
    let out = kbench(&["compare", a, a, "--band", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("kbench: failed to compare with --band 2: it is outside [0, 1)"),
        "{}",
        stderr(&out)
    );
}
