//! `kbench import` through the real binary, on small synthetic inputs in each published format
//! (no Python needed): what it writes, what it skips and why, and its exit codes; and sources
//! that hold symbolic links and FIFOs, which it must neither follow nor block on.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

fn kbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kbench"))
        .args(args)
        .env("KBENCH_CACHE", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("run kbench")
}

fn import(format: &str, src: &Path, out: &Path) -> Output {
    kbench(&[
        "import",
        format,
        src.to_str().unwrap(),
        out.to_str().unwrap(),
    ])
}

/// `kbench import` run with a guard against a hang (a read that blocks on a FIFO): killed, and
/// the test failed, if it has not ended in a generous two minutes.
fn import_guarded(format: &str, src: &Path, out: &Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kbench"))
        .args(["import", format])
        .args([src, out])
        .env("KBENCH_CACHE", env!("CARGO_TARGET_TMPDIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kbench");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("kbench import {format} {} hung", src.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Every file below `dir`, by its path below it, with its contents.
fn files_below(dir: &Path) -> Vec<(String, String)> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            (rel, std::fs::read_to_string(e.path()).unwrap())
        })
        .collect()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json_lines(path: &Path, rows: &[serde_json::Value]) {
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(path, text).unwrap();
}

fn csv_rows(path: &Path) -> Vec<Vec<String>> {
    csv::Reader::from_path(path)
        .unwrap()
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect()
}

#[test]
fn cuda_l1_rows_become_a_tree_submissions_and_published_csv() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("l40.json");
    json_lines(
        &src,
        &[
            json!({"level_id": 1, "task_id": 19, "ref_code": "# ref 19\n",
                   "custom_code": "# kernel 19\n", "score_default": 1.25,
                   "score_torch_compile_default": 0.5, "score_cudnn": 1.1}),
            json!({"level_id": 2, "task_id": 2, "ref_code": "# ref 2/2\n",
                   "custom_code": "None", "score_default": 3.0}),
            json!({"level_id": 1, "task_id": 19, "ref_code": "# ref 19\n"}),
        ],
    );
    let out = dir.path().join("out");
    let run = import("cuda-l1", &src, &out);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let said = text(&run);
    assert!(said.contains("imported 2 row(s)"), "{said}");
    assert!(said.contains("1 row(s) published no code"), "{said}");
    assert!(
        said.contains("line 3: a second row for task 1/19 (the first is line 1)"),
        "{said}"
    );
    assert!(said.contains("kbench eval"), "{said}");
    // Judged by KernelBench before its tolerance was rescaled.
    assert!(said.contains(" --kernelbench-tolerance 1e-2\n"), "{said}");
    let read = |p: &str| std::fs::read_to_string(out.join(p)).unwrap();
    assert_eq!(read("tasks/level1/19_ReLU.py"), "# ref 19\n");
    assert_eq!(
        read("tasks/level2/2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py"),
        "# ref 2/2\n"
    );
    assert_eq!(read("submissions/level1/19_ReLU.py"), "# kernel 19\n");
    let rows = csv_rows(&out.join("published.csv"));
    assert_eq!(
        rows[0],
        [
            "1",
            "19",
            "level1/19_ReLU.py",
            "",
            "1.25",
            "score_default",
            "0.5",
            "score_torch_compile_default",
            "score_cudnn=1.1",
            "cuda-l1"
        ]
    );
    assert_eq!(rows[1][2], "");
    assert_eq!(rows[1][4], "3.0");

    // The same folder again: refused, nothing mixed in.
    let again = import("cuda-l1", &src, &out);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again).contains("it is not empty"), "{}", text(&again));
    // A file of another format: nothing to import is kbench failing, with each row's why.
    let other = dir.path().join("other.jsonl");
    json_lines(&other, &[json!({"Level_ID": 1, "Task_ID": 19})]);
    let wrong = import("cuda-l1", &other, &dir.path().join("none"));
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        text(&wrong).contains("line 1: no level_id"),
        "{}",
        text(&wrong)
    );
    assert!(text(&wrong).contains("no row could be imported"));
    assert!(!dir.path().join("none").exists());
}

