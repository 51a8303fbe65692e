//! NVIDIA's compute-sanitizer, as `--sanitize` runs it: where the tool is (`find`), its four
//! tools and their command lines (`Tool`), and what it reported, read from its text log
//! (`parse`) and told apart by kernel: the submission's own kernels (the names its profiled call
//! attributed to its own build, `reference_ops::Launches::own`) from the libraries' (`judge`).
//! Pure but for `find`; the stage that runs it is `pipeline/sanitize.rs`.
//!
//! The log's format (compute-sanitizer's default text output, CUDA 12 and 13): each line begins
//! with `=========`; a report is a line at no indent after it (`Invalid __global__ write of size
//! 4 bytes`, `Error: Race reported between Write access at KERNEL+0x90 in FILE:LINE`,
//! `Uninitialized __global__ memory read of size 4 bytes`, `Barrier error detected...`), and its
//! details are the indented lines below it (`at KERNEL(ARGS)+0x8b0`, `by thread (0,0,0) in block
//! (3,0,0)`, `Address 0x... is out of bounds`, `and is 0 bytes after the nearest allocation ...`).

use std::path::{Path, PathBuf};

use crate::worker::CheckName;

/// One of compute-sanitizer's tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Memcheck,
    Racecheck,
    Initcheck,
    Synccheck,
}

impl Tool {
    /// Every tool, in the order `--sanitize` runs them.
    pub const ALL: [Tool; 4] = [
        Tool::Memcheck,
        Tool::Racecheck,
        Tool::Initcheck,
        Tool::Synccheck,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Memcheck => "memcheck",
            Tool::Racecheck => "racecheck",
            Tool::Initcheck => "initcheck",
            Tool::Synccheck => "synccheck",
        }
    }

    /// The check that carries the tool's finding.
    pub fn check(self) -> CheckName {
        match self {
            Tool::Memcheck => CheckName::SanitizerMemcheck,
            Tool::Racecheck => CheckName::SanitizerRacecheck,
            Tool::Initcheck => CheckName::SanitizerInitcheck,
            Tool::Synccheck => CheckName::SanitizerSynccheck,
        }
    }

    /// The tool's options before the program it runs: its log to `log` (where it writes, not
    /// the worker's stdout, which is the protocol's), at most `PRINT_LIMIT` reports, no host
    /// API errors (PyTorch's own probing calls fail by design), no backtraces.
    pub fn args(self, log: &Path) -> Vec<String> {
        let mut args: Vec<String> = ["--tool", self.name(), "--log-file"]
            .map(String::from)
            .into();
        args.push(log.display().to_string());
        args.extend(
            [
                "--print-limit",
                PRINT_LIMIT,
                "--report-api-errors",
                "no",
                "--show-backtrace",
                "no",
            ]
            .map(String::from),
        );
        args
    }
}

/// The most reports each tool prints.
const PRINT_LIMIT: &str = "20";

/// compute-sanitizer's path: on PATH, else in `$CUDA_HOME/bin` or `/usr/local/cuda/bin`.
pub fn find() -> Option<PathBuf> {
    crate::cuda_tools::find("compute-sanitizer")
}

/// How sure the tool is: racecheck's warnings are hazards the programming model allows
/// (warp-synchronous code); everything else it reports is an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One report of the log.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Its first line (`Invalid __global__ write of size 4 bytes`).
    pub what: String,
    pub severity: Severity,
    /// The kernel it names, as written (`relu_oob(float const*, float*, int)`), if any.
    pub kernel: Option<String>,
    /// The lines below it that say where (thread and block, address, allocation).
    pub details: Vec<String>,
}

impl Report {
    /// The report in one line: what, the kernel, and where.
    pub fn line(&self) -> String {
        let kernel = self
            .kernel
            .as_deref()
            .map_or(String::new(), |k| format!(" in {k}"));
        let details = if self.details.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.details.join("; "))
        };
        format!("{}{kernel}{details}", self.what)
    }
}

