//! End to end on the CPU: Sakana-format rows written here (a C++ extension exposing `forward`,
//! called through the functional Model) are imported, evaluated with `--published`, and each
//! lands in its class: published far above kbench's interval (slower), far below
//! (reproduced), a wrong functional form (wrong, with the verdict as cause), all under the
//! system `sakana`; --resume keeps the published table. Needs the project venv
//! (tests/setup-python.sh) or KBENCH_PYTHON.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::json;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    std::env::var("KBENCH_PYTHON")
        .unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string())
}

fn kbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kbench"))
        .args(args)
        // Builds persist across test runs in the target folder; CI starts empty.
        .env("KBENCH_CACHE", root().join("target/kbench-test-cache"))
        .output()
        .expect("run kbench")
}

const MODULE: &str = r#"import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16
dim = 256


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"#;

/// The functional form, with `scale` applied to the kernel's result (1.0 is the task).
fn functional(scale: &str) -> String {
    format!(
        r#"import torch
import torch.nn as nn


def module_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, fn=module_fn) -> torch.Tensor:
        return fn(x) * {scale}


batch_size = 16
dim = 256


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"#
    )
}

const CPP: &str = r#"#include <torch/extension.h>

torch::Tensor forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32,
                "forward: expected a float32 CPU tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) {
        out[i] = in[i] > 0.0f ? in[i] : 0.0f;
    }
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("forward", &forward, "ReLU on the CPU");
}
"#;

fn row(kernel: &str, scale: &str, correct: bool, speedup: f64) -> serde_json::Value {
    json!({"Level_ID": 1, "Task_ID": 19, "Kernel_Name": kernel, "CUDA_Code": CPP,
           "PyTorch_Code_Module": MODULE, "PyTorch_Code_Functional": functional(scale),
           "Correct": correct, "CUDA_Speedup_Native": speedup, "CUDA_Speedup_Compile": 1.0})
}

fn eval(subs: &Path, tasks: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "eval",
        subs.to_str().unwrap(),
        "--tasks",
        tasks.to_str().unwrap(),
        "--device",
        "cpu",
        "--trials",
        "2",
        "--max-samples",
        "8",
        "--timeout-call",
        "15",
        "--out",
        out.to_str().unwrap(),
    ];
    let py = python();
    args.extend(["--python", &py]);
    args.extend(extra);
    kbench(&args)
}

#[test]
fn imported_sakana_rows_are_evaluated_and_compared_with_what_was_published() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("sakana.jsonl");
    // Two identical kernels (one build), one published far above any CPU speedup, one far below;
    // a wrong functional form; a row without code.
    let rows = [
        row("relu_cpu", "1.0", true, 1.0e6),
        row("relu_cpu", "1.0", true, 1.0e-6),
        row("relu_doubled", "2.0", true, 3.0),
        json!({"Level_ID": 1, "Task_ID": 19, "Kernel_Name": "none", "CUDA_Code": null,
               "PyTorch_Code_Module": MODULE, "Correct": false}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&src, text).unwrap();
    let imported = tmp.path().join("imported");
    let run = kbench(&[
        "import",
        "sakana",
        src.to_str().unwrap(),
        imported.to_str().unwrap(),
    ]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // The imported tree has no scale.toml: its tasks run at their own (small) sizes.
    assert!(!imported.join("tasks/level1/scale.toml").exists());

    let out = tmp.path().join("run");
    let published = imported.join("published.csv");
    let subs = imported.join("submissions");
    let tasks = imported.join("tasks");
    let run = eval(
        &subs,
        &tasks,
        &out,
        &["--published", published.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(1),
        "the wrong kernel fails the gate\n{stdout}\n{stderr}"
    );

    let csv: Vec<csv::StringRecord> = csv::Reader::from_path(out.join("results.csv"))
        .unwrap()
        .records()
        .map(Result::unwrap)
        .collect();
    let headers = csv::Reader::from_path(out.join("results.csv"))
        .unwrap()
        .headers()
        .unwrap()
        .clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let got: Vec<(String, String, String)> = csv
        .iter()
        .map(|r| {
            (
                r[col("submission")].to_string(),
                r[col("verdict")].to_string(),
                r[col("published_class")].to_string(),
            )
        })
        .collect();
    let want = [
        ("level1/19_ReLU/relu_cpu.py", "pass", "slower"),
        ("level1/19_ReLU/relu_cpu_2.py", "pass", "reproduced"),
        ("level1/19_ReLU/relu_doubled.py", "incorrect", "wrong"),
    ]
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
    assert_eq!(got, want, "{stdout}\n{stderr}");
    assert_eq!(&csv[0][col("published_speedup")], "1000000.0");
    assert_eq!(&csv[0][col("published_correct")], "true");
    assert_eq!(&csv[0][col("published_system")], "sakana");

    let summary = |out: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
    };
    let p = summary(&out)["published"].clone();
    assert_eq!(
        (p["rows"].as_u64(), p["without_code"].as_u64()),
        (Some(4), Some(1))
    );
    assert_eq!(p["compared"], 3, "{p}");
    let sakana = &p["systems"]["sakana"];
    assert_eq!(
        (&sakana["slower"], &sakana["reproduced"], &sakana["wrong"]),
        (&json!(1), &json!(1), &json!(1)),
        "{p}"
    );
    let cause = p["causes"][0]["cause"].as_str().unwrap();
    assert!(cause.starts_with("incorrect: "), "{cause}");
    assert!(
        stdout.contains("sakana (3 compared): reproduced 1, slower 1, wrong 1")
            && stdout.contains("wrong or not judged, main causes:"),
        "{stdout}"
    );

    // --resume without --published keeps the table from the record.
    let again = eval(&subs, &tasks, &out, &["--resume"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("0 submission(s) to evaluate"));
    assert_eq!(summary(&out)["published"]["systems"], p["systems"]);
}

/// `kbench import cuda-l2` on the synthetic tree: its tasks' Models compute the GEMM on the CPU
/// in the layout each kernel reads, and its ModelNew files, their build replaced by a stand-in
/// kernel that reads only that layout, marshal the operands (padding included) to the same
/// product and refuse other shapes (`tests/fixtures/cuda-l2/check_import.py`).
#[test]
fn imported_cuda_l2_tasks_run_and_their_submissions_marshal_the_kernel_operands() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = root().join("tests/fixtures/cuda-l2");
    let out = dir.path().join("out");
    let o = kbench(&[
        "import",
        "cuda-l2",
        fixture.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(python())
        .arg(fixture.join("check_import.py"))
        .arg(&out)
        .output()
        .expect("run python");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{said}");
    assert_eq!(
        said.lines().filter(|l| l.starts_with("ok ")).count(),
        2,
        "{said}"
    );
}