#[test]
fn kernelbench_runs_import_with_their_eval_results() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("runs/my_run");
    std::fs::create_dir_all(&run_dir).unwrap();
    for (name, code) in [
        ("level_1_problem_19_sample_0_kernel.py", "# s0"),
        ("level_1_problem_19_sample_1_kernel.py", "# s1"),
    ] {
        std::fs::write(run_dir.join(name), code).unwrap();
    }
    std::fs::write(
        run_dir.join("eval_results.json"),
        json!({"19": [
            {"sample_id": 0, "compiled": true, "correctness": true, "runtime": 0.25,
             "runtime_stats": {}, "ref_runtime": 1.0, "metadata": {}},
            {"sample_id": 1, "compiled": true, "correctness": false, "runtime": -1.0,
             "metadata": {"correctness_issue": "Output mismatch"}}]})
        .to_string(),
    )
    .unwrap();
    let out = dir.path().join("out");
    let run = import("kernelbench-run", &dir.path().join("runs"), &out);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert!(text(&run).contains("holds no references"), "{}", text(&run));
    assert!(!out.join("tasks").exists());
    assert_eq!(
        std::fs::read_to_string(out.join("submissions/level1/19_ReLU/sample_1.py")).unwrap(),
        "# s1"
    );
    let rows = csv_rows(&out.join("published.csv"));
    let got: Vec<[&str; 4]> = rows
        .iter()
        .map(|r| [r[2].as_str(), r[3].as_str(), r[4].as_str(), r[5].as_str()])
        .collect();
    assert_eq!(
        got,
        [
            [
                "level1/19_ReLU/sample_0.py",
                "true",
                "4.0",
                "ref_runtime/runtime"
            ],
            [
                "level1/19_ReLU/sample_1.py",
                "false",
                "",
                "ref_runtime/runtime"
            ],
        ]
    );
    let missing = import("kernelbench-run", &dir.path().join("nothing"), &out);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn sakana_rows_become_model_new_wrappers_and_parquet_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("sakana.jsonl");
    json_lines(
        &src,
        &[
            json!({"Level_ID": 1, "Task_ID": 19, "Kernel_Name": "relu_vec4",
                   "CUDA_Code": "#include <torch/extension.h>\n__global__ void k() {}\n",
                   "PyTorch_Code_Module": "# ref\n",
                   "PyTorch_Code_Functional": "def module_fn(x):\n    return x\n\nclass Model:\n    pass\n",
                   "Correct": true, "CUDA_Speedup_Native": 1.5, "CUDA_Speedup_Compile": 1.1}),
            json!({"Level_ID": 1, "Task_ID": 19, "Kernel_Name": "broken",
                   "CUDA_Code": "x", "PyTorch_Code_Module": "# ref\n",
                   "Correct": false}),
        ],
    );
    let out = dir.path().join("out");
    let run = import("sakana", &src, &out);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert!(
        text(&run).contains("line 2: CUDA_Code but no PyTorch_Code_Functional"),
        "{}",
        text(&run)
    );
    let sub = std::fs::read_to_string(out.join("submissions/level1/19_ReLU/relu_vec4.py")).unwrap();
    assert!(sub.contains("class ModelNew(Model):"), "{sub}");
    assert!(sub.contains("cuda_sources=[_kbench_source]"), "{sub}");
    let rows = csv_rows(&out.join("published.csv"));
    assert_eq!(rows.len(), 1);
    assert_eq!(
        [&rows[0][3], &rows[0][4], &rows[0][5], &rows[0][6]],
        ["true", "1.5", "CUDA_Speedup_Native", "1.1"]
    );

    let parquet = dir.path().join("archive.parquet");
    std::fs::write(&parquet, b"PAR1\x15\x04").unwrap();
    let refused = import("sakana", &parquet, &dir.path().join("p"));
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused).contains("read_parquet"),
        "{}",
        text(&refused)
    );
}

#[test]
fn a_malformed_published_file_stops_eval_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("published.csv");
    std::fs::write(&file, "level,problem_id\none,1\n").unwrap();
    let subs = dir.path().join("subs/level1");
    std::fs::create_dir_all(&subs).unwrap();
    std::fs::write(subs.join("19_ReLU.py"), "").unwrap();
    let run = kbench(&[
        "eval",
        dir.path().join("subs").to_str().unwrap(),
        "--published",
        file.to_str().unwrap(),
        "--python",
        "/no/such/python",
    ]);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        text(&run).contains("kbench: failed to read published results from"),
        "{}",
        text(&run)
    );
}

fn cuda_l2_fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda-l2")
}

