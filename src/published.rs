//! Published results beside kbench's: `published.csv` (written by `kbench import`, read by
//! `kbench eval --published`), the per-evaluation classification against kbench's speedup
//! interval, and its summary (counts per class, the main causes of what did not reproduce).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::record::{Evaluation, RunRecord};
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

/// How a published result fared here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Passed here, and the published speedup lies inside or below kbench's interval.
    Reproduced,
    /// Passed here, but the published speedup lies above kbench's interval.
    Inflated,
    /// Failed here (any verdict but pass and skipped) or timed faster than the speed of light.
    NotReproduced,
    /// Passed here; the source published no speedup for it.
    NoPublishedSpeedup,
    /// The source itself published the kernel as incorrect: there is no claim to reproduce.
    PublishedIncorrect,
    /// kbench did not evaluate it (the verdict's reason says why).
    Skipped,
}

impl Class {
    pub const ALL: [Class; 6] = [
        Class::Reproduced,
        Class::Inflated,
        Class::NotReproduced,
        Class::NoPublishedSpeedup,
        Class::PublishedIncorrect,
        Class::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Reproduced => "reproduced",
            Class::Inflated => "inflated",
            Class::NotReproduced => "not_reproduced",
            Class::NoPublishedSpeedup => "no_published_speedup",
            Class::PublishedIncorrect => "published_incorrect",
            Class::Skipped => "skipped",
        }
    }
}

/// One evaluation against its published row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub task: String,
    pub file: String,
    pub verdict: Verdict,
    pub speedup: Option<f64>,
    pub speedup_ci_low: Option<f64>,
    pub speedup_ci_high: Option<f64>,
    pub published_speedup: Option<f64>,
    pub published_correct: Option<bool>,
    pub class: Class,
    /// Why it did not reproduce (the verdict and its reason's first line); empty otherwise.
    pub cause: String,
}

fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or_default()
}

pub fn compare(e: &Evaluation, row: &PublishedRow) -> Comparison {
    let timing = e.timing.as_ref();
    let failed = || format!("{}: {}", e.verdict, first_line(&e.reason));
    let (class, cause) = match (e.verdict, timing) {
        (Verdict::Skipped, _) => (Class::Skipped, failed()),
        _ if row.correct == Some(false) => (Class::PublishedIncorrect, String::new()),
        (Verdict::Pass, Some(t)) if t.invalid => (
            Class::NotReproduced,
            "pass: timed faster than the speed of light".into(),
        ),
        (Verdict::Pass, Some(t)) => match row.speedup {
            None => (Class::NoPublishedSpeedup, String::new()),
            Some(p) if p <= t.speedup_ci_high => (Class::Reproduced, String::new()),
            Some(_) => (Class::Inflated, String::new()),
        },
        (Verdict::Pass, None) => (Class::NotReproduced, "pass: not timed".into()),
        _ => (Class::NotReproduced, failed()),
    };
    Comparison {
        task: e.label(),
        file: e.file.clone(),
        verdict: e.verdict,
        speedup: timing.map(|t| t.speedup),
        speedup_ci_low: timing.map(|t| t.speedup_ci_low),
        speedup_ci_high: timing.map(|t| t.speedup_ci_high),
        published_speedup: row.speedup,
        published_correct: row.correct,
        class,
        cause,
    }
}

/// A group of evaluations that did not reproduce for the same cause.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cause {
    pub count: usize,
    /// The verdict and reason with numbers masked as `#`, so that one cause groups together.
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
    /// Comparisons per class, every class listed.
    pub classes: BTreeMap<&'static str, usize>,
    /// Causes of `not_reproduced`, most frequent first (at most `MAX_CAUSES`).
    pub causes: Vec<Cause>,
    /// Over the reproduced and inflated evaluations (those with both speedups).
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
    let mut classes: BTreeMap<&'static str, usize> =
        Class::ALL.iter().map(|c| (c.as_str(), 0)).collect();
    let mut causes: BTreeMap<String, usize> = BTreeMap::new();
    for c in &comparisons {
        *classes.entry(c.class.as_str()).or_default() += 1;
        if c.class == Class::NotReproduced {
            *causes.entry(mask_numbers(&c.cause)).or_default() += 1;
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
        .filter(|c| matches!(c.class, Class::Reproduced | Class::Inflated))
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
        classes,
        causes,
        geomeans: (!pairs.is_empty()).then(|| Geomeans {
            evaluations: pairs.len(),
            published: geomean(|p| p.0),
            kbench: geomean(|p| p.1),
        }),
        comparisons,
    })
}

