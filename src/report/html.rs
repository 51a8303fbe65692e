//! report.html: one self-contained page for one or more runs: the environment and command, the
//! suite summary, five plots (inline SVG drawn by plotters; a sixth, the roofline, where the run
//! ran `--profile ncu`), and a sortable table of every
//! evaluation with links to its logs. No network at view time. Every string that comes from a
//! record (file names, reasons, versions) is escaped; the plots hold numbers and fixed words only.
//! The page is well-formed XML (XHTML syntax), so tests can parse it strictly.

use std::fmt::Write as _;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::published::{Class, PublishedSummary};
use crate::record::{Evaluation, RunRecord};
use crate::report::roofline;
use crate::report::summary::{self, RunSummary, Summary, WallTime};
use crate::stats::{self, Decision, Speedup};
use crate::verdict::Verdict;

/// One run on the page.
pub struct Run<'a> {
    pub record: &'a RunRecord,
    pub summary: &'a RunSummary,
    /// What the record's log paths (relative to the run folder) are prefixed with in links:
    /// empty when the page sits in the run folder, else the folder's path and a slash.
    pub base: String,
}

/// The ids of the plots every run section holds, in page order.
pub const PLOTS: [&str; 5] = ["speedup", "fast-p", "verdicts", "sol", "phases"];

const VERDICTS: [Verdict; 11] = [
    Verdict::Pass,
    Verdict::NoKernel,
    Verdict::Incorrect,
    Verdict::Contract,
    Verdict::Environment,
    Verdict::CompileError,
    Verdict::RuntimeError,
    Verdict::Timeout,
    Verdict::Crashed,
    Verdict::Cheat,
    Verdict::Skipped,
];

const LABELS: [Decision; 4] = [
    Decision::Faster,
    Decision::Same,
    Decision::Inconclusive,
    Decision::Slower,
];