#[test]
fn cuda_l2_kernels_become_tasks_submissions_and_both_published_tables() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = import("cuda-l2", &cuda_l2_fixture(), &out);
    assert!(o.status.success(), "{}", text(&o));
    let said = text(&o);
    assert!(said.contains("--precision fp16"), "{said}");
    assert!(said.contains("published-server.csv"), "{said}");
    // Ids are rows of the offline table: 64_64_128 (row 2) has no kernel, so 128_64_64 is 3.
    for (path, needle) in [
        (
            "tasks/level1/1_HGEMM_64_64_64.py",
            "torch.matmul(A, B_t.t())",
        ),
        ("tasks/level1/3_HGEMM_128_64_64.py", "torch.matmul(A, B)"),
        (
            "tasks/level1/3_HGEMM_128_64_64.py",
            "KBENCH_JUDGE = \"fp32_accumulation\"",
        ),
        // An fp16 accumulator's reading on each trial's inputs, in the task's layout
        // (tests/python/test_fp32_accumulation.py runs the column-major one).
        (
            "tasks/level1/1_HGEMM_64_64_64.py",
            "def kbench_fp16_accumulation(A, B_t, rows=128):\n    \"\"\"",
        ),
        (
            "tasks/level1/1_HGEMM_64_64_64.py",
            "a, b = A[:rows].float(), B_t.t().float()",
        ),
        (
            "tasks/level1/3_HGEMM_128_64_64.py",
            "a, b = A[:rows].float(), B.float()",
        ),
        (
            "submissions/level1/1_HGEMM_64_64_64.py",
            "\"-gencode=arch=compute_90a,code=sm_90a\"",
        ),
        (
            "submissions/level1/1_HGEMM_64_64_64.py",
            "\"--use_fast_math\"",
        ),
        (
            "submissions/level1/1_HGEMM_64_64_64.py",
            "b_col_major.data_ptr()",
        ),
        ("submissions/level1/3_HGEMM_128_64_64.py", "PAD_M = 128"),
    ] {
        let code = std::fs::read_to_string(out.join(path)).unwrap();
        assert!(code.contains(needle), "{path} lacks {needle}");
    }
    let offline = csv_rows(&out.join("published.csv"));
    let server = csv_rows(&out.join("published-server.csv"));
    let cells = |rows: &[Vec<String>]| -> Vec<(String, String, String)> {
        rows.iter()
            .map(|r| (r[1].clone(), r[4].clone(), r[5].clone()))
            .collect()
    };
    assert_eq!(
        cells(&offline),
        [
            ("1".into(), "1.5".into(), "torch.matmul (offline)".into()),
            ("3".into(), "0.9".into(), "torch.matmul (offline)".into())
        ]
    );
    assert_eq!(
        cells(&server),
        [
            ("1".into(), "2.5".into(), "torch.matmul (server)".into()),
            ("3".into(), "1.9".into(), "torch.matmul (server)".into())
        ]
    );
    assert!(
        offline[0][8].contains("cuBLAS-max=1.3;"),
        "{:?}",
        offline[0]
    );
    assert!(
        offline[0][8].contains("cuBLASLt-auto-tuning-max=1"),
        "{:?}",
        offline[0]
    );
    let kernels = csv_rows(&out.join("kernels.csv"));
    let facts: Vec<Vec<&str>> = kernels
        .iter()
        .map(|r| vec![r[2].as_str(), &r[4], &r[5], &r[6], &r[8]])
        .collect();
    assert_eq!(
        facts,
        [
            ["64_64_64", "b_col_major", "0_0_0", "fp32", "false"],
            ["128_64_64", "b", "128_0_0", "fp16", "true"]
        ]
    );
}

