//! Stanford's good-kernels (`ScalingIntelligence/good-kernels`): a folder per problem, each with
//! `ref.py` (the reference, a KernelBench-format task) and `src.py` (the generated `ModelNew`).
//! Each folder becomes a task of level 1, numbered in name order; its published figure is the
//! one the kernels' blog post gives (`CLAIMS`: "% performance" of FP32 PyTorch, the reference's
//! time over the kernel's, measured on an NVIDIA L40S), since the repository holds none. A folder
//! the post gives no figure for (LayerNorm2, regenerated after it) is evaluated with no published
//! speedup. The walk follows no link; a link or anything not a folder or regular file is named
//! and left unread (`Import::unread`), and every file is read beneath SRC through no link.

use std::path::{Path, PathBuf};

use super::{Import, SOURCE_CAP};
use crate::error::{Error, Result};
use crate::published::PublishedRow;
use crate::task::TaskId;
use crate::untrusted::{self, Entry};

/// The blog post the figures come from.
const SOURCE: &str = "https://crfm.stanford.edu/2025/05/28/fast-kernels.html";
/// The published figures: folder, speedup over FP32 PyTorch (its "% performance" / 100).
const CLAIMS: [(&str, f64); 5] = [
    ("MatmulFP32", 1.013),
    ("Conv2D", 1.799),
    ("Softmax", 1.118),
    ("LayerNorm", 4.844),
    ("Conv2D_ReLU_MaxPool", 2.901),
];
const COLUMN: &str = "blog_l40s_fp32";
const LEVEL: u32 = 1;

pub fn read(src: &Path) -> Result<Import> {
    if !src.is_dir() {
        return Err(Error::Usage(format!(
            "import {}: good-kernels is a folder of problem folders, each with ref.py and src.py",
            src.display()
        )));
    }
    let mut import = Import::default();
    let mut folders: Vec<PathBuf> = Vec::new();
    untrusted::walk(src, &mut |rel, entry| match entry {
        Entry::File(_) => {
            let mut parts = rel.components();
            if let (Some(dir), Some(name), None) = (parts.next(), parts.next(), parts.next()) {
                if name.as_os_str() == "ref.py" {
                    folders.push(PathBuf::from(dir.as_os_str()));
                }
            }
        }
        Entry::Other(what) => import.unread(rel.display().to_string(), what),
    })
    .map_err(|e| Error::read(src, e))?;
    folders.sort();
    for (n, folder) in folders.iter().enumerate() {
        let id = TaskId {
            level: LEVEL,
            number: n as u32 + 1,
        };
        if let Err(why) = add(&mut import, src, folder, id) {
            import.skip(folder.display().to_string(), why);
        }
    }
    if import.rows.is_empty() && import.skipped.is_empty() && import.unread.is_empty() {
        import.skip(
            src.display().to_string(),
            "no folder with a ref.py below it",
        );
    }
    import.notes.push(format!(
        "published figures: the blog post {SOURCE}, measured on an NVIDIA L40S in FP32 (a task \
         per folder, level {LEVEL}, numbered in name order)"
    ));
    Ok(import)
}

