//! Upstream KernelBench run directories: `level_L_problem_P_sample_S_kernel.py` files anywhere
//! below SRC, and beside them, where upstream's `eval_from_generations.py` wrote one,
//! `eval_results.json`: `{"P": [{"sample_id", "compiled", "correctness", "runtime",
//! "ref_runtime", ...}]}` (older runs: one object per problem instead of a list). Published
//! correctness is `compiled && correctness`; the speedup is `ref_runtime / runtime` (ms) where
//! the file has both (older runs time only the kernel: no speedup). A run holds no references,
//! so no task tree is written. The walk follows no symbolic link; a link, FIFO, socket or device
//! below SRC is named and left unread (`Import::unread`), and every file is read beneath SRC
//! through no link (`untrusted`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{boolean, number, whole, Import, CORPUS_CAP, SOURCE_CAP};
use crate::error::{Error, Result};
use crate::published::PublishedRow;
use crate::submission::run_layout;
use crate::task::TaskId;
use crate::untrusted;

const RESULTS: &str = "eval_results.json";

struct Kernel {
    /// Below SRC.
    path: PathBuf,
    id: TaskId,
    sample: u32,
}

/// A folder below SRC that holds kernel files or an `eval_results.json` (a regular file).
#[derive(Default)]
struct Folder {
    kernels: Vec<Kernel>,
    has_results: bool,
}

pub fn read(src: &Path) -> Result<Import> {
    if !src.is_dir() {
        return Err(Error::Usage(format!(
            "import {}: a KernelBench run is a directory of level_L_problem_P_sample_S_kernel.py \
             files",
            src.display()
        )));
    }
    let mut import = Import::default();
    for (dir, folder) in run_folders(src, &mut import)? {
        let at = |path: &Path| path.display().to_string();
        let results_path = dir.join(RESULTS);
        let mut results = HashMap::new();
        if folder.has_results {
            match untrusted::read_regular_beneath(src, &results_path, CORPUS_CAP) {
                Err(e) => import.unread(at(&results_path), e),
                Ok(bytes) => match parse_results(&bytes) {
                    Ok(parsed) => results = parsed,
                    Err(why) => import.skip(
                        at(&results_path),
                        format!("{why}; its kernels have no published results"),
                    ),
                },
            }
        }
        let kernels = folder.kernels;
        for k in &kernels {
            let read = untrusted::read_regular_beneath(src, &k.path, SOURCE_CAP);
            let code = match read.map(String::from_utf8) {
                Ok(Ok(code)) => code,
                Ok(Err(e)) => {
                    import.skip(at(&k.path), format!("unreadable: {e}"));
                    continue;
                }
                Err(e) => {
                    import.unread(at(&k.path), e);
                    continue;
                }
            };
            let name = import.task_name(k.id, "problem");
            let submission =
                import.add_submission(k.id, &name, Some(&format!("sample_{}", k.sample)), code);
            let result = results.remove(&(k.id.number, k.sample));
            import.rows.push(row(k.id, submission, result.as_ref()));
        }
        // Results without their kernel file: published, with no code, where the level is known.
        let levels: BTreeSet<u32> = kernels.iter().map(|k| k.id.level).collect();
        let mut rest: Vec<_> = results.into_iter().collect();
        rest.sort_by_key(|(key, _)| *key);
        for ((number, sample), result) in rest {
            match levels.iter().collect::<Vec<_>>()[..] {
                [&level] => {
                    import
                        .rows
                        .push(row(TaskId { level, number }, String::new(), Some(&result)))
                }
                _ => import.skip(
                    format!("{}: problem {number} sample {sample}", at(&results_path)),
                    "no kernel file, and the level is unknown (kernel files of one level beside \
                     it tell it)",
                ),
            }
        }
    }
    if import.rows.is_empty() && import.skipped.is_empty() && import.unread.is_empty() {
        import.skip(
            src.display().to_string(),
            "no level_L_problem_P_sample_S_kernel.py file below it",
        );
    }
    Ok(import)
}

/// The folders below `src` (paths relative to it) that hold kernel files or an
/// `eval_results.json`. The walk follows no link: an entry that is neither a folder nor a
/// regular file is left unread, said in `import`.
fn run_folders(src: &Path, import: &mut Import) -> Result<BTreeMap<PathBuf, Folder>> {
    let mut dirs: BTreeMap<PathBuf, Folder> = BTreeMap::new();
    let walk = walkdir::WalkDir::new(src)
        .follow_links(false)
        .sort_by_file_name();
    for entry in walk {
        let entry = entry.map_err(|e| Error::Other(format!("walk {}: {e}", src.display())))?;
        let path = entry.path().strip_prefix(src).unwrap_or(entry.path());
        if entry.file_type().is_dir() {
            continue;
        }
        if let Some(refused) = untrusted::not_regular(entry.file_type()) {
            import.unread(path.display().to_string(), refused);
            continue;
        }
        let name = entry.file_name().to_string_lossy();
        let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
        if name == RESULTS {
            dirs.entry(dir).or_default().has_results = true;
        } else if let Some((level, number, sample)) = run_layout(&name) {
            dirs.entry(dir).or_default().kernels.push(Kernel {
                path: path.to_path_buf(),
                id: TaskId { level, number },
                sample,
            });
        }
    }
    Ok(dirs)
}

