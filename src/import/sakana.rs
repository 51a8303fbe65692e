//! Sakana AI CUDA Engineer archive rows (JSON Lines or a JSON array; Parquet converts with one
//! pandas line, see `json_rows`): `Level_ID`, `Task_ID`, `Kernel_Name`, `CUDA_Code`,
//! `PyTorch_Code_Module` (the reference), `PyTorch_Code_Functional`, `Correct`,
//! `CUDA_Speedup_Native` (over eager PyTorch), `CUDA_Speedup_Compile` (over torch.compile).
//!
//! `CUDA_Code` is a raw C++/CUDA torch extension whose `forward` takes the arguments of the
//! functional form (`module_fn(x, params...)`), not a `ModelNew`. Each row becomes a submission
//! that holds the functional code as published, builds `CUDA_Code` with `load_inline` at import
//! (as CUDA when it has kernels or CUDA headers, else as C++), and defines `ModelNew` as the
//! functional `Model` calling the extension's `forward` in place of `module_fn`.

use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{boolean, code, file_name, json_rows, number, task_id, Import};
use crate::error::Result;
use crate::published::PublishedRow;
use crate::task::TaskId;

const EAGER: &str = "CUDA_Speedup_Native";
const COMPILE: &str = "CUDA_Speedup_Compile";

pub fn read(src: &Path) -> Result<Import> {
    let mut import = Import::default();
    for (at, row) in json_rows(src)? {
        let Ok(row) = row.map_err(|why| import.skip(&at, why)) else {
            continue;
        };
        if let Err(why) = add(&mut import, &row, &at) {
            import.skip(&at, why);
        }
    }
    Ok(import)
}

fn add(import: &mut Import, row: &Value, at: &str) -> Result<(), String> {
    let id = task_id(row, "Level_ID", "Task_ID")?;
    let kernel = row["Kernel_Name"].as_str().unwrap_or("kernel");
    let reference =
        code(row, "PyTorch_Code_Module").ok_or("no PyTorch_Code_Module (the reference)")?;
    let submission = match code(row, "CUDA_Code") {
        None => None,
        Some(cuda) => {
            let functional = code(row, "PyTorch_Code_Functional")
                .ok_or("CUDA_Code but no PyTorch_Code_Functional to call it through")?;
            if !functional.contains("module_fn") || !functional.contains("class Model") {
                return Err(
                    "PyTorch_Code_Functional defines no module_fn and Model to call CUDA_Code through"
                        .into(),
                );
            }
            Some(wrap(id, kernel, &functional, &cuda))
        }
    };
    let name = import.task_name(id, row["Op_Name"].as_str().unwrap_or(kernel));
    import.add_task(id, &name, &reference, at)?;
    let submission = submission
        .map(|s| import.add_submission(id, &name, Some(kernel), s))
        .unwrap_or_default();
    import.rows.push(PublishedRow {
        level: id.level,
        problem_id: id.number,
        submission,
        correct: boolean(row, "Correct"),
        speedup: number(row, EAGER),
        speedup_column: EAGER.into(),
        speedup_vs_compile: number(row, COMPILE),
        speedup_vs_compile_column: COMPILE.into(),
        other_speedups: String::new(),
        system: "sakana".into(),
    });
    Ok(())
}

/// Whether the extension source needs nvcc: kernels, launches or CUDA library headers.
fn is_cuda(source: &str) -> bool {
    source.contains("__global__")
        || source.contains("<<<")
        || source.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("#include")
                && ["cuda", "cublas", "cudnn", "cub/"]
                    .iter()
                    .any(|m| l.to_ascii_lowercase().contains(m))
        })
}

/// `text` as a Python string literal: raw and triple-quoted where it can be (readable), else
/// JSON's escaped form (also valid Python).
fn python_str(text: &str) -> String {
    if !text.contains("'''") && !text.ends_with('\\') {
        format!("r'''{text}'''")
    } else {
        serde_json::to_string(text).expect("a string serializes")
    }
}