/// Read at 1280 px: the run's facts side by side, the plots two to a row (each scales to its
/// cell), long reasons and paths wrapped inside their cells. Verdict and label colours key on
/// prefixed classes (`v-environment`, `l-faster`), so no other element can pick one up by name.
const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;\
max-width:1240px;margin:0 auto;padding:1em 1.5em;color:#222;line-height:1.4}\
h1{font-size:1.6em;margin:.3em 0}h2{font-size:1.3em;margin:1.5em 0 .5em;padding-bottom:.2em;\
border-bottom:1px solid #ddd}h3{font-size:1.05em;margin:1.2em 0 .4em}\
table{border-collapse:collapse;margin:.3em 0 1em;font-size:90%}td,th{border:1px solid #ddd;\
padding:3px 6px;text-align:left;vertical-align:top}th{background:#f4f4f4;font-weight:600}\
table.sortable th{cursor:pointer;position:sticky;top:0}\
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
table.evaluations,table.published{width:100%;font-size:85%}td.task{min-width:8em}\
td.file{min-width:10em}td.reason{min-width:12em}table.published td.reason{min-width:24em}td.task,td.file,td.reason,code{overflow-wrap:anywhere}\
td.verdict,td.label,td.ci,td.short{white-space:nowrap}\
td.logs a{display:block}code{white-space:pre-wrap}.wide{overflow-x:auto}\
.facts{display:grid;grid-template-columns:repeat(auto-fit,minmax(480px,1fr));gap:0 2em}\
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:1em}\
figure{margin:0}figure svg{width:100%;height:auto;border:1px solid #eee}\
figcaption{font-size:85%;color:#555}\
.v-pass,.v-no_kernel,.l-faster{color:#1a7f37}.v-incorrect,.v-contract,.v-environment,.v-cheat,\
.v-crashed,.v-runtime_error,.v-compile_error,.v-timeout,.l-slower{color:#c62828}";

/// Click a column head to sort by it (again to reverse); numbers sort as numbers, empty last.
/// Written without '<' and '&' so the page stays well-formed XML.
const SORT_JS: &str = "document.querySelectorAll('table.sortable th').forEach(function (th) {
  th.addEventListener('click', function () {
    var body = th.closest('table').tBodies[0];
    var col = Array.prototype.indexOf.call(th.parentNode.children, th);
    var dir = th.dataset.dir === 'asc' ? -1 : 1;
    th.dataset.dir = dir === 1 ? 'asc' : 'desc';
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[col].dataset.v, y = b.cells[col].dataset.v;
      var nx = parseFloat(x), ny = parseFloat(y);
      if (isNaN(nx) !== isNaN(ny)) { return isNaN(nx) ? 1 : -1; }
      return dir * (isNaN(nx) ? x.localeCompare(y) : nx - ny);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});";

/// Escape text for an element or a quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // XML 1.0 has no place for other control characters
            c if c.is_control() && !matches!(c, '\n' | '\t') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// The page for `runs`. The run id is a heading once: in its run's section, under the page's
/// own "kbench report".
pub fn render(runs: &[Run<'_>]) -> Result<String> {
    let mut page = String::new();
    let title = match runs {
        [one] => format!("kbench report: {}", one.record.run_id),
        _ => format!("kbench report: {} runs", runs.len()),
    };
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head>\
         <meta charset=\"utf-8\"/><title>{}</title><style>{STYLE}</style></head><body>\
         <h1>kbench report</h1>\n",
        escape(&title)
    );
    for (i, run) in runs.iter().enumerate() {
        section(&mut page, i, run)?;
    }
    let _ = writeln!(page, "<script>{SORT_JS}</script></body></html>");
    Ok(page)
}

fn section(page: &mut String, index: usize, run: &Run<'_>) -> Result<()> {
    let r = run.record;
    let _ = write!(
        page,
        "<section class=\"run\" id=\"run-{index}\"><h2>Run {}</h2>",
        escape(&r.run_id)
    );
    let command = if r.command.is_empty() {
        "(not recorded)".to_string()
    } else {
        r.command.join(" ")
    };
    let seed = r
        .config
        .seed
        .map_or("secret".to_string(), |s| s.to_string());
    page.push_str("<div class=\"facts\"><div><h3>Run</h3>");
    rows(
        page,
        "meta",
        &[
            ("kbench", r.kbench_version.clone()),
            ("started", r.started_at.clone()),
            ("command", command),
            ("config hash", r.config.hash()),
            ("mode", r.config.mode.clone()),
            ("device", r.config.device.clone()),
            ("precision", r.config.precision.clone()),
            ("seed", seed),
            ("tasks", r.config.tasks.clone()),
        ],
    );
    page.push_str("</div><div><h3>Environment</h3>");
    rows(page, "env", &environment(r));
    page.push_str("</div></div><h3>Summary</h3><div class=\"wide\">");
    summary_table(page, run.summary);
    page.push_str("</div>");
    if let Some(published) = &run.summary.published {
        page.push_str("<h3>Published claims</h3><div class=\"wide\">");
        published_tables(page, index, published);
        page.push_str("</div>");
    }
    page.push_str("<h3>Plots</h3><div class=\"plots\">");
    plots(page, index, run)?;
    if roofline::profiled(r) {
        roofline_figure(page, index, r)?;
    }
    page.push_str("</div><h3>Evaluations</h3><div class=\"wide\">");
    evaluation_table(page, index, run);
    page.push_str("</div>");
    if !r.unmatched.is_empty() {
        page.push_str("<h3>Files matching no task</h3><ul>");
        for u in &r.unmatched {
            let _ = write!(
                page,
                "<li><code>{}</code>: {}</li>",
                escape(&u.file),
                escape(&u.why)
            );
        }
        page.push_str("</ul>");
    }
    page.push_str("</section>\n");
    Ok(())
}

/// The run's plots, each an inline SVG figure with its caption.
fn plots(page: &mut String, index: usize, run: &Run<'_>) -> Result<()> {
    let r = run.record;
    let outcomes = summary::task_outcomes(r);
    let counted: Vec<Option<Speedup>> = outcomes
        .iter()
        .filter(|o| !o.degenerate)
        .map(|o| o.speedup().map(|(s, _)| s))
        .collect();
    let timed: Vec<&Evaluation> = r
        .evaluations
        .iter()
        .filter(|e| e.timing.is_some())
        .collect();
    let plots = [
        (
            plot(|a| speedup_plot(a, &timed))?,
            "Speedup of every timed evaluation (reference over candidate) with its 95 % \
             interval, sorted, on a log axis; colour: the label against the practical band.",
        ),
        (
            plot(|a| fast_p_plot(a, &counted))?,
            "fast_p over p: the share of counted tasks (not degenerate) with a passing result \
             faster than p; the band runs from intervals wholly above p to intervals reaching \
             above p.",
        ),
        (
            plot(|a| verdict_plot(a, &r.evaluations))?,
            "Verdicts per level (every evaluation).",
        ),
        (
            plot(|a| sol_plot(a, &timed))?,
            "%SOL (the task's speed of light over the candidate's median) against speedup; \
             empty without measured ceilings.",
        ),
        (
            plot(|a| phase_plot(a, &run.summary.wall_time))?,
            "Wall time by phase, summed over evaluations (worker start-up overlaps the \
             previous evaluation).",
        ),
    ];
    for (id, (svg, caption)) in PLOTS.iter().zip(plots) {
        let _ = write!(
            page,
            "<figure class=\"plot\" id=\"plot-{id}-{index}\">{svg}<figcaption>{caption}\
             </figcaption></figure>"
        );
    }
    Ok(())
}

/// `--profile ncu`'s roofline (`roofline`), drawn only for a run that profiled.
fn roofline_figure(page: &mut String, index: usize, r: &RunRecord) -> Result<()> {
    let points = roofline::points(r);
    let ceilings = r.environment.ceilings.as_ref();
    let svg = plot(|a| roofline::draw(a, &points, ceilings))?;
    let roofs = match ceilings {
        Some(_) => "under the roofs the run measured at start-up (copy bandwidth, GEMM rates)",
        None => "without roofs: the run measured no ceilings",
    };
    let _ = write!(
        page,
        "<figure class=\"plot\" id=\"plot-roofline-{index}\">{svg}<figcaption>Every kernel \
         Nsight Compute profiled (--profile ncu), candidates' and references', at its FLOPs \
         per DRAM byte and FLOP/s (tensor-core work not counted), {roofs}; {} kernel(s) \
         with no FLOP or no DRAM byte left out.</figcaption></figure>",
        points.left_out
    );
    Ok(())
}

fn rows(page: &mut String, class: &str, rows: &[(&str, String)]) {
    let _ = write!(page, "<table class=\"{class}\">");
    for (k, v) in rows {
        let _ = write!(
            page,
            "<tr><th>{}</th><td><code>{}</code></td></tr>",
            escape(k),
            escape(v)
        );
    }
    page.push_str("</table>");
}

fn environment(r: &RunRecord) -> Vec<(&'static str, String)> {
    let env = &r.environment;
    let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mut out = vec![
        ("os", env.os.clone()),
        ("python", or_none(&env.python)),
        ("torch", or_none(&env.torch)),
        ("CUDA (torch)", or_none(&env.torch_cuda)),
        ("triton", or_none(&env.triton)),
        ("driver", or_none(&env.driver)),
        ("cpu", or_none(&env.cpu)),
    ];
    for gpu in &env.gpus {
        let text = match gpu.as_object() {
            Some(fields) => fields
                .iter()
                .map(|(k, v)| format!("{k}: {}", v.as_str().map_or(v.to_string(), String::from)))
                .collect::<Vec<_>>()
                .join(", "),
            None => gpu.to_string(),
        };
        out.push(("gpu", text));
    }
    let clocks = |arm: fn(&crate::record::Timing) -> Option<f64>| {
        let mhz: Vec<f64> = r
            .evaluations
            .iter()
            .filter_map(|e| arm(e.timing.as_ref()?))
            .collect();
        (!mhz.is_empty()).then(|| format!("{:.0} MHz", stats::median(&mhz)))
    };
    out.push((
        "SM clock while timed (median, reference / candidate)",
        match (
            clocks(|t| t.reference_sm_mhz),
            clocks(|t| t.candidate_sm_mhz),
        ) {
            (Some(a), Some(b)) => format!("{a} / {b}"),
            _ => "not read (no NVML)".into(),
        },
    ));
    out
}

fn interval(s: &Option<Speedup>) -> String {
    s.map_or("-".into(), |s| {
        format!("{:.3} [{:.3}, {:.3}]", s.ratio, s.ci_low, s.ci_high)
    })
}

fn summary_table(page: &mut String, s: &RunSummary) {
    page.push_str(
        "<table class=\"summary\"><thead><tr><th>level</th><th>tasks</th><th>evaluated</th>\
         <th>correct</th><th>counted</th><th>geomean speedup [95 % CI]</th>",
    );
    for p in summary::FAST_P {
        let _ = write!(page, "<th>fast_{p} (CI)</th>");
    }
    page.push_str("</tr></thead><tbody>");
    for level in &s.levels {
        summary_row(page, level);
    }
    page.push_str("</tbody></table>");
}

fn summary_row(page: &mut String, l: &Summary) {
    let name = l.level.map_or("all".to_string(), |n| n.to_string());
    let _ = write!(
        page,
        "<tr><td>{name}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
        l.tasks,
        l.evaluated,
        l.correct,
        l.counted_tasks,
        interval(&l.geomean_speedup)
    );
    for p in summary::FAST_P {
        let cell = l.fast_p.iter().find(|f| f.p == p).map_or("-".into(), |f| {
            format!("{:.1} % ({:.1} %)", 100.0 * f.point, 100.0 * f.significant)
        });
        let _ = write!(page, "<td class=\"num\">{cell}</td>");
    }
    page.push_str("</tr>");
}

/// `--published`: per system that published the claims, the comparisons per class; then each
/// comparison with its class and evidence.
fn published_tables(page: &mut String, index: usize, p: &PublishedSummary) {
    let _ = write!(
        page,
        "<p><code>{}</code>: {} row(s), {} without code, {} with code not evaluated in this run; \
         {} compared.</p><table class=\"published-systems\"><thead><tr><th>system</th>\
         <th>compared</th>",
        escape(&p.file),
        p.rows,
        p.without_code,
        p.not_evaluated,
        p.compared
    );
    for class in Class::ALL {
        let _ = write!(page, "<th>{}</th>", class.as_str());
    }
    page.push_str("</tr></thead><tbody>");
    for (system, classes) in &p.systems {
        let _ = write!(
            page,
            "<tr><td>{}</td><td class=\"num\">{}</td>",
            escape(system),
            classes.values().sum::<usize>()
        );
        for class in Class::ALL {
            let n = classes.get(class.as_str()).copied().unwrap_or_default();
            let _ = write!(page, "<td class=\"num\">{n}</td>");
        }
        page.push_str("</tr>");
    }
    let _ = write!(
        page,
        "</tbody></table><table class=\"sortable published\" id=\"published-{index}\"><thead>\
         <tr><th>task</th><th>submission</th><th>system</th><th>verdict</th><th>class</th>\
         <th>evidence</th></tr></thead><tbody>"
    );
    for c in &p.comparisons {
        page.push_str("<tr class=\"comparison\">");
        // Long task and file names wrap, so the evidence keeps room to be read.
        let verdict = format!("short v-{}", c.verdict.as_str());
        for (class, v) in [
            ("task", c.task.as_str()),
            ("file", &c.file),
            ("short", &c.system),
            (&verdict, c.verdict.as_str()),
            ("short", c.class.as_str()),
            ("reason", &c.evidence),
        ] {
            let _ = write!(
                page,
                "<td class=\"{class}\" data-v=\"{v}\">{v}</td>",
                v = escape(v)
            );
        }
        page.push_str("</tr>");
    }
    page.push_str("</tbody></table>");
}

/// A link to a log the record names (relative to the run folder); anything else is shown as
/// text, so a record cannot point a link at another scheme or outside its folder. The link
/// reads as the log's role (`build`, `candidate`, ...) where its name holds the submission's
/// hash (`logs/<file>-<hash>.<role>.log`), the full name in its tooltip.
fn log_link(base: &str, path: &str, sha256: &str) -> String {
    let safe = !path.is_empty()
        && !path.starts_with('/')
        && !path.contains(':')
        && !path.contains('\\')
        && path.split('/').all(|c| c != "..");
    if !safe {
        return format!("<code>{}</code>", escape(path));
    }
    let mut href = base.to_string();
    for c in path.chars() {
        match c {
            '%' | '#' | '?' | ' ' | '"' | '\'' | '<' | '>' | '&' => {
                let mut b = [0u8; 4];
                for byte in c.encode_utf8(&mut b).bytes() {
                    let _ = write!(href, "%{byte:02X}");
                }
            }
            c => href.push(c),
        }
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    let tag = format!("-{}.", sha256.get(..8).unwrap_or(sha256));
    let role = name
        .split_once(&tag)
        .map_or(name, |(_, role)| role.trim_end_matches(".log"));
    format!(
        "<a href=\"{}\" title=\"{}\">{}</a>",
        escape(&href),
        escape(name),
        escape(role)
    )
}

fn evaluation_table(page: &mut String, index: usize, run: &Run<'_>) {
    let _ = write!(
        page,
        "<table class=\"sortable evaluations\" id=\"evaluations-{index}\"><thead><tr>\
         <th>task</th><th>submission</th><th>verdict</th><th>reason</th><th>speedup</th>\
         <th>95 % CI</th><th>label</th><th>%SOL</th><th>ref ms</th><th>kernel ms</th>\
         <th>flags</th><th>logs</th></tr></thead><tbody>"
    );
    for e in &run.record.evaluations {
        let t = e.timing.as_ref();
        let num = |v: Option<f64>, digits: usize| match v {
            Some(v) => format!("<td class=\"num\" data-v=\"{v}\">{v:.digits$}</td>"),
            None => "<td class=\"num\" data-v=\"\">-</td>".into(),
        };
        let text = |v: &str, class: &str| {
            format!(
                "<td class=\"{class}\" data-v=\"{v}\">{v}</td>",
                v = escape(v),
                class = escape(class)
            )
        };
        let ci = t.map_or(String::new(), |t| {
            format!("[{:.3}, {:.3}]", t.speedup_ci_low, t.speedup_ci_high)
        });
        let label = t.map_or("", |t| t.label.as_str());
        let mut logs: Vec<String> = e.build.iter().map(|b| b.log.clone()).collect();
        logs.extend(e.logs.iter().cloned());
        let links: Vec<String> = logs
            .iter()
            .map(|l| log_link(&run.base, l, &e.sha256))
            .collect();
        let _ = write!(
            page,
            "<tr class=\"evaluation\">{}{}{}{}{}{}{}{}{}{}{}<td class=\"logs\" data-v=\"\">{}</td></tr>",
            text(&e.label(), "task"),
            text(&e.file, "file"),
            text(e.verdict.as_str(), &format!("verdict v-{}", e.verdict.as_str())),
            text(&e.reason, "reason"),
            num(t.map(|t| t.speedup), 3),
            text(&ci, "ci"),
            text(label, &label_class(label)),
            num(t.and_then(|t| t.percent_sol), 1),
            num(t.map(|t| t.reference.median_ms), 4),
            num(t.map(|t| t.candidate.median_ms), 4),
            text(&e.task_flags.join(" "), "flags"),
            links.join(" ")
        );
    }
    page.push_str("</tbody></table>");
}

/// A label cell's classes: `label l-faster` and so on.
fn label_class(label: &str) -> String {
    if label.is_empty() {
        "label".into()
    } else {
        format!("label l-{label}")
    }
}

type Drawn = std::result::Result<(), Box<dyn std::error::Error>>;

/// One plot as an SVG string.
fn plot(draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Drawn) -> Result<String> {
    let mut svg = String::new();
    {
        let area = SVGBackend::with_string(&mut svg, (640, 400)).into_drawing_area();
        area.fill(&WHITE)
            .map_err(|e| Error::Other(format!("draw a plot: {e}")))?;
        draw(&area).map_err(|e| Error::Other(format!("draw a plot: {e}")))?;
        area.present()
            .map_err(|e| Error::Other(format!("draw a plot: {e}")))?;
    }
    Ok(svg)
}

fn label_colour(label: Decision) -> RGBColor {
    match label {
        Decision::Faster => RGBColor(26, 127, 55),
        Decision::Same => RGBColor(110, 110, 110),
        Decision::Inconclusive => RGBColor(230, 140, 0),
        Decision::Slower => RGBColor(198, 40, 40),
    }
}

fn verdict_colour(v: Verdict) -> RGBColor {
    match v {
        Verdict::Pass => RGBColor(26, 127, 55),
        Verdict::NoKernel => RGBColor(70, 150, 200),
        Verdict::Incorrect => RGBColor(198, 40, 40),
        Verdict::Contract => RGBColor(230, 90, 60),
        Verdict::Environment => RGBColor(120, 120, 60),
        Verdict::CompileError => RGBColor(230, 140, 0),
        Verdict::RuntimeError => RGBColor(200, 60, 160),
        Verdict::Timeout => RGBColor(140, 90, 40),
        Verdict::Crashed => RGBColor(30, 30, 30),
        Verdict::Cheat => RGBColor(110, 40, 170),
        Verdict::Skipped => RGBColor(180, 180, 180),
    }
}

/// The widest a log axis goes: an unbounded interval end (upstream's Fieller interval reports
/// f64::MAX) is drawn to the edge, and an infinite axis would never finish drawing.
const LOG_AXIS_LIMIT: f64 = 1e6;

/// A log axis range covering `values` (positive, finite, within `LOG_AXIS_LIMIT` either way),
/// with a margin; [0.5, 2] when empty.
fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| *v > 0.0)
        .map(|v| v.clamp(1.0 / LOG_AXIS_LIMIT, LOG_AXIS_LIMIT))
        .fold((1.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    (lo.min(0.5) / 1.2, hi.max(2.0) * 1.2)
}

/// A speedup, its interval and its label.
type Point = (f64, f64, f64, Decision);

fn speedup_plot(area: &DrawingArea<SVGBackend<'_>, Shift>, timed: &[&Evaluation]) -> Drawn {
    let mut points: Vec<Point> = timed
        .iter()
        .filter_map(|e| e.timing.as_ref())
        .filter(|t| t.speedup.is_finite() && t.speedup > 0.0)
        .map(|t| {
            let low = if t.speedup_ci_low > 0.0 {
                t.speedup_ci_low
            } else {
                t.speedup
            };
            (t.speedup, low, t.speedup_ci_high.max(t.speedup), t.label)
        })
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (lo, hi) = log_range(points.iter().flat_map(|p| [p.1, p.2]));
    // Ranks 1..=n; at most one tick per rank, so every tick is a whole rank.
    let ranks = points.len().max(1);
    let n = ranks as f64;
    let mut chart = ChartBuilder::on(area)
        .caption("Speedup per evaluation", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.5..n + 0.5, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_labels(ranks.min(10))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .x_desc("evaluations, ranked by speedup")
        .y_desc("speedup (log)")
        .draw()?;
    chart.draw_series(LineSeries::new(
        [(0.5, 1.0), (n + 0.5, 1.0)],
        BLACK.mix(0.5),
    ))?;
    for label in LABELS {
        let colour = label_colour(label);
        let these: Vec<(f64, &Point)> = points
            .iter()
            .enumerate()
            .filter(|(_, p)| p.3 == label)
            .map(|(i, p)| ((i + 1) as f64, p))
            .collect();
        chart.draw_series(
            these
                .iter()
                .map(|(x, p)| ErrorBar::new_vertical(*x, p.1, p.0, p.2, colour.stroke_width(1), 4)),
        )?;
        chart
            .draw_series(
                these
                    .iter()
                    .map(|(x, p)| Circle::new((*x, p.0), 3, colour.filled())),
            )?
            .label(label.as_str())
            .legend(move |(x, y)| Circle::new((x, y), 4, colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}

fn fast_p_plot(area: &DrawingArea<SVGBackend<'_>, Shift>, counted: &[Option<Speedup>]) -> Drawn {
    // Up to the largest interval end, where there is one (an unbounded end stops at the limit).
    let top = counted
        .iter()
        .flatten()
        .map(|s| s.ci_high)
        .filter(|v| !v.is_nan())
        .map(|v| v.min(LOG_AXIS_LIMIT))
        .fold(2.0f64, f64::max)
        * 1.1;
    let steps = 200;
    let curve: Vec<(f64, f64, f64, f64)> = (0..=steps)
        .filter_map(|i| {
            let p = top * f64::from(i) / f64::from(steps);
            let point = stats::fast_p(counted, p)?.point;
            let (low, high) = stats::fast_p_band(counted, p)?;
            Some((p, low, point, high))
        })
        .collect();
    let mut chart = ChartBuilder::on(area)
        .caption("fast_p", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..top, 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc("p (speedup threshold)")
        .y_desc("share of counted tasks")
        .draw()?;
    let colour = RGBColor(30, 90, 180);
    if !curve.is_empty() {
        let band: Vec<(f64, f64)> = curve
            .iter()
            .map(|c| (c.0, c.3))
            .chain(curve.iter().rev().map(|c| (c.0, c.1)))
            .collect();
        chart
            .draw_series([Polygon::new(band, colour.mix(0.2).filled())])?
            .label("interval band")
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 4), (x + 12, y + 4)], colour.mix(0.2).filled())
            });
    }
    chart
        .draw_series(LineSeries::new(
            curve.iter().map(|c| (c.0, c.2)),
            colour.stroke_width(2),
        ))?
        .label("point estimate")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 12, y)], colour.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}

fn verdict_plot(area: &DrawingArea<SVGBackend<'_>, Shift>, evals: &[Evaluation]) -> Drawn {
    let mut levels: Vec<u32> = evals.iter().map(|e| e.task.level).collect();
    levels.sort_unstable();
    levels.dedup();
    let count = |level: u32, v: Verdict| {
        evals
            .iter()
            .filter(|e| e.task.level == level && e.verdict == v)
            .count()
    };
    let most = levels
        .iter()
        .map(|&l| evals.iter().filter(|e| e.task.level == l).count())
        .max()
        .unwrap_or(0)
        .max(1);
    // Level i's bar stands at x = i + 1 on a plain axis with one tick per level (plotters'
    // segmented axis draws a one-level chart with bars of negative width).
    let n = levels.len().max(1);
    let half = (0.15 * n as f64).min(0.3);
    let names: Vec<String> = levels.iter().map(|l| format!("level {l}")).collect();
    let mut chart = ChartBuilder::on(area)
        .caption("Verdicts per level", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.5..n as f64 + 0.5, 0..most + most / 10 + 1)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|v| {
            let i = v.round() as usize;
            names.get(i.wrapping_sub(1)).cloned().unwrap_or_default()
        })
        .y_desc("evaluations")
        .draw()?;
    let mut base = vec![0usize; levels.len()];
    for v in VERDICTS {
        let colour = verdict_colour(v);
        let bars: Vec<Rectangle<(f64, usize)>> = levels
            .iter()
            .enumerate()
            .filter_map(|(i, &l)| {
                let c = count(l, v);
                let bottom = base[i];
                base[i] += c;
                let x = (i + 1) as f64;
                (c > 0).then(|| {
                    Rectangle::new(
                        [(x - half, bottom), (x + half, bottom + c)],
                        colour.filled(),
                    )
                })
            })
            .collect();
        if bars.is_empty() {
            continue;
        }
        chart
            .draw_series(bars)?
            .label(v.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}

fn sol_plot(area: &DrawingArea<SVGBackend<'_>, Shift>, timed: &[&Evaluation]) -> Drawn {
    let points: Vec<(f64, f64, Decision)> = timed
        .iter()
        .filter_map(|e| e.timing.as_ref())
        .filter_map(|t| Some((t.speedup, t.percent_sol?, t.label)))
        .filter(|p| p.0.is_finite() && p.0 > 0.0 && p.1.is_finite())
        .collect();
    let (lo, hi) = log_range(points.iter().map(|p| p.0));
    let top = points
        .iter()
        .map(|p| p.1.min(LOG_AXIS_LIMIT))
        .fold(100.0f64, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption("%SOL against speedup", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("speedup (log)")
        .y_desc("%SOL of the candidate")
        .draw()?;
    chart.draw_series(LineSeries::new([(lo, 100.0), (hi, 100.0)], BLACK.mix(0.5)))?;
    for label in LABELS {
        let colour = label_colour(label);
        chart
            .draw_series(
                points
                    .iter()
                    .filter(|p| p.2 == label)
                    .map(|p| Circle::new((p.0, p.1), 3, colour.filled())),
            )?
            .label(label.as_str())
            .legend(move |(x, y)| Circle::new((x, y), 4, colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}

fn phase_plot(area: &DrawingArea<SVGBackend<'_>, Shift>, w: &WallTime) -> Drawn {
    let phases = [
        ("builds", w.build_s),
        ("cached builds", w.build_cache_hit_s),
        ("worker start-up", w.worker_startup_s),
        ("load", w.load_s),
        ("correctness", w.correctness_s),
        ("timing", w.timing_s),
        ("after timing", w.after_timing_s),
    ];
    let most = phases.iter().map(|p| p.1).fold(1.0f64, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption("Wall time by phase", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d((0..phases.len() - 1).into_segmented(), 0.0..most)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => phases.get(*i).map_or("", |p| p.0).to_string(),
            _ => String::new(),
        })
        .y_desc("seconds")
        .draw()?;
    let colour = RGBColor(30, 90, 180);
    chart.draw_series(phases.iter().enumerate().map(|(i, p)| {
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), p.1),
            ],
            colour.filled(),
        );
        bar.set_margin(0, 0, 12, 12);
        bar
    }))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::sample_record;
    use quick_xml::events::{BytesStart, Event};

    type Element = (String, Vec<(String, String)>);

    fn element(e: &BytesStart<'_>) -> Element {
        let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
        let attrs = e
            .attributes()
            .map(|a| {
                let a = a.unwrap();
                (
                    String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                    a.unescape_value().unwrap().into_owned(),
                )
            })
            .collect();
        (name, attrs)
    }

    /// Parse the page strictly; return the start tags with their attributes, in order.
    fn elements(page: &str) -> Vec<Element> {
        let mut reader = quick_xml::Reader::from_str(page);
        let mut out = Vec::new();
        loop {
            match reader.read_event().expect("the page is well-formed XML") {
                Event::Start(e) | Event::Empty(e) => out.push(element(&e)),
                Event::Eof => break,
                _ => {}
            }
        }
        out
    }

    /// Every element named `tag` in `xml` with its text, trimmed.
    fn texts(xml: &str, tag: &str) -> Vec<(Element, String)> {
        let mut reader = quick_xml::Reader::from_str(xml);
        let mut out = Vec::new();
        let mut open = None;
        loop {
            match reader.read_event().expect("well-formed XML") {
                Event::Start(e) if e.name().as_ref() == tag.as_bytes() => open = Some(element(&e)),
                Event::Text(t) => {
                    if let Some(e) = open.take() {
                        out.push((e, t.decode().unwrap().trim().to_string()));
                    }
                }
                Event::Eof => break,
                _ => {}
            }
        }
        out
    }

    /// The SVG of plot `id` in the first run's section.
    fn svg_of<'a>(page: &'a str, id: &str) -> &'a str {
        let figure = page.find(&format!("id=\"plot-{id}-0\"")).unwrap();
        let start = figure + page[figure..].find("<svg").unwrap();
        let end = start + page[start..].find("</svg>").unwrap() + "</svg>".len();
        &page[start..end]
    }

    fn attr<'a>(e: &'a (String, Vec<(String, String)>), key: &str) -> Option<&'a str> {
        e.1.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    fn page_of(record: &RunRecord) -> String {
        let summary = summary::summarize_run(record);
        render(&[Run {
            record,
            summary: &summary,
            base: String::new(),
        }])
        .unwrap()
    }

    #[test]
    fn every_plot_and_every_evaluation_is_on_the_page() {
        let record = sample_record();
        let page = page_of(&record);
        let els = elements(&page);
        for id in PLOTS {
            let at = els
                .iter()
                .position(|e| e.0 == "figure" && attr(e, "id") == Some(&format!("plot-{id}-0")))
                .unwrap_or_else(|| panic!("plot {id} missing"));
            assert_eq!(els[at + 1].0, "svg", "plot {id} has no svg");
        }
        let rows: Vec<&str> = els
            .iter()
            .filter(|e| e.0 == "tr" && attr(e, "class") == Some("evaluation"))
            .map(|_| "row")
            .collect();
        assert_eq!(rows.len(), record.evaluations.len());
        // every submission file appears as a cell value, in record order
        let files: Vec<&str> = els
            .iter()
            .filter(|e| e.0 == "td" && attr(e, "class") == Some("file"))
            .filter_map(|e| attr(e, "data-v"))
            .collect();
        let expected: Vec<&str> = record.evaluations.iter().map(|e| e.file.as_str()).collect();
        assert_eq!(files, expected);
        // the speedup plot has one marker (radius 3) per timed evaluation, one legend entry
        // (radius 4) per label
        let timed = record
            .evaluations
            .iter()
            .filter(|e| e.timing.is_some())
            .count();
        let svg_start = page.find("id=\"plot-speedup-0\"").unwrap();
        let svg = &page[svg_start..svg_start + page[svg_start..].find("</svg>").unwrap()];
        assert_eq!(svg.matches("<circle").count(), 2 * timed + LABELS.len());
        assert_eq!(svg.matches("r=\"3\"").count(), timed);
        assert!(page.contains("kbench eval submissions/"));
        assert!(page.contains(&record.config.hash()));
    }

    /// With `--published`, the claims per system, then each comparison with its class and
    /// evidence (in a column kept wide: names wrap); the system's name is the import's, and
    /// escaped like any record string.
    #[test]
    fn published_claims_are_tabled_per_system() {
        let mut record = crate::published::tests::compared_record();
        record.published.as_mut().unwrap().rows[0].system = "<b>sys</b>".into();
        let page = page_of(&record);
        let els = elements(&page);
        assert!(!els.iter().any(|e| e.0 == "b"));
        let heads = |class: &str| {
            let start = page.find(&format!("<table class=\"{class}\"")).unwrap();
            let table = &page[start..start + page[start..].find("</table>").unwrap()];
            table.matches("<th>").count()
        };
        assert_eq!(heads("published-systems"), 2 + Class::ALL.len());
        assert_eq!(heads("sortable published"), 6);
        let compared = els
            .iter()
            .filter(|e| e.0 == "tr" && attr(e, "class") == Some("comparison"))
            .count();
        assert_eq!(compared, 4);
        // Names wrap and the evidence gets a column wide enough to read.
        let start = page.find("<table class=\"sortable published\"").unwrap();
        let rows = &page[start..start + page[start..].find("</table>").unwrap()];
        assert_eq!(rows.matches("<td class=\"reason\"").count(), 4);
        assert_eq!(rows.matches("<td class=\"task\"").count(), 4);
        for text in [
            "<td>&lt;b&gt;sys&lt;/b&gt;</td><td class=\"num\">1</td>",
            "<td>cuda-l1</td><td class=\"num\">2</td>",
            "<td>unnamed</td><td class=\"num\">1</td>",
            "kbench 2.000x [1.900, 2.100] below published 10.000x",
        ] {
            assert!(page.contains(text), "{text}");
        }
    }

    /// A one-level run with two timed evaluations: every plot draws, with no rectangle of
    /// negative size, a bar per verdict present and whole-number ticks where it counts.
    #[test]
    fn plots_of_a_small_one_level_run_are_sound() {
        let mut record = sample_record();
        record
            .evaluations
            .retain(|e| e.task.level == 1 && !e.file.ends_with("tiled.py"));
        let timed = record.evaluations.iter().filter(|e| e.timing.is_some());
        assert_eq!(timed.count(), 2);
        let page = page_of(&record);
        let number = |t: &(Element, String)| t.1.parse::<f64>().ok().map(|_| t.1.clone());
        for id in PLOTS {
            for rect in elements(svg_of(&page, id)).iter().filter(|e| e.0 == "rect") {
                for side in ["width", "height"] {
                    let v: f64 = attr(rect, side).unwrap().parse().unwrap();
                    assert!(v >= 0.0, "plot {id}: a rect of {side} {v}");
                }
            }
        }
        let verdicts = svg_of(&page, "verdicts");
        for v in record.evaluations.iter().map(|e| e.verdict) {
            let c = verdict_colour(v);
            let fill = format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
            let bar = elements(verdicts).into_iter().any(|e| {
                e.0 == "rect"
                    && attr(&e, "fill") == Some(&fill)
                    && attr(&e, "width").unwrap().parse::<f64>().unwrap() > 20.0
            });
            assert!(bar, "no bar for {}", v.as_str());
        }
        let labels = texts(verdicts, "text");
        assert!(labels.iter().any(|t| t.1 == "level 1"));
        let counts: Vec<String> = labels.iter().filter_map(number).collect();
        assert!(!counts.is_empty());
        assert!(
            counts.iter().all(|c| c.parse::<u64>().is_ok()),
            "{counts:?}"
        );
        // the rank axis: text centred under the plot; the log axis's labels are right-aligned
        let ranks: Vec<String> = texts(svg_of(&page, "speedup"), "text")
            .iter()
            .filter(|t| attr(&t.0, "text-anchor") == Some("middle"))
            .filter_map(number)
            .collect();
        assert_eq!(ranks, ["1", "2"]);
    }

    #[test]
    fn each_title_once_and_verdict_colours_only_on_verdict_cells() {
        let record = sample_record();
        let page = page_of(&record);
        let headings: Vec<String> = ["h1", "h2", "h3"]
            .iter()
            .flat_map(|h| texts(&page, h))
            .map(|t| t.1)
            .collect();
        let mut unique = headings.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), headings.len(), "{headings:?}");
        let with_id = headings.iter().filter(|h| h.contains(&record.run_id));
        assert_eq!(with_id.count(), 1, "{headings:?}");
        for v in VERDICTS {
            assert!(
                !STYLE.contains(&format!(".{}", v.as_str())),
                "{}",
                v.as_str()
            );
        }
        for e in elements(&page) {
            for class in attr(&e, "class").unwrap_or_default().split_whitespace() {
                assert!(
                    !VERDICTS.iter().any(|v| v.as_str() == class),
                    "{} carries the class {class}",
                    e.0
                );
                if class.starts_with("v-") {
                    assert_eq!(e.0, "td", "{class}");
                }
            }
        }
        let env = elements(&page)
            .into_iter()
            .find(|e| e.0 == "table" && attr(e, "class") == Some("env"));
        assert!(env.is_some());
    }

    #[test]
    fn record_strings_cannot_inject_markup() {
        let mut record = sample_record();
        let e = &mut record.evaluations[0];
        e.file = "level1/<script>alert(1)</script>.py".into();
        e.reason = "\"><img src=x onerror=alert(1)>".into();
        e.logs = vec![
            "javascript:alert(1)".into(),
            "../../etc/passwd".into(),
            "logs/a b#c.log".into(),
        ];
        record.run_id = "</title><script>x</script>".into();
        let page = page_of(&record);
        let els = elements(&page);
        // one script element: the page's own
        assert_eq!(els.iter().filter(|e| e.0 == "script").count(), 1);
        assert!(!els.iter().any(|e| e.0 == "img"));
        let hrefs: Vec<&str> = els
            .iter()
            .filter(|e| e.0 == "a")
            .filter_map(|e| attr(e, "href"))
            .collect();
        assert!(hrefs.contains(&"logs/a%20b%23c.log"), "{hrefs:?}");
        assert!(
            !hrefs.iter().any(|h| h.contains(':') || h.contains("..")),
            "{hrefs:?}"
        );
    }

    /// The roofline is drawn for a run that profiled (`--profile ncu`) and only for one: a run
    /// without it has the page it had before.
    #[test]
    fn a_profiled_run_gets_a_roofline_with_a_point_per_placed_kernel() {
        use crate::nsight::{Kernel, NcuProfile};
        let kernel = |own| Kernel {
            name: "k".into(),
            own,
            duration_ns: Some(1e6),
            flops: Some(1e9),
            dram_bytes: Some(1e8),
            ..Kernel::default()
        };
        let plain = page_of(&sample_record());
        assert!(!plain.contains("plot-roofline"));
        let mut record = sample_record();
        record.evaluations[0].ncu = Some(NcuProfile {
            candidate: vec![kernel(true), kernel(false)],
            reference: vec![kernel(false)],
        });
        let page = page_of(&record);
        let els = elements(&page);
        assert_eq!(els.iter().filter(|e| e.0 == "svg").count(), PLOTS.len() + 1);
        let svg = svg_of(&page, "roofline");
        // Three kernels and three legend markers.
        assert_eq!(svg.matches("<circle").count(), 6, "{svg}");
    }

    #[test]
    fn an_empty_run_still_draws_every_plot() {
        let mut record = sample_record();
        record.evaluations.clear();
        let page = page_of(&record);
        let els = elements(&page);
        assert_eq!(els.iter().filter(|e| e.0 == "svg").count(), PLOTS.len());
    }

    #[test]
    fn an_unbounded_interval_is_drawn_to_the_edge() {
        // --mode kernelbench's Fieller interval is [0, f64::MAX] when the ratio is unbounded.
        let mut record = sample_record();
        for e in &mut record.evaluations {
            if let Some(t) = e.timing.as_mut() {
                (t.speedup_ci_low, t.speedup_ci_high) = (0.0, f64::MAX);
            }
        }
        let els = elements(&page_of(&record));
        assert_eq!(els.iter().filter(|e| e.0 == "svg").count(), PLOTS.len());
        assert_eq!(
            log_range([0.0, f64::MAX, 3.0].into_iter()),
            (0.5 / 1.2, LOG_AXIS_LIMIT * 1.2)
        );
    }

    #[test]
    fn several_runs_get_a_section_each() {
        let a = sample_record();
        let b = sample_record();
        let (sa, sb) = (summary::summarize_run(&a), summary::summarize_run(&b));
        let page = render(&[
            Run {
                record: &a,
                summary: &sa,
                base: String::new(),
            },
            Run {
                record: &b,
                summary: &sb,
                base: "other/".into(),
            },
        ])
        .unwrap();
        let els = elements(&page);
        assert_eq!(els.iter().filter(|e| e.0 == "section").count(), 2);
        assert_eq!(els.iter().filter(|e| e.0 == "svg").count(), 2 * PLOTS.len());
    }
}