/// The lines of the log that are not reports: the banner, the summaries, the tool's notes on
/// itself and on the process (`Error: process didn't terminate successfully`: the worker is
/// ended once its trial is done).
const NOT_REPORTS: [&str; 9] = [
    "COMPUTE-SANITIZER",
    "ERROR SUMMARY",
    "RACECHECK SUMMARY",
    "LEAK SUMMARY",
    "Target application",
    "Warning: Maximum number",
    "Warning: Error buffer overflow",
    "Error: process",
    "Program hit",
];

/// The reports in a log (at most what a bounded read gave: a report cut off is kept as far as
/// it goes).
pub fn parse(log: &str) -> Vec<Report> {
    let mut reports: Vec<Report> = Vec::new();
    for line in log.lines() {
        let Some(body) = line.strip_prefix("=========") else {
            continue;
        };
        let body = body.strip_prefix(' ').unwrap_or(body);
        if body.trim().is_empty() {
            continue;
        }
        if !body.starts_with(' ') {
            let note = NOT_REPORTS.iter().any(|n| body.starts_with(n));
            if note || body.contains("errors were skipped") {
                continue;
            }
            reports.push(header(body));
            continue;
        }
        let Some(report) = reports.last_mut() else {
            continue;
        };
        detail(report, body.trim());
    }
    reports
}

/// A report from its first line; racecheck's names its kernel there.
fn header(body: &str) -> Report {
    let severity = if body.starts_with("Warning") || body.starts_with("WARN") {
        Severity::Warning
    } else {
        Severity::Error
    };
    let kernel = body
        .split_once(" access at ")
        .map(|(_, at)| kernel_of(at.trim_end_matches(|c| c != ')' && c != ']')));
    Report {
        what: body.split(" at ").next().unwrap_or(body).trim().to_string(),
        severity,
        kernel: kernel.filter(|k| !k.is_empty()),
        details: Vec::new(),
    }
}

/// The most detail lines a report keeps (where, not the backtrace).
const DETAILS: usize = 4;

fn detail(report: &mut Report, line: &str) {
    if let Some(at) = line.strip_prefix("at ") {
        if report.kernel.is_none() {
            report.kernel = Some(kernel_of(at)).filter(|k| !k.is_empty());
        }
        return;
    }
    let wanted = [
        "by thread",
        "Address",
        "Access",
        "and is",
        "and Write",
        "and Read",
    ];
    if wanted.iter().any(|w| line.starts_with(w)) && report.details.len() < DETAILS {
        report.details.push(line.to_string());
    }
}

/// The kernel a location names: `KERNEL(ARGS)+0x8b0 [in FILE:LINE]`, or `0x150 in
/// [FILE:LINE:]KERNEL(ARGS)`; the kernel with its arguments, its offset dropped.
fn kernel_of(at: &str) -> String {
    let at = at.trim();
    let at = match at.split_once(" in ") {
        // `0x150 in [FILE:LINE:]KERNEL`: the kernel follows the last `:` outside its arguments.
        Some((offset, rest)) if offset.starts_with("0x") => {
            let args_at = rest.find('(').unwrap_or(rest.len());
            match rest[..args_at]
                .rfind(".cu:")
                .or(rest[..args_at].rfind(".cuh:"))
            {
                Some(file_end) => rest[file_end..]
                    .splitn(3, ':')
                    .nth(2)
                    .unwrap_or(rest)
                    .to_string(),
                None => rest.to_string(),
            }
        }
        // `KERNEL(ARGS)+0x8b0 in FILE:LINE`
        Some((kernel, _)) => kernel.to_string(),
        None => at.to_string(),
    };
    let end = at.rfind("+0x").unwrap_or(at.len());
    at[..end].trim().to_string()
}

