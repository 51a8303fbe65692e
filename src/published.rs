//! Published results beside kbench's: `published.csv` (written by `kbench import`, read by
//! `kbench eval --published`), the per-evaluation classification against kbench's speedup
//! interval, and its summary (counts per class, the main causes of what did not reproduce).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::record::{Evaluation, RunRecord, Timing};
pub use crate::record::{Published, PublishedRow};
use crate::verdict::Verdict;

/// `published.csv`'s bytes: a header and a row per published result (`kbench import` writes it).
pub fn render_csv(rows: &[PublishedRow]) -> Result<Vec<u8>> {
    let fail = |e: csv::Error| Error::Other(format!("write published.csv: {e}"));
    let mut w = csv::Writer::from_writer(Vec::new());
    for row in rows {
        w.serialize(row).map_err(fail)?;
    }
    w.into_inner()
        .map_err(|e| Error::Other(format!("write published.csv: {e}")))
}

/// Read `published.csv`; a malformed row is an error naming its line.
pub fn read_csv(path: &Path) -> Result<Published> {
    let fail = |e: csv::Error| {
        Error::Usage(format!(
            "read published results from {}: {e}",
            path.display()
        ))
    };
    let mut r = csv::Reader::from_path(path).map_err(fail)?;
    let rows = r
        .deserialize()
        .collect::<std::result::Result<Vec<PublishedRow>, _>>()
        .map_err(fail)?;
    Ok(Published {
        file: path.display().to_string(),
        rows,
    })
}

impl Published {
    /// The row of an evaluation: the same file (its path under the submission folder) and task.
    pub fn row(&self, e: &Evaluation) -> Option<&PublishedRow> {
        self.rows.iter().find(|r| {
            !r.submission.is_empty()
                && r.submission == e.file
                && (r.level, r.problem_id) == (e.task.level, e.task.number)
        })
    }
}

/// What became of a published claim here: reproduced (and by what), slower than claimed, wrong,
/// not judged, or nothing to reproduce. Each comparison carries its evidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// `pass`, timed: a kernel of its own, and the published speedup lies inside or below
    /// kbench's interval.
    Reproduced,
    /// `no_kernel`, timed: correct PyTorch code with no kernel of its own, as fast as claimed
    /// (the published speedup inside or below kbench's interval).
    ReproducedNoKernel,
    /// `contract`, timed: as fast as claimed, but only under KernelBench's contract; the
    /// evidence names the breach of kbench's.
    ReproducedContract,
    /// Correct (or correct under KernelBench's contract), timed, but the published speedup lies
    /// above kbench's interval.
    Slower,
    /// `incorrect` or `cheat`, or `contract` where KernelBench's own rule fails it too.
    Wrong,
    /// Not judged on its merits: it did not build or run here (`environment`, `compile_error`,
    /// `runtime_error`, `crashed`, `timeout`), kbench skipped it, or a correct one has no valid
    /// timing (none, or faster than the speed of light).
    NotJudged,
    /// Correct (or `contract`) and timed here; the source published no speedup for it.
    NoPublishedSpeedup,
    /// The source itself published the kernel as incorrect: there is no claim to reproduce.
    PublishedIncorrect,
}

impl Class {
    pub const ALL: [Class; 8] = [
        Class::Reproduced,
        Class::ReproducedNoKernel,
        Class::ReproducedContract,
        Class::Slower,
        Class::Wrong,
        Class::NotJudged,
        Class::NoPublishedSpeedup,
        Class::PublishedIncorrect,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Reproduced => "reproduced",
            Class::ReproducedNoKernel => "reproduced_no_kernel",
            Class::ReproducedContract => "reproduced_contract",
            Class::Slower => "slower",
            Class::Wrong => "wrong",
            Class::NotJudged => "not_judged",
            Class::NoPublishedSpeedup => "no_published_speedup",
            Class::PublishedIncorrect => "published_incorrect",
        }
    }

    /// The class of a timed evaluation of `verdict` whose interval reaches the claim.
    fn reproduced(verdict: Verdict) -> Class {
        match verdict {
            Verdict::NoKernel => Class::ReproducedNoKernel,
            Verdict::Contract => Class::ReproducedContract,
            _ => Class::Reproduced,
        }
    }
}

/// The system of rows whose `published.csv` names none (written before it was recorded).
pub const UNNAMED: &str = "unnamed";

