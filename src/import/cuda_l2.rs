//! CUDA-L2's release (a checkout of its repository, or a folder with its layout): one HGEMM
//! kernel per shape in `kernels/GPU_F32F16F16F32/M_N_K.cu`, each exporting the entry declared in
//! `pybind/hgemm_GPU_fp32.cc`, and the published speedups in
//! `eval_results/cuda_l2_GPU_F32F16F16F32_speedup_{offline,server}.csv` (ratios of mean TFLOPS
//! over torch.matmul, cuBLAS and cuBLASLt). Each shape becomes a task (`level1/ID_HGEMM_M_N_K`,
//! ID its row in the offline CSV) and a submission; `published.csv` carries the offline
//! torch.matmul column as the speedup and the other columns beside it, `published-server.csv`
//! the server ones, and `kernels.csv` what the kernels' sources declare (layout read, padding,
//! accumulator, private stream). Every file is read beneath SRC through no symbolic link
//! (`untrusted`): a kernel or table that is a link or not a regular file is left unread and named
//! (`Import::unread`), and the glue, which the import cannot go without, is refused.

mod python;
pub mod sample;
mod source;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;

use super::{Import, CORPUS_CAP, SOURCE_CAP};
use crate::error::{Error, Result};
use crate::published::PublishedRow;
use crate::task::TaskId;
use crate::untrusted;
use sample::Shape;
use source::Layout;

/// The published column kbench reproduces: the speedup over torch.matmul.
const MATMUL: &str = "torch.matmul";
/// The level of the tasks written (a GEMM is a single operator, as in KernelBench's level 1).
const LEVEL: u32 = 1;

/// Which shapes to import: all, or those named and/or a spread sample.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub shapes: Vec<String>,
    pub sample: Option<usize>,
}

/// A published table: shape name -> (column, value), in file order; the column names.
struct Table {
    order: Vec<String>,
    cells: BTreeMap<String, Vec<(String, f64)>>,
}

/// The table at `rel` below `src`; None where there is none, or it is not a regular file (said
/// in `import`).
fn read_table(src: &Path, rel: &Path, import: &mut Import) -> Result<Option<Table>> {
    let path = src.join(rel);
    let bytes = match untrusted::read_regular_beneath(src, rel, CORPUS_CAP) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            import.unread(rel.display().to_string(), e);
            return Ok(None);
        }
    };
    let fail = |e: csv::Error| Error::Usage(format!("read {}: {e}", path.display()));
    let mut reader = csv::Reader::from_reader(bytes.as_slice());
    let header: Vec<String> = reader
        .headers()
        .map_err(fail)?
        .iter()
        .map(String::from)
        .collect();
    if header.first().map(String::as_str) != Some("mnk") || !header.iter().any(|h| h == MATMUL) {
        return Err(Error::Usage(format!(
            "read {}: expected a header starting with mnk and holding {MATMUL}",
            path.display()
        )));
    }
    let mut table = Table {
        order: Vec::new(),
        cells: BTreeMap::new(),
    };
    for record in reader.records() {
        let record = record.map_err(fail)?;
        let shape = record.get(0).unwrap_or("").trim().to_string();
        let cells = header
            .iter()
            .zip(record.iter())
            .skip(1)
            .filter_map(|(h, v)| Some((h.clone(), v.trim().parse::<f64>().ok()?)))
            .filter(|(_, v)| v.is_finite())
            .collect();
        table.order.push(shape.clone());
        table.cells.insert(shape, cells);
    }
    Ok(Some(table))
}

/// The entry function's name and C++ declaration from CUDA-L2's pybind glue (`rel` below `src`).
fn entry(src: &Path, rel: &Path) -> Result<(String, String)> {
    let glue = src.join(rel);
    let text = untrusted::read_regular_beneath(src, rel, SOURCE_CAP)
        .and_then(|bytes| String::from_utf8(bytes).map_err(std::io::Error::other))
        .map_err(|e| Error::read(&glue, e))?;
    let declaration = Regex::new(r"void\s+(cuda_l2_\w+)\s*\(([^)]*)\)\s*;").expect("regex");
    let found = declaration.captures(&text).ok_or_else(|| {
        Error::Usage(format!(
            "read {}: no `void cuda_l2_...(...);` declaration",
            glue.display()
        ))
    })?;
    let params = found[2].split_whitespace().collect::<Vec<_>>().join(" ");
    Ok((
        found[1].to_string(),
        format!("void {}({params});", &found[1]),
    ))
}

