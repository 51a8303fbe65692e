//! NVIDIA Nsight Compute (`ncu`), as `--profile ncu` runs it: where it is (`find`), its command
//! line (`args`: a small fixed metric set, read only, only the call the worker brackets with
//! cudaProfilerStart and cudaProfilerStop), and the metrics of each kernel it profiled, read
//! from its CSV log (`parse`). Pure but for `find`; the stage that runs it is
//! `pipeline/ncu_profile.rs`.
//!
//! The log's format (`ncu --csv --print-units base`, the "details" page, Nsight Compute 2022 to
//! 2025): lines of its own first (`==PROF== Connected to process ...`), then a header
//! `"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",
//! "Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"` and one
//! row per kernel launch and metric, every field quoted, numbers with thousands separators
//! (`"53,261,312"`). Columns are found by name; a locale that writes a decimal comma is not read.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The metrics asked for, and what each becomes (`Kernel`). FLOPs are counted as Nsight
/// Compute's roofline counts them: executed add, multiply and fused multiply-add (two) thread
/// instructions in half, single and double precision; tensor-core work is not among them.
const DURATION: &str = "gpu__time_duration.sum";
const OCCUPANCY: &str = "sm__warps_active.avg.pct_of_peak_sustained_active";
const SM: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
const DRAM: &str = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
const BYTES: [&str; 2] = ["dram__bytes_read.sum", "dram__bytes_write.sum"];
/// Each FLOP counter and the operations one of its instructions does.
const FLOPS: [(&str, f64); 9] = [
    ("sm__sass_thread_inst_executed_op_hadd_pred_on.sum", 1.0),
    ("sm__sass_thread_inst_executed_op_hmul_pred_on.sum", 1.0),
    ("sm__sass_thread_inst_executed_op_hfma_pred_on.sum", 2.0),
    ("sm__sass_thread_inst_executed_op_fadd_pred_on.sum", 1.0),
    ("sm__sass_thread_inst_executed_op_fmul_pred_on.sum", 1.0),
    ("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 2.0),
    ("sm__sass_thread_inst_executed_op_dadd_pred_on.sum", 1.0),
    ("sm__sass_thread_inst_executed_op_dmul_pred_on.sum", 1.0),
    ("sm__sass_thread_inst_executed_op_dfma_pred_on.sum", 2.0),
];

/// The most kernel launches of one call the tool profiles (each costs its replay passes and the
/// tool's own set-up, so a model of thousands of launches would take an hour); later launches
/// are not profiled, and the check says so.
pub const MAX_LAUNCHES: usize = 500;

/// Nsight Compute's path: on PATH, else in `$CUDA_HOME/bin` or `/usr/local/cuda/bin`.
pub fn find() -> Option<PathBuf> {
    crate::cuda_tools::find("ncu")
}

/// The tool's options before the program it runs: its CSV log to `log` (the worker's stdout is
/// the protocol's), the fixed metric set, clocks left as they are (`--clock-control none`: the
/// GPU may be shared), no profiling outside the worker's bracketed call
/// (`--profile-from-start off`), every process the worker starts followed.
pub fn args(log: &Path) -> Vec<String> {
    let metrics: Vec<&str> = [DURATION, OCCUPANCY, SM, DRAM]
        .into_iter()
        .chain(BYTES)
        .chain(FLOPS.iter().map(|(m, _)| *m))
        .collect();
    let mut args: Vec<String> = [
        "--csv",
        "--print-units",
        "base",
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",
        "--launch-count",
    ]
    .map(String::from)
    .into();
    let (count, metrics) = (MAX_LAUNCHES.to_string(), metrics.join(","));
    let log = log.display().to_string();
    args.extend([count, "--metrics".into(), metrics, "--log-file".into(), log]);
    args
}

/// One profiled kernel launch: its name as the tool wrote it, and its figures (None where the
/// tool did not report one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    pub name: String,
    /// Whether it is a kernel of the submission's own (the candidate's; the reference has none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own: bool,
    pub duration_ns: Option<f64>,
    /// Achieved occupancy: active warps over the SM's maximum, in %.
    pub occupancy_pct: Option<f64>,
    /// SM and DRAM throughput as a share of peak, in %.
    pub sm_pct: Option<f64>,
    pub dram_pct: Option<f64>,
    /// Floating-point operations (non-tensor) and DRAM bytes read and written.
    pub flops: Option<f64>,
    pub dram_bytes: Option<f64>,
}

impl Kernel {
    /// FLOPs per DRAM byte, where both were counted and some byte moved.
    pub fn intensity(&self) -> Option<f64> {
        let bytes = self.dram_bytes.filter(|b| *b > 0.0)?;
        Some(self.flops? / bytes)
    }

    /// FLOPs per second achieved, where both were counted.
    pub fn flops_per_s(&self) -> Option<f64> {
        let ns = self.duration_ns.filter(|d| *d > 0.0)?;
        Some(self.flops? / (ns * 1e-9))
    }
}