#[test]
fn cuda_l2_selections_skip_missing_shapes_and_stay_with_cuda_l2() {
    let dir = tempfile::tempdir().unwrap();
    let src = cuda_l2_fixture();
    let run = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let mut args = vec![
            "import",
            "cuda-l2",
            src.to_str().unwrap(),
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        (kbench(&args), out)
    };
    let (o, out) = run("named", &["--shapes", "128_64_64,256_256_256"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("256_256_256: no kernel for this shape"),
        "{}",
        text(&o)
    );
    assert_eq!(csv_rows(&out.join("published.csv")).len(), 1);
    let (a, first) = run("sample1", &["--sample", "1"]);
    let (b, second) = run("sample2", &["--sample", "1"]);
    assert!(a.status.success() && b.status.success());
    assert_eq!(
        csv_rows(&first.join("published.csv")),
        csv_rows(&second.join("published.csv")),
        "--sample is deterministic"
    );
    let (o, _) = run("bad", &["--shapes", "64x64x64"]);
    assert!(
        !o.status.success() && text(&o).contains("is not M_N_K"),
        "{}",
        text(&o)
    );
    let (o, _) = run("gpu", &["--gpu", "a100"]);
    assert!(!o.status.success() && text(&o).contains("no kernels/a100_F32F16F16F32/"));
    let jsonl = dir.path().join("rows.jsonl");
    json_lines(&jsonl, &[json!({"level_id": 1, "task_id": 19})]);
    let o = kbench(&[
        "import",
        "cuda-l1",
        jsonl.to_str().unwrap(),
        dir.path().join("l1").to_str().unwrap(),
        "--sample",
        "3",
    ]);
    assert!(!o.status.success() && text(&o).contains("are for kbench import cuda-l2"));
}

#[test]
fn a_kernelbench_run_holding_links_and_fifos_is_imported_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let (src, out) = (dir.path().join("run"), dir.path().join("out"));
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "root only").unwrap();
    std::fs::write(
        outside.join("level_1_problem_23_sample_0_kernel.py"),
        "root only",
    )
    .unwrap();
    std::fs::write(src.join("a/level_1_problem_19_sample_0_kernel.py"), "# s0").unwrap();
    // The attacks: a kernel file that links to a file outside, a folder that links outside, and
    // FIFOs where a kernel and an eval_results.json would be (no writer: a blocking read hangs).
    symlink(
        outside.join("secret"),
        src.join("a/level_1_problem_19_sample_1_kernel.py"),
    )
    .unwrap();
    symlink(&outside, src.join("linked")).unwrap();
    mkfifo(&src.join("a/level_1_problem_19_sample_2_kernel.py"));
    mkfifo(&src.join("b/eval_results.json"));
    std::fs::write(src.join("b/level_1_problem_40_sample_0_kernel.py"), "# b").unwrap();

    let run = import_guarded("kernelbench-run", &src, &out);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let stderr = String::from_utf8_lossy(&run.stderr);
    let stdout = String::from_utf8_lossy(&run.stdout);
    for (at, why) in [
        (
            "a/level_1_problem_19_sample_1_kernel.py",
            "a symbolic link (not followed)",
        ),
        (
            "a/level_1_problem_19_sample_2_kernel.py",
            "a FIFO, not a regular file",
        ),
        ("b/eval_results.json", "a FIFO, not a regular file"),
        ("linked", "a symbolic link (not followed)"),
    ] {
        let said = format!("{at}: not read: {why}");
        assert!(stderr.contains(&said), "stderr lacks {said:?}: {stderr}");
        assert!(
            stdout.contains(&said),
            "the report lacks {said:?}: {stdout}"
        );
    }
    // Only the two regular kernels came in; nothing of the outside did.
    assert_eq!(
        files_below(&out.join("submissions")),
        [
            ("level1/19_ReLU/sample_0.py".to_string(), "# s0".to_string()),
            (
                "level1/40_LayerNorm/sample_0.py".to_string(),
                "# b".to_string()
            ),
        ]
    );
    assert!(files_below(&out)
        .iter()
        .all(|(_, text)| !text.contains("root only")));
}

#[test]
fn a_cuda_l2_kernel_that_is_a_link_or_a_fifo_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("cuda-l2");
    for entry in walkdir::WalkDir::new(cuda_l2_fixture()) {
        let entry = entry.unwrap();
        let to = src.join(entry.path().strip_prefix(cuda_l2_fixture()).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
    let kernels = src.join("kernels/h100_F32F16F16F32");
    let secret = dir.path().join("secret.cu");
    std::fs::write(&secret, "// root only").unwrap();
    std::fs::remove_file(kernels.join("64_64_64.cu")).unwrap();
    symlink(&secret, kernels.join("64_64_64.cu")).unwrap();
    mkfifo(&kernels.join("256_256_256.cu"));
    let out = dir.path().join("out");
    let run = import_guarded("cuda-l2", &src, &out);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let stderr = String::from_utf8_lossy(&run.stderr);
    for said in [
        "kernels/h100_F32F16F16F32/64_64_64.cu: not read: a symbolic link (not followed)",
        "kernels/h100_F32F16F16F32/256_256_256.cu: not read: a FIFO, not a regular file",
    ] {
        assert!(stderr.contains(said), "{stderr}");
        assert!(String::from_utf8_lossy(&run.stdout).contains(said));
    }
    let written = files_below(&out.join("submissions"));
    assert_eq!(written.len(), 1, "only 128_64_64: {written:?}");
    assert!(files_below(&out)
        .iter()
        .all(|(_, text)| !text.contains("root only")));
}

#[test]
fn a_corpus_file_that_is_a_link_or_a_fifo_is_refused_not_followed_or_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.jsonl");
    json_lines(
        &secret,
        &[
            json!({"level_id": 1, "task_id": 19, "ref_code": "# root only\n",
                 "custom_code": "# root only\n"}),
        ],
    );
    let link = dir.path().join("l40.jsonl");
    symlink(&secret, &link).unwrap();
    let fifo = dir.path().join("h100.jsonl");
    mkfifo(&fifo);
    for (format, src, why) in [
        ("cuda-l1", &link, "a symbolic link (not followed)"),
        ("sakana", &link, "a symbolic link (not followed)"),
        ("cuda-l1", &fifo, "a FIFO, not a regular file"),
        ("sakana", &fifo, "a FIFO, not a regular file"),
    ] {
        let out = dir.path().join("out");
        let run = import_guarded(format, src, &out);
        assert_eq!(run.status.code(), Some(2), "{format}: {}", text(&run));
        assert!(text(&run).contains(why), "{format}: {}", text(&run));
        assert!(!out.exists(), "{format}: nothing written");
    }
}