/// The kernels of the folder `rel` below `src` by shape, as paths below `src`; one that is not
/// a regular file (a link, a FIFO) is left unread, said in `import`.
fn kernels(src: &Path, rel: &Path, import: &mut Import) -> Result<BTreeMap<Shape, PathBuf>> {
    let dir = src.join(rel);
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| Error::read(&dir, e))? {
        let entry = entry.map_err(|e| Error::read(&dir, e))?;
        let path = rel.join(entry.file_name());
        let shape = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_suffix(".cu"))
            .and_then(sample::parse);
        let Some(shape) = shape else {
            continue;
        };
        let kind = entry.file_type().map_err(|e| Error::read(&dir, e))?;
        match untrusted::not_regular(kind) {
            Some(refused) => import.unread(path.display().to_string(), refused),
            None => {
                found.insert(shape, path);
            }
        }
    }
    Ok(found)
}

/// The shapes chosen, each once, in a stable order; named shapes without a kernel are skipped.
fn select(
    all: &BTreeMap<Shape, PathBuf>,
    selection: &Selection,
    import: &mut Import,
) -> Result<Vec<Shape>> {
    if selection.shapes.is_empty() && selection.sample.is_none() {
        return Ok(all.keys().copied().collect());
    }
    let mut chosen = Vec::new();
    for text in &selection.shapes {
        let shape = sample::parse(text)
            .ok_or_else(|| Error::Usage(format!("use --shapes {text:?}: it is not M_N_K")))?;
        if all.contains_key(&shape) {
            chosen.push(shape);
        } else {
            import.skip(text.as_str(), "no kernel for this shape");
        }
    }
    let shapes: Vec<Shape> = all.keys().copied().collect();
    chosen.extend(sample::spread(&shapes, selection.sample.unwrap_or(0)));
    chosen.sort();
    chosen.dedup();
    Ok(chosen)
}

/// `column=value` of every column but torch.matmul's, `;`-separated, prefixed.
fn others(cells: &[(String, f64)], prefix: &str) -> String {
    cells
        .iter()
        .filter(|(c, _)| c != MATMUL)
        .map(|(c, v)| format!("{prefix}{c}={v}"))
        .collect::<Vec<_>>()
        .join(";")
}

fn matmul(cells: Option<&Vec<(String, f64)>>) -> Option<f64> {
    cells?.iter().find(|(c, _)| c == MATMUL).map(|(_, v)| *v)
}

/// The kernels' folder of `--gpu`'s CUDA-L2 results below `src`, relative to it.
fn kernels_folder(src: &Path, gpu: &str) -> Result<PathBuf> {
    if python::arch(gpu).is_none() {
        eprintln!("kbench: --gpu {gpu}: unknown to kbench; its kernels are built for sm_90a");
    }
    let kernels_dir = Path::new("kernels").join(format!("{gpu}_F32F16F16F32"));
    if !src.join(&kernels_dir).is_dir() {
        return Err(Error::Usage(format!(
            "import {}: not a CUDA-L2 folder for --gpu {gpu} (no kernels/{gpu}_F32F16F16F32/)",
            src.display()
        )));
    }
    Ok(kernels_dir)
}

/// Each shape's task number: its row in the offline table, so that any subset numbers its
/// tasks alike; shapes the table does not list after them.
fn task_ids(offline: Option<&Table>, all: &BTreeMap<Shape, PathBuf>) -> BTreeMap<String, u32> {
    let listed: Vec<String> = offline.map(|t| t.order.clone()).unwrap_or_default();
    let unlisted = all
        .keys()
        .map(|s| sample::name(*s))
        .filter(|n| !listed.contains(n));
    listed.iter().cloned().chain(unlisted).zip(1..).collect()
}

/// How a kernel's source is called from Python: the GPU and the pybind glue's entry point and
/// its declaration.
struct Glue<'a> {
    gpu: &'a str,
    entry: &'a str,
    declaration: &'a str,
}

/// The kernel of `shape` at `path` (below `src`) as task `id`: its task and submission added to
/// `import`; the submission's path and what its source declares. None where it was left out
/// (said in `import`).
fn add_kernel(
    import: &mut Import,
    src: &Path,
    (shape, path): (Shape, &Path),
    id: TaskId,
    glue: &Glue<'_>,
) -> Option<(String, source::Facts)> {
    let at = format!("{}", path.display());
    let code = match untrusted::read_regular_beneath(src, path, SOURCE_CAP) {
        Ok(bytes) => String::from_utf8(bytes),
        Err(e) => {
            import.unread(at, e);
            return None;
        }
    };
    let code = code
        .map_err(|e| import.skip(&at, format!("unreadable: {e}")))
        .ok()?;
    let facts = source::read(&code, glue.entry, shape);
    let task_name = format!("{}_HGEMM_{}", id.number, sample::name(shape));
    let task = python::task(shape, glue.gpu, facts.layout);
    if let Err(why) = import.add_task(id, &task_name, &task, &at) {
        import.skip(at, why);
        return None;
    }
    let code = python::submission(shape, glue.gpu, glue.entry, glue.declaration, &facts, &code);
    Some((import.add_submission(id, &task_name, None, code), facts))
}