/// `eval_results.json` by (problem, sample).
fn parse_results(bytes: &[u8]) -> Result<HashMap<(u32, u32), Value>, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let problems = value.as_object().ok_or("not an object of problem ids")?;
    let mut results = HashMap::new();
    for (problem, entries) in problems {
        let number: u32 = problem
            .parse()
            .map_err(|_| format!("key '{problem}' is not a problem id"))?;
        let entries = match entries {
            Value::Array(list) => list.clone(),
            one => vec![one.clone()],
        };
        for entry in entries {
            let sample = if entry.get("sample_id").is_some() {
                whole(&entry, "sample_id").map_err(|why| format!("problem {problem}: {why}"))?
            } else {
                0
            };
            results.insert((number, sample), entry);
        }
    }
    Ok(results)
}

fn row(id: TaskId, submission: String, result: Option<&Value>) -> PublishedRow {
    let correct = result
        .and_then(|r| Some(boolean(r, "compiled").unwrap_or(true) && boolean(r, "correctness")?));
    let positive = |key| result.and_then(|r| number(r, key)).filter(|t| *t > 0.0);
    let speedup = positive("ref_runtime")
        .zip(positive("runtime"))
        .map(|(reference, kernel)| reference / kernel);
    PublishedRow {
        level: id.level,
        problem_id: id.number,
        submission,
        correct,
        speedup,
        speedup_column: "ref_runtime/runtime".into(),
        speedup_vs_compile: None,
        speedup_vs_compile_column: String::new(),
        other_speedups: String::new(),
        system: "kernelbench-run".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, files: &[(&str, &str)]) {
        for (path, text) in files {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }

    #[test]
    fn kernels_meet_their_eval_results_old_and_new() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            &[
                ("new/level_1_problem_19_sample_0_kernel.py", "A"),
                ("new/level_1_problem_19_sample_1_kernel.py", "B"),
                ("new/level_1_problem_23_sample_0_kernel.py", "C"),
                (
                    "new/eval_results.json",
                    r#"{"19": [{"sample_id": 0, "compiled": true, "correctness": true,
                               "runtime": 0.5, "ref_runtime": 1.0},
                              {"sample_id": 1, "compiled": false, "correctness": false,
                               "runtime": -1.0, "ref_runtime": -1.0}],
                        "40": [{"sample_id": 0, "compiled": true, "correctness": true,
                               "runtime": 2.0}]}"#,
                ),
                ("old/level_2_problem_5_sample_0_kernel.py", "D"),
                (
                    "old/eval_results.json",
                    r#"{"5": {"sample_id": 0, "compiled": true, "correctness": false,
                              "runtime": -1.0}}"#,
                ),
                ("bad/level_3_problem_1_sample_0_kernel.py", "E"),
                ("bad/eval_results.json", "[1, 2]"),
                ("notes.py", "F"),
            ],
        );
        let import = read(dir.path()).unwrap();
        let got: Vec<(String, Option<bool>, Option<f64>)> = import
            .rows
            .iter()
            .map(|r| (r.submission.clone(), r.correct, r.speedup))
            .collect();
        assert_eq!(
            got,
            [
                ("level3/1_MLP/sample_0.py".into(), None, None),
                ("level1/19_ReLU/sample_0.py".into(), Some(true), Some(2.0)),
                ("level1/19_ReLU/sample_1.py".into(), Some(false), None),
                ("level1/23_Softmax/sample_0.py".into(), None, None),
                // problem 40's kernel file is missing: its published result stays
                (String::new(), Some(true), None),
                (
                    "level2/5_ConvTranspose2d_Subtract_Tanh/sample_0.py".into(),
                    Some(false),
                    None
                ),
            ]
        );
        assert_eq!((import.rows[4].level, import.rows[4].problem_id), (1, 40));
        assert_eq!(import.submissions["level1/19_ReLU/sample_1.py"], "B");
        assert_eq!(import.skipped.len(), 1);
        assert_eq!(import.skipped[0].at, "bad/eval_results.json");
        assert!(import.skipped[0].why.contains("not an object"));
        assert!(import.tasks.is_empty());
        assert!(read(&dir.path().join("notes.py")).is_err());
    }
}
