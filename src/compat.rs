//! `--compat`: known toolchain drift rewritten in the staged copy of a submission (never the
//! user's file), so a kernel written for an older torch or CUDA builds on this one. Two cases,
//! each seen on CUDA-L1's published kernels:
//!
//! - `AT_DISPATCH_*(x.type(), ...)`: torch 2.11 removed the `Tensor::type()` overload the
//!   dispatch macros accepted; an argument `<expr>.type()` of the macro becomes
//!   `<expr>.scalar_type()`.
//! - `sm_XX` / `compute_XX` below the lowest architecture the installed nvcc supports (CUDA 13
//!   dropped sm_70): raised to it, where they follow `=`, `,`, `[` or a quote (`-arch=sm_70`,
//!   `arch=compute_70,code=sm_70`, `code=[sm_70]`, `["-arch", "sm_70"]`). Left alone without
//!   nvcc.

use std::collections::BTreeMap;

/// What `--compat` rewrites with.
#[derive(Clone, Debug, PartialEq)]
pub struct Compat {
    /// The lowest architecture the installed nvcc supports (`nvcc --list-gpu-arch`), e.g. 75;
    /// None without nvcc.
    pub lowest_arch: Option<u32>,
}

impl Compat {
    /// With the lowest architecture of the nvcc at `nvcc`, if it runs.
    pub fn new(nvcc: Option<&str>) -> Compat {
        let listed = nvcc.and_then(|nvcc| {
            std::process::Command::new(nvcc)
                .arg("--list-gpu-arch")
                .output()
                .ok()
        });
        Compat {
            lowest_arch: listed.and_then(|o| lowest_arch(&String::from_utf8_lossy(&o.stdout))),
        }
    }

    /// `source` rewritten, and each rewrite as `what (N places)`; no notes when nothing
    /// changed.
    pub fn rewrite(&self, source: &str) -> (String, Vec<String>) {
        let mut counts = BTreeMap::new();
        let text = rewrite_dispatch(source, &mut counts);
        let text = match self.lowest_arch {
            Some(lowest) => raise_arch(&text, lowest, &mut counts),
            None => text,
        };
        let notes = counts
            .into_iter()
            .map(|(what, n)| format!("{what} ({n} place{})", if n == 1 { "" } else { "s" }))
            .collect();
        (text, notes)
    }
}

/// The lowest of `nvcc --list-gpu-arch`'s `compute_XX` lines.
fn lowest_arch(listed: &str) -> Option<u32> {
    listed
        .lines()
        .filter_map(|l| l.trim().strip_prefix("compute_")?.parse().ok())
        .min()
}