/// The published rows of task `id` (its submission `submission`), against torch.matmul in each
/// of the tables' modes, from its cells of the offline and server tables.
fn add_rows(
    import: &mut Import,
    (id, submission): (TaskId, &str),
    offline_cells: Option<&Vec<(String, f64)>>,
    server_cells: Option<&Vec<(String, f64)>>,
) {
    let row = |speedup, cells: Option<&Vec<(String, f64)>>, column: &str| PublishedRow {
        level: id.level,
        problem_id: id.number,
        submission: submission.into(),
        correct: None,
        speedup,
        speedup_column: column.into(),
        speedup_vs_compile: None,
        speedup_vs_compile_column: String::new(),
        other_speedups: cells.map(|c| others(c, "")).unwrap_or_default(),
        system: "cuda-l2".into(),
    };
    import.rows.push(row(
        matmul(offline_cells),
        offline_cells,
        "torch.matmul (offline)",
    ));
    import.server_rows.push(row(
        matmul(server_cells),
        server_cells,
        "torch.matmul (server)",
    ));
}

/// kernels.csv's columns: what each kernel's source declares.
const SIDECAR_HEADER: &str = "level,problem_id,shape,submission,layout,padding,accumulator,\
                              accumulator_evidence,private_stream,cublas,arch_specific\n";

/// kernels.csv's line of task `id`, the shape `name`, its submission and its source's `facts`.
fn sidecar_line(id: TaskId, name: &str, submission: &str, facts: &source::Facts) -> String {
    let layout = match facts.layout {
        Layout::RowMajor => "b",
        Layout::ColMajor => "b_col_major",
        Layout::Both => "b+b_col_major",
    };
    let [pm, pn, pk] = facts.padding;
    format!(
        "{},{},{name},{submission},{layout},{pm}_{pn}_{pk},{},\"{}\",{},{},{}\n",
        id.level,
        id.number,
        facts.accumulator.name(),
        facts.accumulator_evidence.replace('"', "'"),
        facts.private_stream,
        facts.cublas,
        facts.arch_specific,
    )
}

/// The CUDA-L2 results of `gpu` at `src` (selected by `selection`) as an import: a task and a
/// submission per kernel, the published rows of both modes, and kernels.csv.
pub fn read(src: &Path, gpu: &str, selection: &Selection) -> Result<Import> {
    let kernels_dir = kernels_folder(src, gpu)?;
    let glue = Path::new("pybind").join(format!("hgemm_{gpu}_fp32.cc"));
    let (entry, declaration) = entry(src, &glue)?;
    let glue = Glue {
        gpu,
        entry: &entry,
        declaration: &declaration,
    };
    let mut import = Import {
        eval_flags: vec!["--precision", "fp16"],
        ..Import::default()
    };
    let mut table = |mode: &str| {
        let name = format!("cuda_l2_{gpu}_F32F16F16F32_speedup_{mode}.csv");
        read_table(src, &Path::new("eval_results").join(name), &mut import)
    };
    let (offline, server) = (table("offline")?, table("server")?);
    let all = kernels(src, &kernels_dir, &mut import)?;
    let ids = task_ids(offline.as_ref(), &all);
    let mut sidecar = String::from(SIDECAR_HEADER);
    for shape in select(&all, selection, &mut import)? {
        let name = sample::name(shape);
        let id = TaskId {
            level: LEVEL,
            number: ids[&name],
        };
        let Some((submission, facts)) =
            add_kernel(&mut import, src, (shape, &all[&shape]), id, &glue)
        else {
            continue;
        };
        let offline_cells = offline.as_ref().and_then(|t| t.cells.get(&name));
        let server_cells = server.as_ref().and_then(|t| t.cells.get(&name));
        add_rows(&mut import, (id, &submission), offline_cells, server_cells);
        sidecar.push_str(&sidecar_line(id, &name, &submission, &facts));
    }
    import.files.insert("kernels.csv".into(), sidecar);
    import.notes.push(
        "server mode: kbench eval SUBMISSIONS --mode server --published OUT/published-server.csv \
         (the same flags); the kernels build with CUTLASS's headers (kbench doctor says where \
         it finds them); what each kernel's source declares is in kernels.csv"
            .into(),
    );
    Ok(import)
}
