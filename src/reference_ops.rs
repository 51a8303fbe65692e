//! `profile.reference_ops`: whether a candidate's profiled call ran every kernel launch of the
//! reference's. After timing each worker profiles one call and reports, per kernel name, its
//! launches and device time (`Launches`); this compares the two by name, as multisets: a
//! reference kernel is covered where the candidate launched it at least as often. A submission
//! that runs the reference's own library ops (however it spells them) and adds a kernel of its
//! own covers every one; one whose kernel replaces some of the reference's ops (a fused epilogue
//! after a library GEMM, one ReLU of several) does not. The verdict weighs it (`verdict`).

use serde::{Deserialize, Serialize};

/// One kernel of a profiled call: its name as the profiler gives it (demangled; memory copies
/// and sets count too), its launches and device milliseconds, and whether it is one the
/// submission defines (`own`; never in the reference's).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Launches {
    pub name: String,
    pub launches: u32,
    pub ms: f64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub own: bool,
}

/// Both arms' profiled calls, as recorded (`Evaluation::profile`), the longest kernel first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Profiles {
    pub reference: Vec<Launches>,
    pub candidate: Vec<Launches>,
}

/// What the comparison found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReferenceOps {
    /// The reference's kernels (distinct names), the longest first, and its launches of them.
    pub kernels: Vec<String>,
    pub launches: u32,
    /// The reference's kernels the candidate launched fewer times: name, the reference's
    /// launches, the candidate's.
    pub missing: Vec<(String, u32, u32)>,
}

impl std::fmt::Display for ReferenceOps {
    /// The check's evidence: how many of the reference's launches the candidate's call ran, and
    /// the first kernel it launched fewer times.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short: u32 = self.missing.iter().map(|(_, r, c)| r - c).sum();
        write!(
            f,
            "the candidate's call ran {} of the reference's {} kernel launch(es) ({} kernel(s))",
            self.launches - short,
            self.launches,
            self.kernels.len()
        )?;
        match self.missing.first() {
            Some((name, r, c)) => write!(
                f,
                "; {} kernel(s) launched fewer times, e.g. {} ({c} of {r})",
                self.missing.len(),
                brief(name)
            ),
            None => Ok(()),
        }
    }
}

impl ReferenceOps {
    /// Whether the candidate ran every kernel launch of a reference that launched any.
    pub fn covered(&self) -> bool {
        self.launches > 0 && self.missing.is_empty()
    }
}

/// The reference's launches against the candidate's, by exact name: a name that differs in any
/// character (another GEMM tile, another elementwise functor) is another kernel, so a candidate
/// is only ever found to cover kernels it really launched.
pub fn compare(reference: &[Launches], candidate: &[Launches]) -> ReferenceOps {
    let launched = |name: &str| -> u32 {
        candidate
            .iter()
            .filter(|k| k.name == name)
            .map(|k| k.launches)
            .sum()
    };
    let mut ops = ReferenceOps::default();
    for k in reference.iter().filter(|k| k.launches > 0) {
        ops.kernels.push(k.name.clone());
        ops.launches += k.launches;
        let theirs = launched(&k.name);
        if theirs < k.launches {
            ops.missing.push((k.name.clone(), k.launches, theirs));
        }
    }
    ops
}

/// A kernel's name short enough for a reason: without `void `, at most `BRIEF` characters.
pub fn brief(name: &str) -> String {
    const BRIEF: usize = 60;
    let name = name.strip_prefix("void ").unwrap_or(name);
    match name.char_indices().nth(BRIEF) {
        Some((end, _)) => format!("{}…", &name[..end]),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(name: &str, launches: u32) -> Launches {
        Launches {
            name: name.into(),
            launches,
            ms: 1.0,
            own: false,
        }
    }

    const GEMM: &str = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32";
    const ADD: &str =
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>";
    const RELU: &str =
        "void at::native::vectorized_elementwise_kernel<4, clamp_min_scalar_kernel_impl>";

    #[test]
    fn launches_compare_by_name_and_count() {
        let reference = [k(GEMM, 1), k(ADD, 1), k(RELU, 1)];
        let cases: [(&str, Vec<Launches>, Vec<&str>); 5] = [
            (
                "the reference's ops and a copy of its own",
                vec![k(GEMM, 1), k(ADD, 1), k(RELU, 1), k("copy_kernel", 1)],
                vec![],
            ),
            (
                "a fused epilogue replaces the add and the ReLU",
                vec![k(GEMM, 1), k("bias_relu_kernel", 1)],
                vec![ADD, RELU],
            ),
            (
                "more launches than the reference's cover it",
                vec![k(GEMM, 2), k(ADD, 1), k(RELU, 3)],
                vec![],
            ),
            (
                "another GEMM kernel is another name",
                vec![
                    k("nvjet_tst_128x64_64x8_1x1_v_bz_TNT", 1),
                    k(ADD, 1),
                    k(RELU, 1),
                ],
                vec![GEMM],
            ),
            ("nothing launched", vec![], vec![GEMM, ADD, RELU]),
        ];
        for (what, candidate, missing) in cases {
            let ops = compare(&reference, &candidate);
            let names: Vec<&str> = ops.missing.iter().map(|m| m.0.as_str()).collect();
            assert_eq!(names, missing, "{what}");
            assert_eq!(ops.covered(), missing.is_empty(), "{what}");
            assert_eq!((ops.kernels.len(), ops.launches), (3, 3), "{what}");
        }
    }

    /// One ReLU of a network's three replaced: the reference launched it three times, the
    /// candidate twice, so the name alone (a set) would cover it and the count does not.
    #[test]
    fn a_kernel_launched_fewer_times_is_missing() {
        let ops = compare(&[k(GEMM, 3), k(RELU, 3)], &[k(GEMM, 3), k(RELU, 2)]);
        assert_eq!(ops.missing, vec![(RELU.to_string(), 3, 2)]);
        assert!(!ops.covered());
    }

    #[test]
    fn the_evidence_counts_the_launches_seen_and_names_one_missing() {
        let ops = compare(&[k(GEMM, 1), k(RELU, 3)], &[k(GEMM, 1), k(RELU, 1)]);
        assert_eq!(
            ops.to_string(),
            "the candidate's call ran 2 of the reference's 4 kernel launch(es) (2 kernel(s)); 1 kernel(s) launched fewer times, e.g. at::native::vectorized_elementwise_kernel<4, clamp_min_scala… (1 of 3)"
        );
        let all = compare(&[k(GEMM, 1)], &[k(GEMM, 1), k("copy_kernel", 1)]);
        assert_eq!(
            all.to_string(),
            "the candidate's call ran 1 of the reference's 1 kernel launch(es) (1 kernel(s))"
        );
    }

    #[test]
    fn a_reference_without_launches_is_never_covered() {
        let ops = compare(&[], &[k(GEMM, 1)]);
        assert!(!ops.covered());
        assert!(!compare(&[k(GEMM, 0)], &[k(GEMM, 1)]).covered());
    }

    #[test]
    fn brief_names_drop_void_and_stop_at_sixty_characters() {
        assert_eq!(brief("void relu_kernel(float*)"), "relu_kernel(float*)");
        let long = brief(ADD);
        assert_eq!(long.chars().count(), 61);
        assert!(long.starts_with("at::native::vectorized") && long.ends_with('…'));
    }
}