/// Each top-level argument `<expr>.type()` of an `AT_DISPATCH_*(...)` macro as
/// `<expr>.scalar_type()`.
fn rewrite_dispatch(source: &str, counts: &mut BTreeMap<String, usize>) -> String {
    const MACRO: &str = "AT_DISPATCH_";
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(at) = rest.find(MACRO) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let name_end = from
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(from.len());
        let after_name = &from[name_end..];
        let open = after_name.len() - after_name.trim_start().len();
        if !after_name[open..].starts_with('(') {
            out.push_str(&from[..name_end]);
            rest = &from[name_end..];
            continue;
        }
        out.push_str(&from[..name_end + open + 1]);
        rest = &after_name[open + 1..];
        // The macro's arguments, split at commas outside brackets.
        let mut depth = 0usize;
        let mut arg_start = 0;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth > 0 => depth -= 1,
                ',' | ')' if depth == 0 => {
                    out.push_str(&dispatch_argument(&rest[arg_start..i], counts));
                    out.push(c);
                    arg_start = i + 1;
                    if c == ')' {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        if arg_start < end {
            out.push_str(&rest[arg_start..end]);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A dispatch macro's argument, `x.type()` (any spacing) as `x.scalar_type()`.
fn dispatch_argument(arg: &str, counts: &mut BTreeMap<String, usize>) -> String {
    let body = arg.trim_end();
    let call = body
        .strip_suffix(')')
        .map(str::trim_end)
        .and_then(|b| b.strip_suffix('('))
        .map(str::trim_end)
        .and_then(|b| b.strip_suffix("type"))
        .filter(|b| b.trim_end().ends_with('.') || b.trim_end().ends_with("->"));
    match call {
        Some(head) => {
            *counts
                .entry("AT_DISPATCH on .type() -> .scalar_type()".into())
                .or_default() += 1;
            format!("{head}scalar_type(){}", &arg[body.len()..])
        }
        None => arg.to_string(),
    }
}

/// `sm_XX` / `compute_XX` below `lowest`, after `=`, `,`, `[` or a quote, raised to it.
fn raise_arch(source: &str, lowest: u32, counts: &mut BTreeMap<String, usize>) -> String {
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < source.len() {
        let rest = &source[i..];
        let after_flag = out.ends_with(['=', ',', '[', '"', '\'']);
        let prefix = ["sm_", "compute_"]
            .into_iter()
            .find(|p| after_flag && rest.starts_with(p));
        if let Some(prefix) = prefix {
            let digits = &rest[prefix.len()..];
            let n = digits
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(digits.len());
            // A suffix such as sm_90a goes with the number.
            let end = n + digits[n..]
                .find(|c: char| !c.is_ascii_alphabetic())
                .unwrap_or(digits.len() - n);
            if let Ok(arch) = digits[..n].parse::<u32>() {
                if arch < lowest {
                    let was = &rest[..prefix.len() + end];
                    let now = format!("{prefix}{lowest}");
                    *counts.entry(format!("{was} -> {now}")).or_default() += 1;
                    out.push_str(&now);
                    i += was.len();
                    continue;
                }
            }
        }
        let c = rest.chars().next().expect("not at the end");
        out.push(c);
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(source: &str, lowest: Option<u32>) -> (String, Vec<String>) {
        Compat {
            lowest_arch: lowest,
        }
        .rewrite(source)
    }

    #[test]
    fn rewrites_the_known_drift_and_nothing_else() {
        let cases: &[(&str, Option<u32>, &str, &[&str])] = &[
            (
                r#"AT_DISPATCH_FLOATING_TYPES(x.type(), "relu", ([&] { f<scalar_t>(x.type()); }));"#,
                None,
                r#"AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu", ([&] { f<scalar_t>(x.type()); }));"#,
                &["AT_DISPATCH on .type() -> .scalar_type() (1 place)"],
            ),
            (
                "AT_DISPATCH_FLOATING_TYPES_AND_HALF (\n    input . type ( ) ,\"k\", [&]{})\n\
                 AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, w->type(), \"k\", [&]{})",
                None,
                "AT_DISPATCH_FLOATING_TYPES_AND_HALF (\n    input . scalar_type() ,\"k\", [&]{})\n\
                 AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, w->scalar_type(), \"k\", [&]{})",
                &["AT_DISPATCH on .type() -> .scalar_type() (2 places)"],
            ),
            (
                r#"AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu", [&] {}); auto t = x.type();"#,
                Some(75),
                r#"AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu", [&] {}); auto t = x.type();"#,
                &[],
            ),
            (
                r#"extra_cuda_cflags=["-O3", "-arch=sm_70", "-gencode", "arch=compute_70,code=sm_70", "-arch=sm_90"]"#,
                Some(75),
                r#"extra_cuda_cflags=["-O3", "-arch=sm_75", "-gencode", "arch=compute_75,code=sm_75", "-arch=sm_90"]"#,
                &["compute_70 -> compute_75 (1 place)", "sm_70 -> sm_75 (2 places)"],
            ),
            (
                r#"flags = "-O3 -arch=sm_60 --gpu-architecture=compute_61" + ['-arch', 'sm_70a']  # tuned on sm_70"#,
                Some(75),
                r#"flags = "-O3 -arch=sm_75 --gpu-architecture=compute_75" + ['-arch', 'sm_75']  # tuned on sm_70"#,
                &[
                    "compute_61 -> compute_75 (1 place)",
                    "sm_60 -> sm_75 (1 place)",
                    "sm_70a -> sm_75 (1 place)",
                ],
            ),
            (
                r#"extra_cuda_cflags=["-arch=sm_70"]"#,
                None,
                r#"extra_cuda_cflags=["-arch=sm_70"]"#,
                &[],
            ),
        ];
        for (source, lowest, expected, notes) in cases {
            let (text, got) = rewrite(source, *lowest);
            assert_eq!(&text, expected, "{source}");
            assert_eq!(got, *notes, "{source}");
        }
    }

    #[test]
    fn the_lowest_architecture_is_nvccs_lowest_compute() {
        let listed = "compute_75\ncompute_80\ncompute_86\ncompute_90\ncompute_100\n";
        assert_eq!(lowest_arch(listed), Some(75));
        assert_eq!(lowest_arch(""), None);
    }
}