/// One evaluation against its published row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub task: String,
    pub file: String,
    /// The system that published the claim (`PublishedRow::system`, else `UNNAMED`).
    pub system: String,
    pub verdict: Verdict,
    pub speedup: Option<f64>,
    pub speedup_ci_low: Option<f64>,
    pub speedup_ci_high: Option<f64>,
    pub published_speedup: Option<f64>,
    pub published_correct: Option<bool>,
    pub class: Class,
    /// Why: kbench's speedup and interval beside the published figure where it was timed, with
    /// the verdict and its reason's first line where it is not a plain `pass`.
    pub evidence: String,
}

fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or_default()
}

/// The verdict and its reason's first line.
fn verdict_said(e: &Evaluation) -> String {
    match first_line(&e.reason) {
        "" => e.verdict.to_string(),
        line => format!("{}: {line}", e.verdict),
    }
}

/// The class and evidence of an evaluation with its values right (`pass`, `no_kernel`,
/// `contract`) and a valid timing `t`.
fn timed(e: &Evaluation, t: &Timing, published: Option<f64>) -> (Class, String) {
    let kbench = format!(
        "kbench {:.3}x [{:.3}, {:.3}]",
        t.speedup, t.speedup_ci_low, t.speedup_ci_high
    );
    let (class, figures) = match published {
        None => (
            Class::NoPublishedSpeedup,
            format!("{kbench}, no published speedup"),
        ),
        Some(p) if p <= t.speedup_ci_high => (
            Class::reproduced(e.verdict),
            format!("{kbench}, published {p:.3}x"),
        ),
        Some(p) => (Class::Slower, format!("{kbench} below published {p:.3}x")),
    };
    match e.verdict {
        Verdict::Pass => (class, figures),
        _ => (class, format!("{figures}; {}", verdict_said(e))),
    }
}

/// What became of `row`'s claim in evaluation `e`, with its evidence.
pub fn compare(e: &Evaluation, row: &PublishedRow) -> Comparison {
    let timing = e.timing.as_ref();
    let said = verdict_said(e);
    let values_right = matches!(
        e.verdict,
        Verdict::Pass | Verdict::NoKernel | Verdict::Contract
    );
    let (class, evidence) = match (e.verdict, timing) {
        (Verdict::Skipped, _) => (Class::NotJudged, said),
        _ if row.correct == Some(false) => (
            Class::PublishedIncorrect,
            format!("published as incorrect; here {said}"),
        ),
        (Verdict::Incorrect | Verdict::Cheat, _) => (Class::Wrong, said),
        (Verdict::Contract, _) if e.kernelbench_correct == Some(false) => (
            Class::Wrong,
            format!("{said}; KernelBench's rule fails it too"),
        ),
        (_, Some(t)) if values_right && t.invalid => (
            Class::NotJudged,
            format!("{said}; timed faster than the speed of light"),
        ),
        (_, Some(t)) if values_right => timed(e, t, row.speedup),
        _ if values_right => (Class::NotJudged, format!("{said}; not timed")),
        _ => (Class::NotJudged, said),
    };
    Comparison {
        task: e.label(),
        file: e.file.clone(),
        system: if row.system.is_empty() {
            UNNAMED.into()
        } else {
            row.system.clone()
        },
        verdict: e.verdict,
        speedup: timing.map(|t| t.speedup),
        speedup_ci_low: timing.map(|t| t.speedup_ci_low),
        speedup_ci_high: timing.map(|t| t.speedup_ci_high),
        published_speedup: row.speedup,
        published_correct: row.correct,
        class,
        evidence,
    }
}

/// A group of evaluations wrong or not judged for the same cause.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cause {
    pub count: usize,
    /// The evidence with numbers masked as `#`, so that one cause groups together.
    pub cause: String,
}

/// Geometric means of the published and of kbench's speedups over the same evaluations.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Geomeans {
    pub evaluations: usize,
    pub published: f64,
    pub kbench: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PublishedSummary {
    pub file: String,
    pub rows: usize,
    /// Rows that published no code, so nothing to evaluate.
    pub without_code: usize,
    /// Rows with code that this run holds no evaluation of.
    pub not_evaluated: usize,
    /// Evaluations of this run that match a row (the comparisons below).
    pub compared: usize,
    /// Per system that published the claims, its comparisons per class, every class listed.
    pub systems: BTreeMap<String, BTreeMap<&'static str, usize>>,
    /// Causes of `wrong` and `not_judged`, most frequent first (at most `MAX_CAUSES`).
    pub causes: Vec<Cause>,
    /// Over the evaluations timed here with a published speedup (reproduced or slower).
    pub geomeans: Option<Geomeans>,
    pub comparisons: Vec<Comparison>,
}

