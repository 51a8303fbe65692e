//! CUDA-L1's release format (one JSON Lines file per GPU: H100, A100, L40, RTX 3090, H20): a row
//! per task with `level_id`, `task_id`, `ref_code` (the reference it was timed against),
//! `custom_code` (a `ModelNew` file; null, empty or `"None"` where none was published) and the
//! published speedups `score_*`: `score_default` over eager PyTorch, `score_torch_compile_default`
//! over torch.compile, any other `score_*` column kept as it is. The rows' other code columns
//! (`cuda_graph_code`, `cudnn_code`: the references of those scores) are not imported.

use std::path::Path;

use serde_json::Value;

use super::{code, json_rows, number, task_id, Import};
use crate::error::Result;
use crate::published::PublishedRow;
use crate::task::TaskId;

const EAGER: &str = "score_default";
const COMPILE: &str = "score_torch_compile_default";
/// The corpus predates KernelBench's rescaled tolerance: its kernels were judged at v0's 1e-2.
const KERNELBENCH_TOLERANCE: [&str; 2] = ["--kernelbench-tolerance", "1e-2"];

pub fn read(src: &Path) -> Result<Import> {
    let mut import = Import {
        eval_flags: KERNELBENCH_TOLERANCE.into(),
        ..Import::default()
    };
    let mut seen = std::collections::HashMap::new();
    for (at, row) in json_rows(src)? {
        let Ok(row) = row.map_err(|why| import.skip(&at, why)) else {
            continue;
        };
        let id = match task_id(&row, "level_id", "task_id") {
            Ok(id) => id,
            Err(why) => {
                import.skip(&at, why);
                continue;
            }
        };
        if let Some(first) = seen.insert(id, at.clone()) {
            import.skip(
                &at,
                format!("a second row for task {id} (the first is {first})"),
            );
            continue;
        }
        if let Err(why) = add(&mut import, id, &row, &at) {
            import.skip(&at, why);
        }
    }
    Ok(import)
}

fn add(import: &mut Import, id: TaskId, row: &Value, at: &str) -> Result<(), String> {
    let reference = code(row, "ref_code").ok_or("no ref_code (the reference)")?;
    let name = import.task_name(id, "task");
    import.add_task(id, &name, &reference, at)?;
    let submission = code(row, "custom_code")
        .map(|c| import.add_submission(id, &name, None, c))
        .unwrap_or_default();
    let mut others: Vec<String> = row
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("score_") && *k != EAGER && *k != COMPILE)
        .filter_map(|(k, _)| Some(format!("{k}={}", number(row, k)?)))
        .collect();
    others.sort();
    import.rows.push(PublishedRow {
        level: id.level,
        problem_id: id.number,
        submission,
        correct: None,
        speedup: number(row, EAGER),
        speedup_column: EAGER.into(),
        speedup_vs_compile: number(row, COMPILE),
        speedup_vs_compile_column: COMPILE.into(),
        other_speedups: others.join(";"),
        system: "cuda-l1".into(),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_rows_with_and_without_code_and_skips_bad_ones() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("a100.json");
        let rows = [
            json!({"level_id": 1, "task_id": 19, "ref_code": "REF19", "custom_code": "NEW19",
                   "score_default": 1.5, "score_torch_compile_default": 0.9,
                   "score_cuda_graph": 1.2, "score_cudnn": null}),
            json!({"level_id": 2, "task_id": 2, "ref_code": "REF", "custom_code": "None",
                   "score_default": 2.0}),
            json!({"level_id": 1, "task_id": 3, "ref_code": "REF3", "custom_code": null,
                   "score_default": null}),
            json!({"level_id": 4, "task_id": 7, "ref_code": "REF47", "custom_code": "NEW47"}),
            json!({"level_id": 1, "task_id": 19, "ref_code": "REF19", "custom_code": "X"}),
            json!({"level_id": 1, "task_id": 5, "custom_code": "X"}),
            json!({"task_id": 6}),
        ];
        let mut text: String = rows.iter().map(|r| format!("{r}\n")).collect();
        text.push_str("{broken\n");
        std::fs::write(&src, text).unwrap();
        let import = read(&src).unwrap();
        let subs: Vec<&str> = import.submissions.keys().map(String::as_str).collect();
        assert_eq!(subs, ["level1/19_ReLU.py", "level4/7_task.py"]);
        assert_eq!(import.submissions["level1/19_ReLU.py"], "NEW19");
        assert_eq!(import.rows.len(), 4);
        let r = &import.rows[0];
        assert_eq!((r.speedup, r.speedup_vs_compile), (Some(1.5), Some(0.9)));
        assert_eq!(r.speedup_column, "score_default");
        assert_eq!(r.other_speedups, "score_cuda_graph=1.2");
        assert_eq!(r.correct, None);
        // "None" is CUDA-L1's mark for no code: the published score stays, with no submission
        assert_eq!(
            (import.rows[1].submission.as_str(), import.rows[1].speedup),
            ("", Some(2.0))
        );
        assert_eq!(import.rows[2].speedup, None);
        let skipped: Vec<String> = import
            .skipped
            .iter()
            .map(|s| format!("{}: {}", s.at, s.why))
            .collect();
        assert_eq!(
            skipped,
            [
                "line 5: a second row for task 1/19 (the first is line 1)",
                "line 6: no ref_code (the reference)",
                "line 7: no level_id",
                "line 8: not JSON: key must be a string at line 1 column 2",
            ]
        );
    }
}