/// The console's lines on the published comparison: counts, causes, the most inflated.
pub fn render(s: &PublishedSummary) -> String {
    let mut text = format!(
        "published ({}): {} row(s), {} without code, {} with code not evaluated in this run; \
         {} compared:",
        s.file, s.rows, s.without_code, s.not_evaluated, s.compared
    );
    for class in Class::ALL.map(Class::as_str) {
        match s.classes.get(class) {
            Some(n) if *n > 0 => text.push_str(&format!(" {class} {n},")),
            _ => {}
        }
    }
    if text.ends_with(',') {
        text.pop();
    }
    text.push('\n');
    if let Some(g) = &s.geomeans {
        text.push_str(&format!(
            "  geometric mean over the {} passing here with a published speedup: published {:.3}x, kbench {:.3}x\n",
            g.evaluations, g.published, g.kbench
        ));
    }
    if !s.causes.is_empty() {
        text.push_str("  not reproduced, main causes:\n");
        for c in &s.causes {
            text.push_str(&format!("  {:>5}  {}\n", c.count, c.cause));
        }
    }
    let mut inflated: Vec<&Comparison> = s
        .comparisons
        .iter()
        .filter(|c| c.class == Class::Inflated)
        .collect();
    let excess = |c: &Comparison| c.published_speedup.unwrap_or(0.0) / c.speedup.unwrap_or(1.0);
    inflated.sort_by(|a, b| excess(b).total_cmp(&excess(a)));
    if !inflated.is_empty() {
        text.push_str("  inflated, most first (published vs kbench [95% CI]):\n");
        for c in inflated.iter().take(MAX_CAUSES) {
            text.push_str(&format!(
                "    {} {}: {:.3}x vs {:.3}x [{:.3}, {:.3}]\n",
                c.task,
                c.file,
                c.published_speedup.unwrap_or(f64::NAN),
                c.speedup.unwrap_or(f64::NAN),
                c.speedup_ci_low.unwrap_or(f64::NAN),
                c.speedup_ci_high.unwrap_or(f64::NAN),
            ));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{sample_evaluation, sample_record};

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
        }
    }

    #[test]
    fn classes_follow_the_verdict_and_the_interval() {
        // honest.py: pass, 2.0x in [1.9, 2.1]
        let honest = sample_evaluation("honest.py");
        let class = |r: PublishedRow| compare(&honest, &r).class;
        assert_eq!(class(row("x", Some(2.1), None)), Class::Reproduced);
        assert_eq!(class(row("x", Some(0.5), Some(true))), Class::Reproduced);
        assert_eq!(class(row("x", Some(2.2), None)), Class::Inflated);
        assert_eq!(class(row("x", None, None)), Class::NoPublishedSpeedup);
        assert_eq!(
            class(row("x", Some(2.0), Some(false))),
            Class::PublishedIncorrect
        );
        let mut invalid = honest.clone();
        invalid.timing.as_mut().unwrap().invalid = true;
        let c = compare(&invalid, &row("x", Some(1.0), None));
        assert_eq!(c.class, Class::NotReproduced);
        assert!(c.cause.contains("speed of light"), "{}", c.cause);

        let wrong = compare(
            &sample_evaluation("quoted\".py"),
            &row("x", Some(3.0), None),
        );
        assert_eq!(wrong.class, Class::NotReproduced);
        assert_eq!(wrong.cause, "incorrect: trial 0: output 0 differs");
        let no_kernel = compare(&sample_evaluation("76_Gemm.py"), &row("x", Some(3.0), None));
        assert_eq!(
            (no_kernel.class, no_kernel.cause.as_str()),
            (Class::NotReproduced, "no_kernel: pure PyTorch")
        );
        let skipped = compare(&sample_evaluation("77_X.py"), &row("x", Some(3.0), None));
        assert_eq!(skipped.class, Class::Skipped);
    }

    /// The sample record compared with a published table covering most of its files.
    fn compared_record() -> RunRecord {
        let mut record = sample_record();
        record.published = Some(Published {
            file: "published.csv".into(),
            rows: vec![
                row("level1/19_ReLU/honest.py", Some(10.0), None),
                row("level1/19_ReLU/tiled.py", Some(1.0), None),
                row("level1/19_ReLU/wrong, \"quoted\".py", Some(2.0), None),
                row("level1/23_Softmax.py", Some(2.0), None),
                row("level2/99_Missing.py", Some(2.0), None),
                row("", None, None),
            ],
        });
        record
    }

    #[test]
    fn the_summary_counts_classes_and_groups_causes() {
        let record = compared_record();
        let s = summarize(&record).unwrap();
        assert_eq!((s.rows, s.without_code, s.not_evaluated), (6, 1, 1));
        // The same path under another task is not the same submission.
        let mut other = record.clone();
        other.published.as_mut().unwrap().rows[0].problem_id = 20;
        assert_eq!(summarize(&other).unwrap().compared, 3);
        assert_eq!(s.compared, 4);
        assert_eq!(s.classes["reproduced"], 1);
        assert_eq!(s.classes["inflated"], 1);
        assert_eq!(s.classes["not_reproduced"], 2);
        assert_eq!(s.classes["skipped"], 0);
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
            text.contains("reproduced 1, inflated 1, not_reproduced 2"),
            "{text}"
        );
        assert!(text.contains("10.000x vs 2.000x [1.900, 2.100]"), "{text}");
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
        assert!(text.contains("\n1,19,,,,score_default,,,\n"), "{text}");
        assert_eq!(read_csv(&path).unwrap().rows, rows);
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