pub const MAX_CAUSES: usize = 10;

/// `cause` with every run of digits replaced by `#`, at most 120 characters.
fn mask_numbers(cause: &str) -> String {
    let mut out = String::new();
    for c in cause.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out.chars().take(120).collect()
}

pub fn summarize(record: &RunRecord) -> Option<PublishedSummary> {
    let published = record.published.as_ref()?;
    let comparisons: Vec<Comparison> = record
        .evaluations
        .iter()
        .filter_map(|e| Some(compare(e, published.row(e)?)))
        .collect();
    let mut systems: BTreeMap<String, BTreeMap<&'static str, usize>> = BTreeMap::new();
    let mut causes: BTreeMap<String, usize> = BTreeMap::new();
    for c in &comparisons {
        let classes = systems
            .entry(c.system.clone())
            .or_insert_with(|| Class::ALL.iter().map(|c| (c.as_str(), 0)).collect());
        *classes.entry(c.class.as_str()).or_default() += 1;
        if matches!(c.class, Class::Wrong | Class::NotJudged) {
            *causes.entry(mask_numbers(&c.evidence)).or_default() += 1;
        }
    }
    let mut causes: Vec<Cause> = causes
        .into_iter()
        .map(|(cause, count)| Cause { count, cause })
        .collect();
    causes.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cause.cmp(&b.cause)));
    causes.truncate(MAX_CAUSES);
    let pairs: Vec<(f64, f64)> = comparisons
        .iter()
        .filter(|c| {
            matches!(
                c.class,
                Class::Reproduced
                    | Class::ReproducedNoKernel
                    | Class::ReproducedContract
                    | Class::Slower
            )
        })
        .filter_map(|c| Some((c.published_speedup?, c.speedup?)))
        .filter(|(p, k)| *p > 0.0 && *k > 0.0)
        .collect();
    let geomean = |f: fn(&(f64, f64)) -> f64| {
        (pairs.iter().map(|p| f(p).ln()).sum::<f64>() / pairs.len() as f64).exp()
    };
    let evaluated: std::collections::HashSet<&str> =
        record.evaluations.iter().map(|e| e.file.as_str()).collect();
    let with_code = published.rows.iter().filter(|r| !r.submission.is_empty());
    Some(PublishedSummary {
        file: published.file.clone(),
        rows: published.rows.len(),
        without_code: published.rows.len() - with_code.clone().count(),
        not_evaluated: with_code
            .filter(|r| !evaluated.contains(r.submission.as_str()))
            .count(),
        compared: comparisons.len(),
        systems,
        causes,
        geomeans: (!pairs.is_empty()).then(|| Geomeans {
            evaluations: pairs.len(),
            published: geomean(|p| p.0),
            kbench: geomean(|p| p.1),
        }),
        comparisons,
    })
}

/// A system's classes that hold any comparison, as `class N` joined by `, `.
pub fn class_counts(classes: &BTreeMap<&'static str, usize>) -> String {
    let counts: Vec<String> = Class::ALL
        .map(Class::as_str)
        .into_iter()
        .filter_map(|class| Some((class, *classes.get(class).filter(|n| **n > 0)?)))
        .map(|(class, n)| format!("{class} {n}"))
        .collect();
    counts.join(", ")
}

