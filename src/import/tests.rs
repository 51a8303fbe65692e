//! The importers' shared reading and writing: row fields, names, paths that never collide.

use serde_json::json;

use super::*;
use crate::task::TaskId;

#[test]
fn fields_read_as_exports_write_them() {
    let row = json!({"a": 3, "b": 3.0, "c": "3", "d": 3.5, "e": null, "s": "x",
                     "t": "True", "f": false, "n": "nan", "none": "None", "blank": " "});
    assert_eq!(whole(&row, "a"), Ok(3));
    assert_eq!(whole(&row, "b"), Ok(3));
    assert_eq!(whole(&row, "c"), Ok(3));
    assert!(whole(&row, "d").unwrap_err().contains("not a whole number"));
    assert_eq!(whole(&row, "missing"), Err("no missing".into()));
    assert_eq!(number(&row, "d"), Some(3.5));
    assert_eq!(number(&row, "n"), None);
    assert_eq!(number(&row, "e"), None);
    assert_eq!(boolean(&row, "t"), Some(true));
    assert_eq!(boolean(&row, "f"), Some(false));
    assert_eq!(boolean(&row, "s"), None);
    assert_eq!(code(&row, "s").as_deref(), Some("x"));
    assert_eq!(code(&row, "none"), None);
    assert_eq!(code(&row, "blank"), None);
    let id = task_id(&json!({"l": 2, "n": 7}), "l", "n").unwrap();
    assert_eq!(id.to_string(), "2/7");
    assert_eq!(
        task_id(&json!({"l": 0, "n": 7}), "l", "n"),
        Err("l is 0".into())
    );
}

#[test]
fn names_prefer_the_bundled_tasks_and_paths_never_collide() {
    let mut import = Import::default();
    let relu = TaskId {
        level: 1,
        number: 19,
    };
    assert_eq!(import.task_name(relu, "anything"), "19_ReLU");
    let new = TaskId {
        level: 4,
        number: 7,
    };
    assert_eq!(import.task_name(new, "my op/v2"), "7_my_op_v2");
    assert_eq!(import.task_name(new, "7_Op"), "7_Op");
    import.add_task(new, "7_Op", "code", "line 1").unwrap();
    assert_eq!(import.task_name(new, "other"), "7_Op");
    assert!(import.add_task(new, "7_Op", "code  \n\n", "line 2").is_ok());
    let err = import.add_task(new, "7_Op", "other", "line 3").unwrap_err();
    assert!(err.contains("differs from the one line 1 gave"), "{err}");
    let a = import.add_submission(relu, "19_ReLU", Some("fast kernel"), "a".into());
    let b = import.add_submission(relu, "19_ReLU", Some("fast kernel"), "b".into());
    let c = import.add_submission(relu, "19_ReLU", None, "c".into());
    assert_eq!(
        [a, b, c],
        [
            "level1/19_ReLU/fast_kernel.py",
            "level1/19_ReLU/fast_kernel_2.py",
            "level1/19_ReLU.py"
        ]
    );
    assert_eq!(file_name("../.."), "_..");
    assert_eq!(file_name(""), "kernel");
}

#[test]
fn json_rows_take_lines_or_an_array_and_refuse_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let lines = dir.path().join("rows.jsonl");
    std::fs::write(&lines, "{\"a\": 1}\n\nnot json\n[1]\n").unwrap();
    let rows = json_rows(&lines).unwrap();
    let at: Vec<&str> = rows.iter().map(|(at, _)| at.as_str()).collect();
    assert_eq!(at, ["line 1", "line 3", "line 4"]);
    assert!(rows[0].1.is_ok());
    assert!(rows[1].1.as_ref().unwrap_err().starts_with("not JSON"));
    assert_eq!(rows[2].1, Err("not a JSON object".into()));
    let array = dir.path().join("rows.json");
    std::fs::write(&array, "[{\"a\": 1}, {\"a\": 2}]").unwrap();
    assert_eq!(json_rows(&array).unwrap().len(), 2);
    let parquet = dir.path().join("rows.parquet");
    std::fs::write(&parquet, b"PAR1\x00\x00").unwrap();
    let err = json_rows(&parquet).unwrap_err().to_string();
    assert!(err.contains("to_json"), "{err}");
}