/// Both arms' kernels as the tool measured them in one call each (`Evaluation::ncu`), in the
/// order they ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NcuProfile {
    pub candidate: Vec<Kernel>,
    pub reference: Vec<Kernel>,
}

/// One arm's kernels in one figure each (results.csv's `ncu_*` columns): the launches, their
/// summed duration in ms, occupancy and SM and DRAM throughput as duration-weighted means, and
/// the call's FLOPs over its DRAM bytes; None where no kernel reported the figure.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub launches: usize,
    pub own: usize,
    pub ms: Option<f64>,
    pub occupancy_pct: Option<f64>,
    pub sm_pct: Option<f64>,
    pub dram_pct: Option<f64>,
    pub flop_per_byte: Option<f64>,
}

pub fn summarize(kernels: &[Kernel]) -> Summary {
    let sum = |f: fn(&Kernel) -> Option<f64>| -> Option<f64> {
        kernels.iter().filter_map(f).reduce(|a, b| a + b)
    };
    let weighted = |f: fn(&Kernel) -> Option<f64>| -> Option<f64> {
        let pairs: Vec<(f64, f64)> = kernels
            .iter()
            .filter_map(|k| Some((f(k)?, k.duration_ns?)))
            .collect();
        let weight: f64 = pairs.iter().map(|p| p.1).sum();
        (weight > 0.0).then(|| pairs.iter().map(|(v, w)| v * w).sum::<f64>() / weight)
    };
    let bytes = sum(|k| k.dram_bytes).filter(|b| *b > 0.0);
    Summary {
        launches: kernels.len(),
        own: kernels.iter().filter(|k| k.own).count(),
        ms: sum(|k| k.duration_ns).map(|ns| ns * 1e-6),
        occupancy_pct: weighted(|k| k.occupancy_pct),
        sm_pct: weighted(|k| k.sm_pct),
        dram_pct: weighted(|k| k.dram_pct),
        flop_per_byte: bytes.and_then(|b| Some(sum(|k| k.flops)? / b)),
    }
}