/// One problem folder: its reference as the task, its kernel as the submission, its claim.
fn add(import: &mut Import, src: &Path, folder: &Path, id: TaskId) -> Result<(), String> {
    let read = |file: &str| -> Result<String, String> {
        let bytes = untrusted::read_regular_beneath(src, &folder.join(file), SOURCE_CAP)
            .map_err(|e| format!("{file}: not read: {e}"))?;
        String::from_utf8(bytes).map_err(|e| format!("{file}: unreadable: {e}"))
    };
    let reference = read("ref.py")?;
    let kernel = read("src.py")?;
    let folder_name = folder.display().to_string();
    let name = format!("{}_{}", id.number, super::file_name(&folder_name));
    import.add_task(id, &name, &reference, &folder_name)?;
    let submission = import.add_submission(id, &name, None, kernel);
    let claim = CLAIMS.iter().find(|(f, _)| *f == folder_name);
    import.rows.push(PublishedRow {
        level: id.level,
        problem_id: id.number,
        submission,
        correct: None,
        speedup: claim.map(|(_, s)| *s),
        speedup_column: COLUMN.into(),
        speedup_vs_compile: None,
        speedup_vs_compile_column: String::new(),
        other_speedups: String::new(),
        system: "good-kernels".into(),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_per_problem_in_name_order_with_the_posts_figures() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path();
        for (folder, files) in [
            ("Softmax", &["ref.py", "src.py"][..]),
            ("LayerNorm2", &["ref.py", "src.py"]),
            ("Conv2D", &["ref.py", "src.py"]),
            ("NoKernel", &["ref.py"]),
            ("notes", &["README.md"]),
        ] {
            std::fs::create_dir(src.join(folder)).unwrap();
            for file in files {
                std::fs::write(src.join(folder).join(file), format!("{folder} {file}")).unwrap();
            }
        }
        std::os::unix::fs::symlink("/etc/passwd", src.join("Softmax/extra.py")).unwrap();
        let import = read(src).unwrap();
        let subs: Vec<&str> = import.submissions.keys().map(String::as_str).collect();
        assert_eq!(
            subs,
            [
                "level1/1_Conv2D.py",
                "level1/2_LayerNorm2.py",
                "level1/4_Softmax.py"
            ]
        );
        assert_eq!(import.submissions["level1/4_Softmax.py"], "Softmax src.py");
        let claims: Vec<(u32, Option<f64>)> = import
            .rows
            .iter()
            .map(|r| (r.problem_id, r.speedup))
            .collect();
        assert_eq!(claims, [(1, Some(1.799)), (2, None), (4, Some(1.118))]);
        assert!(import.rows.iter().all(|r| r.system == "good-kernels"));
        assert_eq!(import.skipped.len(), 1);
        assert!(import.skipped[0].why.starts_with("src.py: not read"));
        assert_eq!(import.unread.len(), 1);
        assert_eq!(import.unread[0].at, "Softmax/extra.py");
        assert!(import.notes[0].contains("L40S"));
    }

    /// Red team: a checkout whose problem files are a FIFO (a read would block the import), a
    /// link to a file outside it, or a folder that is a link: none is opened or followed, each is
    /// named as unread, and the honest folder beside them is imported.
    #[test]
    fn links_and_fifos_in_the_checkout_are_named_and_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("checkout");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("ref.py"), "SECRET").unwrap();
        std::fs::write(outside.join("src.py"), "SECRET").unwrap();
        for folder in ["Honest", "Fifo", "Linked"] {
            std::fs::create_dir_all(src.join(folder)).unwrap();
        }
        for file in ["ref.py", "src.py"] {
            std::fs::write(src.join("Honest").join(file), file).unwrap();
        }
        rustix::fs::mknodat(
            rustix::fs::CWD,
            src.join("Fifo/ref.py"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        std::fs::write(src.join("Fifo/src.py"), "x").unwrap();
        std::os::unix::fs::symlink(outside.join("ref.py"), src.join("Linked/ref.py")).unwrap();
        std::fs::write(src.join("Linked/src.py"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, src.join("Away")).unwrap();
        let import = read(&src).unwrap();
        let subs: Vec<&str> = import.submissions.keys().map(String::as_str).collect();
        assert_eq!(subs, ["level1/1_Honest.py"]);
        let mut unread: Vec<String> = import
            .unread
            .iter()
            .map(|u| format!("{}: {}", u.at, u.why))
            .collect();
        unread.sort();
        assert_eq!(
            unread,
            [
                "Away: not read: a symbolic link",
                "Fifo/ref.py: not read: a FIFO",
                "Linked/ref.py: not read: a symbolic link",
            ]
        );
        assert!(import
            .submissions
            .values()
            .all(|code| !code.contains("SECRET")));
    }

    #[test]
    fn a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ref.py");
        std::fs::write(&file, "x").unwrap();
        assert!(read(&file).is_err());
    }
}