/// The console's lines on the published comparison: counts per system, causes, the slowest.
pub fn render(s: &PublishedSummary) -> String {
    let mut text = format!(
        "published ({}): {} row(s), {} without code, {} with code not evaluated in this run; \
         {} compared\n",
        s.file, s.rows, s.without_code, s.not_evaluated, s.compared
    );
    for (system, classes) in &s.systems {
        text.push_str(&format!(
            "  {system} ({} compared): {}\n",
            classes.values().sum::<usize>(),
            class_counts(classes)
        ));
    }
    if let Some(g) = &s.geomeans {
        text.push_str(&format!(
            "  geometric mean over the {} timed here with a published speedup: published {:.3}x, kbench {:.3}x\n",
            g.evaluations, g.published, g.kbench
        ));
    }
    if !s.causes.is_empty() {
        text.push_str("  wrong or not judged, main causes:\n");
        for c in &s.causes {
            text.push_str(&format!("  {:>5}  {}\n", c.count, c.cause));
        }
    }
    let mut slower: Vec<&Comparison> = s
        .comparisons
        .iter()
        .filter(|c| c.class == Class::Slower)
        .collect();
    let excess = |c: &Comparison| c.published_speedup.unwrap_or(0.0) / c.speedup.unwrap_or(1.0);
    slower.sort_by(|a, b| excess(b).total_cmp(&excess(a)));
    if !slower.is_empty() {
        text.push_str("  slower than published, most first:\n");
        for c in slower.iter().take(MAX_CAUSES) {
            text.push_str(&format!("    {} {}: {}\n", c.task, c.file, c.evidence));
        }
    }
    text
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::fixtures::{sample_evaluation, sample_record};

    /// A published row of `file` (task 1/19 unless the file names another).
    fn row(file: &str, speedup: Option<f64>, correct: Option<bool>) -> PublishedRow {
        let (level, problem_id) = match file {
            "level1/23_Softmax.py" => (1, 23),
            "level2/99_Missing.py" => (2, 99),
            _ => (1, 19),
        };
        PublishedRow {
            level,
            problem_id,
            submission: file.into(),
            correct,
            speedup,
            speedup_column: "score_default".into(),
            speedup_vs_compile: None,
            speedup_vs_compile_column: String::new(),
            other_speedups: String::new(),
            system: "cuda-l1".into(),
        }
    }

    /// How an evaluation was timed in a case of `classes_say_what_became_of_each_claim`.
    #[derive(Clone, Copy)]
    enum Timed {
        No,
        Valid,
        /// Faster than the speed of light.
        Invalid,
    }

    /// The sample's passing honest.py (2.0x in [1.9, 2.1]) as `verdict` with `reason`.
    fn judged(
        verdict: Verdict,
        reason: &str,
        timed: Timed,
        kernelbench: Option<bool>,
    ) -> Evaluation {
        let mut e = sample_evaluation("honest.py");
        e.verdict = verdict;
        e.reason = reason.into();
        e.kernelbench_correct = kernelbench;
        match timed {
            Timed::No => e.timing = None,
            Timed::Valid => {}
            Timed::Invalid => e.timing.as_mut().unwrap().invalid = true,
        }
        e
    }

    #[test]
    fn classes_say_what_became_of_each_claim() {
        use Timed::{Invalid, No, Valid};
        use Verdict as V;
        const FIGURES: &str = "kbench 2.000x [1.900, 2.100]";
        const PYTORCH: &str = "correct, but no custom kernel (pure PyTorch)";
        const BREACH: &str = "trial 0: inputs.integrity: forward modified its input(s) [0]";
        const GRAPHS: &str = "forward: RuntimeError: accessing tensor output of CUDAGraphs";
        let cases: [(Evaluation, PublishedRow, Class, String); 20] = [
            // A kernel of its own: the claim inside or below the interval, or above it.
            (
                judged(V::Pass, "", Valid, Some(true)),
                row("x", Some(2.1), None),
                Class::Reproduced,
                format!("{FIGURES}, published 2.100x"),
            ),
            (
                judged(V::Pass, "", Valid, Some(true)),
                row("x", Some(0.5), Some(true)),
                Class::Reproduced,
                format!("{FIGURES}, published 0.500x"),
            ),
            (
                judged(V::Pass, "", Valid, Some(true)),
                row("x", Some(2.2), None),
                Class::Slower,
                format!("{FIGURES} below published 2.200x"),
            ),
            (
                judged(V::Pass, "", Valid, Some(true)),
                row("x", None, None),
                Class::NoPublishedSpeedup,
                format!("{FIGURES}, no published speedup"),
            ),
            (
                judged(V::Pass, "", Valid, Some(true)),
                row("x", Some(2.0), Some(false)),
                Class::PublishedIncorrect,
                "published as incorrect; here pass".into(),
            ),
            (
                judged(V::Pass, "", Invalid, Some(true)),
                row("x", Some(2.0), None),
                Class::NotJudged,
                "pass; timed faster than the speed of light".into(),
            ),
            (
                judged(V::Pass, "", No, Some(true)),
                row("x", Some(2.0), None),
                Class::NotJudged,
                "pass; not timed".into(),
            ),
            // PyTorch code, no kernel of its own.
            (
                judged(V::NoKernel, PYTORCH, Valid, Some(true)),
                row("x", Some(1.5), None),
                Class::ReproducedNoKernel,
                format!("{FIGURES}, published 1.500x; no_kernel: {PYTORCH}"),
            ),
            (
                judged(V::NoKernel, PYTORCH, Valid, Some(true)),
                row("x", Some(3.0), None),
                Class::Slower,
                format!("{FIGURES} below published 3.000x; no_kernel: {PYTORCH}"),
            ),
            // Correct under KernelBench's contract only.
            (
                judged(V::Contract, BREACH, Valid, Some(true)),
                row("x", Some(2.0), None),
                Class::ReproducedContract,
                format!("{FIGURES}, published 2.000x; contract: {BREACH}"),
            ),
            (
                judged(V::Contract, BREACH, Valid, None),
                row("x", Some(4.0), None),
                Class::Slower,
                format!("{FIGURES} below published 4.000x; contract: {BREACH}"),
            ),
            (
                judged(V::Contract, GRAPHS, No, None),
                row("x", Some(2.0), None),
                Class::NotJudged,
                format!("contract: {GRAPHS}; not timed"),
            ),
            (
                judged(V::Contract, BREACH, Valid, Some(false)),
                row("x", Some(2.0), None),
                Class::Wrong,
                format!("contract: {BREACH}; KernelBench's rule fails it too"),
            ),
            // Wrong, whatever was published.
            (
                judged(
                    V::Incorrect,
                    "trial 0: output 0 differs\nmore",
                    No,
                    Some(false),
                ),
                row("x", Some(3.0), None),
                Class::Wrong,
                "incorrect: trial 0: output 0 differs".into(),
            ),
            (
                judged(V::Cheat, "outputs.exact_type: a LazyMatmul", No, None),
                row("x", Some(3.0), None),
                Class::Wrong,
                "cheat: outputs.exact_type: a LazyMatmul".into(),
            ),
            // Not judged on its merits.
            (
                judged(
                    V::Environment,
                    "environment: AT_DISPATCH on x.type()",
                    No,
                    None,
                ),
                row("x", Some(3.0), None),
                Class::NotJudged,
                "environment: environment: AT_DISPATCH on x.type()".into(),
            ),
            (
                judged(V::CompileError, "syntax error", No, None),
                row("x", Some(3.0), None),
                Class::NotJudged,
                "compile_error: syntax error".into(),
            ),
            (
                judged(V::RuntimeError, "forward: boom", No, Some(false)),
                row("x", Some(3.0), None),
                Class::NotJudged,
                "runtime_error: forward: boom".into(),
            ),
            (
                judged(V::Timeout, "no reply within 10 s", No, None),
                row("x", Some(3.0), None),
                Class::NotJudged,
                "timeout: no reply within 10 s".into(),
            ),
            (
                judged(V::Skipped, "the reference does not fit", No, None),
                row("x", Some(3.0), Some(false)),
                Class::NotJudged,
                "skipped: the reference does not fit".into(),
            ),
        ];
        for (e, row, class, evidence) in cases {
            let c = compare(&e, &row);
            assert_eq!(
                (c.class, c.evidence.as_str()),
                (class, evidence.as_str()),
                "{} {:?} against {:?}",
                e.verdict,
                e.reason,
                row.speedup
            );
        }
    }

    #[test]
    fn class_strings_match_serde() {
        for class in Class::ALL {
            assert_eq!(serde_json::to_value(class).unwrap(), class.as_str());
        }
    }

    /// The sample record compared with a published table covering most of its files.
    pub(crate) fn compared_record() -> RunRecord {
        let mut record = sample_record();
        record.published = Some(Published {
            file: "published.csv".into(),
            rows: vec![
                row("level1/19_ReLU/honest.py", Some(10.0), None),
                PublishedRow {
                    system: String::new(),
                    ..row("level1/19_ReLU/tiled.py", Some(1.0), None)
                },
                row("level1/19_ReLU/wrong, \"quoted\".py", Some(2.0), None),
                row("level1/23_Softmax.py", Some(2.0), None),
                row("level2/99_Missing.py", Some(2.0), None),
                row("", None, None),
            ],
        });
        record
    }

    #[test]
    fn the_summary_counts_classes_per_system_and_groups_causes() {
        let record = compared_record();
        let s = summarize(&record).unwrap();
        assert_eq!((s.rows, s.without_code, s.not_evaluated), (6, 1, 1));
        // The same path under another task is not the same submission.
        let mut other = record.clone();
        other.published.as_mut().unwrap().rows[0].problem_id = 20;
        assert_eq!(summarize(&other).unwrap().compared, 3);
        assert_eq!(s.compared, 4);
        let systems: Vec<&str> = s.systems.keys().map(String::as_str).collect();
        assert_eq!(systems, ["cuda-l1", UNNAMED]);
        let l1 = &s.systems["cuda-l1"];
        assert_eq!(l1.len(), Class::ALL.len());
        assert_eq!(
            (
                l1["slower"],
                l1["wrong"],
                l1["not_judged"],
                l1["reproduced"]
            ),
            (1, 1, 1, 0)
        );
        assert_eq!(s.systems[UNNAMED]["reproduced"], 1);
        assert_eq!(
            s.causes,
            [
                Cause {
                    count: 1,
                    cause: "incorrect: trial #: output # differs".into()
                },
                Cause {
                    count: 1,
                    cause: "timeout: no reply within # s".into()
                }
            ]
        );
        let g = s.geomeans.as_ref().unwrap();
        assert_eq!(g.evaluations, 2);
        assert!((g.published - 10f64.sqrt()).abs() < 1e-12);
        assert!((g.kbench - (2.0f64 * 1.25).sqrt()).abs() < 1e-12);
        let text = render(&s);
        assert!(
            text.contains("cuda-l1 (3 compared): slower 1, wrong 1, not_judged 1"),
            "{text}"
        );
        assert!(
            text.contains("kbench 2.000x [1.900, 2.100] below published 10.000x"),
            "{text}"
        );
        assert!(summarize(&sample_record()).is_none());
    }

    #[test]
    fn the_csv_round_trips_with_empty_cells() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("published.csv");
        let rows = vec![
            row("level1/19_ReLU.py", Some(1.5), Some(true)),
            row("", None, None),
        ];
        std::fs::write(&path, render_csv(&rows).unwrap()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("level,problem_id,submission,correct,speedup,"));
        assert!(
            text.contains("\n1,19,,,,score_default,,,,cuda-l1\n"),
            "{text}"
        );
        assert_eq!(read_csv(&path).unwrap().rows, rows);
        // A file written before the system was recorded still reads, with no system.
        let old = "level,problem_id,submission,correct,speedup,speedup_column,speedup_vs_compile,\
                   speedup_vs_compile_column,other_speedups\n1,19,level1/19_ReLU.py,,2.0,s,,,\n";
        std::fs::write(&path, old).unwrap();
        let read = read_csv(&path).unwrap();
        assert_eq!(
            (read.rows[0].speedup, read.rows[0].system.as_str()),
            (Some(2.0), "")
        );
        std::fs::write(&path, "level,problem_id\nx,1\n").unwrap();
        let err = read_csv(&path).unwrap_err().to_string();
        assert!(err.starts_with("read published results from"), "{err}");
    }

    #[test]
    fn console_and_csv_snapshots() {
        let record = compared_record();
        insta::assert_snapshot!("console", render(&summarize(&record).unwrap()));
        // results.csv's submission and published columns (others append columns of their own).
        let csv = crate::report::csv::render(&record).unwrap();
        let mut reader = csv::Reader::from_reader(csv.as_slice());
        let headers = reader.headers().unwrap().clone();
        let keep: Vec<usize> = (0..headers.len())
            .filter(|&i| headers[i] == *"submission" || headers[i].starts_with("published_"))
            .collect();
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(keep.iter().map(|&i| &headers[i])).unwrap();
        for r in reader.records() {
            let r = r.unwrap();
            w.write_record(keep.iter().map(|&i| &r[i])).unwrap();
        }
        insta::assert_snapshot!("csv", String::from_utf8(w.into_inner().unwrap()).unwrap());
    }
}