/// The kernels of a log, in the order they were profiled (one per launch).
pub fn parse(log: &str) -> Vec<Kernel> {
    let Some(start) = log
        .lines()
        .position(|l| l.contains("\"Kernel Name\"") && l.contains("\"Metric Value\""))
    else {
        return Vec::new();
    };
    let table: String = log
        .lines()
        .skip(start)
        .filter(|l| l.starts_with('"'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(table.as_bytes());
    let Ok(header) = reader.headers().cloned() else {
        return Vec::new();
    };
    let col = |name: &str| header.iter().position(|h| h == name);
    let (Some(id), Some(kernel), Some(metric), Some(unit), Some(value)) = (
        col("ID"),
        col("Kernel Name"),
        col("Metric Name"),
        col("Metric Unit"),
        col("Metric Value"),
    ) else {
        return Vec::new();
    };
    let mut kernels: Vec<(String, Kernel)> = Vec::new();
    for row in reader.records().flatten() {
        let field = |i: usize| row.get(i).unwrap_or_default();
        if kernels.last().is_none_or(|(last, _)| last != field(id)) {
            let name = field(kernel).to_string();
            kernels.push((
                field(id).to_string(),
                Kernel {
                    name,
                    ..Kernel::default()
                },
            ));
        }
        if let (Some((_, k)), Some(v)) = (kernels.last_mut(), number(field(value))) {
            record(k, field(metric), scaled(v, field(unit)));
        }
    }
    kernels.into_iter().map(|(_, k)| k).collect()
}

/// A metric's value into the kernel's figure it counts toward.
fn record(k: &mut Kernel, metric: &str, v: f64) {
    let add = |slot: &mut Option<f64>, v: f64| *slot = Some(slot.unwrap_or(0.0) + v);
    match metric {
        DURATION => k.duration_ns = Some(v),
        OCCUPANCY => k.occupancy_pct = Some(v),
        SM => k.sm_pct = Some(v),
        DRAM => k.dram_pct = Some(v),
        m if BYTES.contains(&m) => add(&mut k.dram_bytes, v),
        m => {
            if let Some((_, ops)) = FLOPS.iter().find(|(f, _)| *f == m) {
                add(&mut k.flops, v * ops);
            }
        }
    }
}

/// A value as the tool prints it (`"53,261,312"`, `"117.34"`, `"n/a"`).
fn number(text: &str) -> Option<f64> {
    text.trim()
        .replace(',', "")
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
}

/// A value in its base unit: durations in ns, sizes in bytes (`--print-units base` already
/// writes these; other units are scaled should a version ignore it).
fn scaled(v: f64, unit: &str) -> f64 {
    let factor = match unit {
        "usecond" | "us" => 1e3,
        "msecond" | "ms" => 1e6,
        "second" | "s" => 1e9,
        "Kbyte" | "KB" => 1e3,
        "Mbyte" | "MB" => 1e6,
        "Gbyte" | "GB" => 1e9,
        _ => 1.0,
    };
    v * factor
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log as `ncu --csv --print-units base` writes it (the header and quoting as Nsight
    /// Compute's details page; the figures made up for the test).
    const LOG: &str = r#"==PROF== Connected to process 4242 (/venv/bin/python3.11)
==PROF== Profiling "relu_kernel" - 0: 0%....50%....100% - 9 passes
==PROF== Profiling "vectorized_elementwise_kernel" - 1: 0%....50%....100% - 9 passes
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.11","127.0.0.1","relu_kernel(const float *, float *, long)","1","7","(256, 1, 1)","(6250, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","6,400,000"
"0","4242","python3.11","127.0.0.1","relu_kernel(const float *, float *, long)","1","7","(256, 1, 1)","(6250, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","byte","6,400,000"
"0","4242","python3.11","127.0.0.1","relu_kernel(const float *, float *, long)","1","7","(256, 1, 1)","(6250, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","71.52"
"0","4242","python3.11","127.0.0.1","relu_kernel(const float *, float *, long)","1","7","(256, 1, 1)","(6250, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","6,336"
"0","4242","python3.11","127.0.0.1","relu_kernel(const float *, float *, long)","1","7","(256, 1, 1)","(6250, 1, 1)","0","9.0","Command line profiler metrics","sm__sass_thread_inst_executed_op_fadd_pred_on.sum","inst","0"
"0","4242","python3.11","127.0.0.1","relu_kernel(const float *, float *, long)","1","7","(256, 1, 1)","(6250, 1, 1)","0","9.0","Command line profiler metrics","sm__sass_thread_inst_executed_op_ffma_pred_on.sum","inst","1,600,000"
"0","4242","python3.11","127.0.0.1","relu_kernel(const float *, float *, long)","1","7","(256, 1, 1)","(6250, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","18.40"
"0","4242","python3.11","127.0.0.1","relu_kernel(const float *, float *, long)","1","7","(256, 1, 1)","(6250, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","81.07"
"1","4242","python3.11","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char *, 1>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","1.50"
"1","4242","python3.11","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char *, 1>>(int, T2, T3)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","n/a"
"#;

    #[test]
    fn each_launch_gets_its_figures_in_base_units() {
        let kernels = parse(LOG);
        assert_eq!(kernels.len(), 2);
        let relu = &kernels[0];
        assert_eq!(relu.name, "relu_kernel(const float *, float *, long)");
        assert_eq!(relu.duration_ns, Some(6336.0));
        assert_eq!(relu.dram_bytes, Some(12_800_000.0));
        assert_eq!(relu.flops, Some(3_200_000.0));
        assert_eq!(relu.occupancy_pct, Some(81.07));
        assert_eq!(relu.sm_pct, Some(18.4));
        assert_eq!(relu.dram_pct, Some(71.52));
        assert_eq!(relu.intensity(), Some(0.25));
        let fill = &kernels[1];
        assert_eq!(fill.duration_ns, Some(1500.0));
        // "n/a" is no figure; what was never reported stays None.
        assert_eq!(
            (fill.dram_bytes, fill.flops, fill.intensity()),
            (None, None, None)
        );
    }

    #[test]
    fn a_call_s_summary_weights_by_duration() {
        let kernels = parse(LOG);
        let s = summarize(&kernels);
        assert_eq!((s.launches, s.own), (2, 0));
        assert!((s.ms.unwrap() - 0.007836).abs() < 1e-12);
        // Only the kernel that reported occupancy weighs in it.
        assert_eq!(s.occupancy_pct, Some(81.07));
        assert_eq!(s.flop_per_byte, Some(0.25));
        assert_eq!(summarize(&[]), Summary::default());
    }

    #[test]
    fn a_log_without_a_table_has_no_kernels() {
        // (the log, why it has none)
        let cases = [
            ("", "empty"),
            (
                "==PROF== Connected to process 1\n==PROF== Disconnected\n",
                "nothing profiled",
            ),
            ("==ERROR== the profiler failed\n", "the tool's error"),
            ("\"ID\",\"Kernel Name\"\n\"0\",\"k\"\n", "no metric columns"),
        ];
        for (log, why) in cases {
            assert!(parse(log).is_empty(), "{why}");
        }
    }

    #[test]
    fn the_command_line_reads_only_the_bracketed_call_and_leaves_clocks_alone() {
        let args = args(Path::new("/x/ncu.csv"));
        for pair in [
            ["--clock-control", "none"],
            ["--profile-from-start", "off"],
            ["--print-units", "base"],
            ["--log-file", "/x/ncu.csv"],
            ["--launch-count", "500"],
        ] {
            assert!(args.windows(2).any(|w| w == pair), "{pair:?} in {args:?}");
        }
        let metrics = &args[args.iter().position(|a| a == "--metrics").unwrap() + 1];
        assert_eq!(metrics.split(',').count(), 4 + BYTES.len() + FLOPS.len());
    }
}