/// The submission of one row: the functional code, the extension, `ModelNew`.
fn wrap(id: TaskId, kernel: &str, functional: &str, cuda: &str) -> String {
    let hash = format!("{:x}", Sha256::digest(cuda.as_bytes()));
    let sources = if is_cuda(cuda) {
        "cpp_sources=[\"\"],\n    cuda_sources=[_kbench_source],"
    } else {
        "cpp_sources=[_kbench_source],"
    };
    format!(
        r#""""Imported by kbench from a Sakana AI CUDA Engineer row: level {level}, task {number},
kernel {kernel}. The row's CUDA_Code (a torch extension whose `forward` takes the functional
form's arguments) is built at import and called through the row's functional Model, published
as PyTorch_Code_Functional and kept verbatim below, in place of module_fn."""

# PyTorch_Code_Functional, as published.
{functional}


# CUDA_Code, as published, built as a torch extension.
from torch.utils.cpp_extension import load_inline as _kbench_load_inline

_kbench_source = {source}

_kbench_ext = _kbench_load_inline(
    name="sakana_{short}",
    {sources}
    verbose=False,
)


class ModelNew(Model):
    def forward(self, *args):
        return super().forward(*args, fn=_kbench_ext.forward)
"#,
        level = id.level,
        number = id.number,
        kernel = file_name(kernel),
        functional = functional.trim_end(),
        source = python_str(cuda),
        short = &hash[..16],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_become_wrapped_submissions_and_published_rows() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("sakana.jsonl");
        let functional = "def module_fn(x):\n    return x\n\nclass Model:\n    pass\n";
        let rows = [
            json!({"Level_ID": 1, "Task_ID": 19, "Kernel_Name": "relu base", "Op_Name": "19_ReLU",
                   "CUDA_Code": "__global__ void k() {}", "PyTorch_Code_Module": "REF",
                   "PyTorch_Code_Functional": functional, "Correct": true,
                   "CUDA_Speedup_Native": 1.2, "CUDA_Speedup_Compile": 0.8}),
            json!({"Level_ID": 1, "Task_ID": 19, "Kernel_Name": "relu base",
                   "CUDA_Code": "int f() { return 0; }\n", "PyTorch_Code_Module": "REF",
                   "PyTorch_Code_Functional": functional, "Correct": "False",
                   "CUDA_Speedup_Native": null}),
            json!({"Level_ID": 5, "Task_ID": 2, "Kernel_Name": "k", "Op_Name": "Fancy op",
                   "CUDA_Code": "", "PyTorch_Code_Module": "REF52", "Correct": false}),
            json!({"Level_ID": 1, "Task_ID": 19, "Kernel_Name": "k",
                   "CUDA_Code": "x", "PyTorch_Code_Module": "OTHER",
                   "PyTorch_Code_Functional": functional}),
            json!({"Level_ID": 1, "Task_ID": 20, "Kernel_Name": "k",
                   "CUDA_Code": "x", "PyTorch_Code_Module": "REF"}),
            json!({"Level_ID": 1.0, "Task_ID": "x"}),
        ];
        let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&src, text).unwrap();
        let import = read(&src).unwrap();
        let subs: Vec<&str> = import.submissions.keys().map(String::as_str).collect();
        assert_eq!(
            subs,
            [
                "level1/19_ReLU/relu_base.py",
                "level1/19_ReLU/relu_base_2.py"
            ]
        );
        let cuda = &import.submissions["level1/19_ReLU/relu_base.py"];
        assert!(cuda.contains("cuda_sources=[_kbench_source]"), "{cuda}");
        assert!(cuda.contains("_kbench_source = r'''__global__ void k() {}'''"));
        assert!(cuda.contains(functional.trim_end()));
        assert!(cuda.contains("class ModelNew(Model):"));
        let cpp = &import.submissions["level1/19_ReLU/relu_base_2.py"];
        assert!(
            cpp.contains("cpp_sources=[_kbench_source],\n    verbose"),
            "{cpp}"
        );
        assert_eq!(import.rows.len(), 3);
        assert_eq!(
            (import.rows[0].correct, import.rows[0].speedup),
            (Some(true), Some(1.2))
        );
        assert_eq!(import.rows[0].speedup_vs_compile, Some(0.8));
        assert_eq!(
            (import.rows[1].correct, import.rows[1].speedup),
            (Some(false), None)
        );
        // No code: the published row stays, its task is named from the row
        assert_eq!(import.rows[2].submission, "");
        assert!(import.report(&src, "sakana", dir.path()).contains("5/2"));
        let skipped: Vec<String> = import.skipped.iter().map(|s| s.why.clone()).collect();
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        assert!(skipped[0].contains("differs from the one line 1 gave"));
        assert!(skipped[1].contains("no PyTorch_Code_Functional"));
        assert!(skipped[2].contains("Task_ID is not a whole number"));
        let out = dir.path().join("out");
        import.write(&out).unwrap();
        assert!(out.join("tasks/level5/2_Fancy_op.py").is_file());
        assert!(out.join("tasks/level1/19_ReLU.py").is_file());
        assert!(import
            .write(&out)
            .unwrap_err()
            .to_string()
            .contains("not empty"));
    }

    #[test]
    fn sources_that_a_raw_string_cannot_hold_are_escaped() {
        assert_eq!(python_str("a\\nb"), "r'''a\\nb'''");
        assert_eq!(python_str("x = '''y'''"), r#""x = '''y'''""#);
        assert!(is_cuda("#include <cuda_runtime.h>\nint x;"));
        assert!(is_cuda("k<<<1, 1>>>();"));
        assert!(!is_cuda("#include <torch/extension.h>\nint x;"));
    }
}