/// A kernel's name without its return type, namespaces, template arguments or arguments
/// (`void ns::relu<float>(float const*, float*)` is `relu`): how a report's kernel is matched
/// with the profiled call's, whose names the profiler writes in another style.
pub fn base_name(kernel: &str) -> String {
    let mut depth = 0i32;
    let mut end = kernel.len();
    for (i, c) in kernel.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth == 0 && i > 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let mut name = String::new();
    let mut depth = 0i32;
    for c in kernel[..end].chars() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ if depth == 0 => name.push(c),
            _ => {}
        }
    }
    let name = name.trim();
    let name = name.rsplit(' ').next().unwrap_or(name);
    name.rsplit("::").next().unwrap_or(name).to_string()
}

/// What a tool's reports say of the submission: its own kernels' errors (the first decides),
/// the libraries' reports (kept apart: not the submission's), and warnings.
#[derive(Debug, Default, PartialEq)]
pub struct Judged {
    pub own: Vec<Report>,
    pub library: Vec<Report>,
    pub warnings: Vec<Report>,
}

/// `reports` told apart by kernel: a report is the submission's when its kernel's base name is
/// one of `own` (the submission's kernels, as profiled).
pub fn judge(reports: Vec<Report>, own: &[String]) -> Judged {
    let own: Vec<String> = own.iter().map(|k| base_name(k)).collect();
    let mut judged = Judged::default();
    for report in reports {
        let mine = report
            .kernel
            .as_deref()
            .is_some_and(|k| own.contains(&base_name(k)));
        match (mine, report.severity) {
            (true, Severity::Error) => judged.own.push(report),
            (true, Severity::Warning) => judged.warnings.push(report),
            (false, _) => judged.library.push(report),
        }
    }
    judged
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Logs in the tool's format (the reports' shapes as compute-sanitizer prints them; the
    /// kernels are the planted fixtures' of tests/fixtures/gpu/level1/19_ReLU).
    pub(crate) const MEMCHECK: &str = "\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at relu_scratch_off_by_one(const float *, float *, float *, long, int)+0x1f0
=========     by thread (232,0,0) in block (3,0,0)
=========     Address 0x7f2c4e000fa0 is out of bounds
=========     and is 0 bytes after the nearest allocation at 0x7f2c4e000000 of size 4000 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: cudaLaunchKernel [0x10431d] in libcudart.so.13
=========
========= ERROR SUMMARY: 1 error
";
    const RACECHECK: &str = "\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at relu_shared_peek(const float *, float *, long)+0x1a0 in x.cu:12
=========     and Read access at relu_shared_peek(const float *, float *, long)+0x1c0 in x.cu:13 [224 hazards]
=========
========= Warning: Race reported between Write access at 0x570 in warp_reduce(float *)
=========     and Read access at 0x5a0 in warp_reduce(float *) [31 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
";
    const INITCHECK: &str = "\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at 0x150 in /tmp/build/uninit.cu:9:void relu_reads_empty<float>(const float *, const float *, float *, long)
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7fc406200400
========= Uninitialized __global__ memory read of size 4 bytes
=========     at void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T2, T3)+0x90
=========     by thread (1,0,0) in block (0,0,0)
=========     Address 0x7fc406200800
========= ERROR SUMMARY: 2 errors
";

    #[test]
    fn reports_are_read_with_their_kernel_and_where() {
        // (log, reports: (what, severity, kernel's base name, first detail))
        type Row = (&'static str, Severity, &'static str, Option<&'static str>);
        let cases: [(&str, Vec<Row>); 4] = [
            (
                MEMCHECK,
                vec![(
                    "Invalid __global__ write of size 4 bytes",
                    Severity::Error,
                    "relu_scratch_off_by_one",
                    Some("by thread (232,0,0) in block (3,0,0)"),
                )],
            ),
            (
                RACECHECK,
                vec![
                    (
                        "Error: Race reported between Write access",
                        Severity::Error,
                        "relu_shared_peek",
                        Some("and Read access at relu_shared_peek(const float *, float *, long)+0x1c0 in x.cu:13 [224 hazards]"),
                    ),
                    (
                        "Warning: Race reported between Write access",
                        Severity::Warning,
                        "warp_reduce",
                        Some("and Read access at 0x5a0 in warp_reduce(float *) [31 hazards]"),
                    ),
                ],
            ),
            (
                INITCHECK,
                vec![
                    (
                        "Uninitialized __global__ memory read of size 4 bytes",
                        Severity::Error,
                        "relu_reads_empty",
                        Some("by thread (0,0,0) in block (0,0,0)"),
                    ),
                    (
                        "Uninitialized __global__ memory read of size 4 bytes",
                        Severity::Error,
                        "vectorized_elementwise_kernel",
                        Some("by thread (1,0,0) in block (0,0,0)"),
                    ),
                ],
            ),
            (
                "========= COMPUTE-SANITIZER\n========= Error: process didn't terminate successfully\n\
                 ========= Warning: Error buffer overflow has been detected. Some records have been dropped\n\
                 ========= 3840 errors were skipped (error buffer overflow)\n\
                 ========= ERROR SUMMARY: 0 errors\n",
                vec![],
            ),
        ];
        for (log, expected) in cases {
            let got: Vec<Row> = parse(log)
                .iter()
                .map(|r| {
                    let kernel = base_name(r.kernel.as_deref().unwrap_or_default());
                    (
                        Box::leak(r.what.clone().into_boxed_str()) as &str,
                        r.severity,
                        Box::leak(kernel.into_boxed_str()) as &str,
                        r.details
                            .first()
                            .map(|d| Box::leak(d.clone().into_boxed_str()) as &str),
                    )
                })
                .collect();
            assert_eq!(got, expected, "{log}");
        }
    }

    #[test]
    fn kernels_match_by_base_name_across_styles() {
        for (a, b) in [
            (
                "relu_oob(float const*, float*, int)",
                "relu_oob(const float *, float *, int)",
            ),
            (
                "void relu_reads_empty<float>(float const*, float*, long)",
                "relu_reads_empty",
            ),
            ("void ns::inner::k<4, ns::F<float>>(int)", "k(int)"),
        ] {
            assert_eq!(base_name(a), base_name(b), "{a} / {b}");
        }
        assert_ne!(base_name("relu_oob(float*)"), base_name("relu(float*)"));
    }

    #[test]
    fn the_submission_s_errors_are_told_from_the_libraries_and_from_warnings() {
        let own = ["relu_shared_peek(float const*, float*, long)".to_string()];
        let judged = judge(parse(RACECHECK), &own);
        assert_eq!(judged.own.len(), 1);
        assert!(
            judged.own[0].line().contains("relu_shared_peek"),
            "{}",
            judged.own[0].line()
        );
        assert_eq!((judged.library.len(), judged.warnings.len()), (1, 0));
        let own = ["void relu_reads_empty<float>(float const*, float const*, float*, long)".into()];
        let judged = judge(parse(INITCHECK), &own);
        assert_eq!((judged.own.len(), judged.library.len()), (1, 1));
        // No kernel of its own profiled: every report is the libraries'.
        let judged = judge(parse(MEMCHECK), &[]);
        assert_eq!((judged.own.len(), judged.library.len()), (0, 1));
    }

    #[test]
    fn each_tool_logs_to_its_file_and_leaves_stdout_to_the_protocol() {
        let args = Tool::Racecheck.args(Path::new("/dev/shm/sanitizer.log"));
        assert_eq!(
            &args[..4],
            [
                "--tool",
                "racecheck",
                "--log-file",
                "/dev/shm/sanitizer.log"
            ]
        );
        assert!(args.windows(2).any(|w| w == ["--report-api-errors", "no"]));
        let names: Vec<_> = Tool::ALL.iter().map(|t| t.check().to_string()).collect();
        assert_eq!(
            names,
            [
                "sanitizer.memcheck",
                "sanitizer.racecheck",
                "sanitizer.initcheck",
                "sanitizer.synccheck"
            ]
        );
    }
}
