//! What a CUDA-L2 kernel's source says about itself, read without building it: which operand
//! layouts its entry function reads, the tile its harness pads the operands to, the accumulator
//! types it declares, and whether it launches on a stream of its own. A static reading: the
//! accumulator is a finding to put beside the verdict, never the verdict (the fp64 comparison
//! decides).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

/// Which copies of B the entry function reads (`b` is K x N row-major, `b_col_major` the same
/// matrix stored column-major).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    RowMajor,
    ColMajor,
    /// Both, or neither recognisably: the task hands over both.
    Both,
}

/// The accumulator types the source declares (for MMA fragments, atoms, instructions or a
/// CUTLASS `ElementAccumulator`-style alias).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accumulator {
    Fp32,
    Fp16,
    /// Both declared (several kernels in one file; which one runs is decided at run time).
    Mixed,
    /// None recognised.
    Unknown,
}

impl Accumulator {
    pub fn name(self) -> &'static str {
        match self {
            Accumulator::Fp32 => "fp32",
            Accumulator::Fp16 => "fp16",
            Accumulator::Mixed => "fp16+fp32",
            Accumulator::Unknown => "unknown",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Facts {
    pub layout: Layout,
    /// Rows and columns of zeros the upstream harness adds (M, N, K), from `BM|BN|BK = Int<..>`.
    pub padding: [u64; 3],
    pub accumulator: Accumulator,
    /// The first declaration that decided the accumulator (empty when unknown).
    pub accumulator_evidence: String,
    /// Creates a non-blocking stream (work the caller's stream does not wait for).
    pub private_stream: bool,
    /// Calls cuBLAS (needs `-lcublas`).
    pub cublas: bool,
    /// Needs the `a` variant of its architecture (wgmma, TMA, GMMA, setmaxnreg).
    pub arch_specific: bool,
}

static COMMENTS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)/\*.*?\*/|//[^\n]*").expect("regex"));
static TILE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(BM|BN|BK)\s*=\s*Int\s*<\s*(\d+)\s*>").expect("regex"));
const HALF: &str = r"(?:cutlass::half_t|half_t|__half|half)\b";
const FLOAT: &str = r"float\b";

/// The ways a source declares an accumulator of type `ty` (its pattern): declarations
/// (`using ElementAccumulator = T;`, `typedef T AccT;`, a wmma accumulator fragment of T), and
/// `atoms`, the CuTe MMA atoms and PTX instructions that accumulate in it.
fn accumulator(ty: &str, atoms: [&str; 3]) -> Vec<Regex> {
    [
        format!(r"\busing\s+\w*Acc\w*\s*=\s*{ty}"),
        format!(r"\btypedef\s+{ty}\s+\w*Acc\w*\s*;"),
        format!(r"fragment\s*<\s*(?:\w+::)*accumulator\s*,\s*\w+\s*,\s*\w+\s*,\s*\w+\s*,\s*{ty}"),
    ]
    .into_iter()
    .chain(atoms.map(String::from))
    .map(|p| Regex::new(&p).expect("regex"))
    .collect()
}

static FP16_ACC: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    accumulator(
        HALF,
        [
            // CuTe atoms: D, A, B, C types (SM80_16x8x16_F16F16F16F16_TN, SM90_64x64x16_F16F16F16_SS)
            r"\bSM\d+_\w*?_F16F16F16(?:F16)?_\w+",
            // PTX: mma.sync....f16.f16.f16.f16, wgmma....f16.f16.f16
            r"\bmma\.sync\.aligned\.\w+\.row\.col\.f16\.f16\.f16\.f16",
            r"\bwgmma\.mma_async\.sync\.aligned\.\w+\.f16\.f16\.f16",
        ],
    )
});
static FP32_ACC: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    accumulator(
        FLOAT,
        [
            r"\bSM\d+_\w*?_F32F16F16(?:F32)?_\w+",
            r"\bmma\.sync\.aligned\.\w+\.row\.col\.f32\.f16\.f16\.f32",
            r"\bwgmma\.mma_async\.sync\.aligned\.\w+\.f32\.f16\.f16",
        ],
    )
});
/// Checks of an operand's dtype, shape or device (`CHECK_TORCH_TENSOR_DTYPE(b, ...)`,
/// `TORCH_CHECK(b.is_cuda())`): not reads of its data.
static CHECKS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b\w*CHECK\w*\s*\([^;\n]*").expect("regex"));
static PRIVATE_STREAM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"cudaStreamNonBlocking").expect("regex"));
static CUBLAS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\bcublas\w*\(").expect("regex"));
static ARCH_SPECIFIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"wgmma|\bGMMA\b|SM90_TMA|cp\.async\.bulk|setmaxnreg|KernelTmaWarpSpecialized")
        .expect("regex")
});
/// A use of an operand that reads its data: its pointer taken, or the tensor handed on.
static DATA: &str = r"\s*(?:\.\s*(?:data_ptr|const_data_ptr|mutable_data_ptr|data)\b|[,)])";

/// The facts of `code`, a kernel file whose entry function is `entry`.
pub fn read(code: &str, entry: &str, shape: [u64; 3]) -> Facts {
    let code = COMMENTS.replace_all(code, " ");
    let body = with_macros(&code, entry_body(&code, entry).unwrap_or(&code));
    let body = CHECKS.replace_all(&body, " ");
    let reads = |name: &str| {
        Regex::new(&format!(r"\b{name}\b{DATA}"))
            .expect("regex")
            .is_match(&body)
    };
    let layout = match (reads("b"), reads("b_col_major")) {
        (true, false) => Layout::RowMajor,
        (false, true) => Layout::ColMajor,
        _ => Layout::Both,
    };
    let first = |patterns: &[Regex]| {
        patterns
            .iter()
            .find_map(|p| p.find(&code).map(|m| m.start()))
    };
    let (half, single) = (first(&FP16_ACC), first(&FP32_ACC));
    let accumulator = match (half, single) {
        (Some(_), Some(_)) => Accumulator::Mixed,
        (Some(_), None) => Accumulator::Fp16,
        (None, Some(_)) => Accumulator::Fp32,
        (None, None) => Accumulator::Unknown,
    };
    let evidence = [half, single]
        .into_iter()
        .flatten()
        .map(|at| code[at..].lines().next().unwrap_or("").trim().to_string())
        .collect::<Vec<_>>()
        .join(" | ");
    Facts {
        layout,
        padding: padding(&code, shape),
        accumulator,
        accumulator_evidence: evidence,
        private_stream: PRIVATE_STREAM.is_match(&code),
        cublas: CUBLAS.is_match(&code),
        arch_specific: ARCH_SPECIFIC.is_match(&code),
    }
}

/// The body of the function `entry` (its definition, not a declaration), braces included.
fn entry_body<'a>(code: &'a str, entry: &str) -> Option<&'a str> {
    let definition = Regex::new(&format!(r"\b{entry}\s*\([^;{{]*\)\s*\{{")).ok()?;
    let found = definition.find(code)?;
    let start = found.end() - 1;
    let mut depth = 0usize;
    for (i, c) in code[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&code[start..=start + i]);
                }
            }
            _ => {}
        }
    }
    None
}

static DEFINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^[ \t]*#[ \t]*define[ \t]+(\w+)((?:[^\n]*\\\n)*[^\n]*)").expect("regex")
});

/// `body` followed by the definitions of the macros it uses (and theirs): a launch through
/// `LAUNCH_...(...)` reads the operands the macro names.
fn with_macros(code: &str, body: &str) -> String {
    let macros: BTreeMap<&str, &str> = DEFINE
        .captures_iter(code)
        .map(|c| {
            (
                c.get(1).expect("group").as_str(),
                c.get(2).expect("group").as_str(),
            )
        })
        .collect();
    let mut text = body.to_string();
    let mut seen = BTreeSet::new();
    let word = Regex::new(r"\w+").expect("regex");
    let mut scanned = 0;
    while scanned < text.len() {
        let found: Vec<&str> = word
            .find_iter(&text[scanned..])
            .filter_map(|w| macros.get_key_value(w.as_str()).map(|(k, _)| *k))
            .filter(|name| seen.insert(*name))
            .collect();
        scanned = text.len();
        for name in found {
            text.push('\n');
            text.push_str(macros[name]);
        }
    }
    text
}

/// What the upstream harness pads each dimension by: up to a multiple of the tile its source
/// names (`BM = Int<128>`, the last of each), only when all three are named.
fn padding(code: &str, shape: [u64; 3]) -> [u64; 3] {
    let mut tile = [0u64; 3];
    for c in TILE.captures_iter(code) {
        let i = match &c[1] {
            "BM" => 0,
            "BN" => 1,
            _ => 2,
        };
        tile[i] = c[2].parse().unwrap_or(0);
    }
    if tile.contains(&0) {
        return [0; 3];
    }
    std::array::from_fn(|i| shape[i].div_ceil(tile[i]) * tile[i] - shape[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENTRY: &str = "cuda_l2_h100_fp32";

    fn kernel(body: &str, extra: &str) -> String {
        format!(
            "{extra}\nvoid {ENTRY}(torch::Tensor a, torch::Tensor b, torch::Tensor b_col_major, \
             torch::Tensor c);\nvoid {ENTRY}(torch::Tensor a, torch::Tensor b, \
             torch::Tensor b_col_major, torch::Tensor c) {{\n  {body}\n}}\n"
        )
    }

    #[test]
    fn layouts_are_the_operands_whose_data_the_entry_reads() {
        let cases = [
            ("int n = b.size(1); go(a.data_ptr(), b_col_major.data_ptr<at::Half>());", Layout::ColMajor),
            ("(void)b_col_major; auto* p = b.data_ptr<at::Half>();", Layout::RowMajor),
            ("go(raw(b_col_major)); int k = b.size(0);", Layout::ColMajor),
            ("go(b.data_ptr(), b_col_major.data_ptr());", Layout::Both),
            ("LAUNCH(3);", Layout::ColMajor),
            ("launch();", Layout::Both),
            ("CHECK_TORCH_TENSOR_DTYPE(b, torch::kHalf)\n  TORCH_CHECK(b.is_cuda(), x);\n  go(b_col_major);", Layout::ColMajor),
        ];
        for (body, want) in cases {
            let extra = "half* b = 0; use(b, b);\n#define LAUNCH(s) \\\n  go(s, \\\n     b_col_major.data_ptr())\n";
            let facts = read(&kernel(body, extra), ENTRY, [64; 3]);
            assert_eq!(facts.layout, want, "{body}");
        }
    }

    #[test]
    fn accumulators_are_read_from_declarations_atoms_and_instructions() {
        let cases = [
            (
                "using ElementAccumulator = cutlass::half_t;",
                Accumulator::Fp16,
            ),
            ("using ElemAcc = float;", Accumulator::Fp32),
            (
                "wmma::fragment<wmma::accumulator, 16, 16, 16, half> acc;",
                Accumulator::Fp16,
            ),
            (
                "fragment<accumulator,16,16,16,float> acc;",
                Accumulator::Fp32,
            ),
            (
                "using Atom = MMA_Atom<SM80_16x8x16_F16F16F16F16_TN>;",
                Accumulator::Fp16,
            ),
            (
                "using Atom = SM90_64x64x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>;",
                Accumulator::Fp32,
            ),
            (
                "asm(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 ...\");",
                Accumulator::Fp32,
            ),
            (
                "asm(\"wgmma.mma_async.sync.aligned.m64n128k16.f16.f16.f16 ...\");",
                Accumulator::Fp16,
            ),
            (
                "typedef float AccT; using ElementAccumulator = cutlass::half_t;",
                Accumulator::Mixed,
            ),
            (
                "// using ElementAccumulator = cutlass::half_t;\nint x;",
                Accumulator::Unknown,
            ),
        ];
        for (decl, want) in cases {
            let facts = read(&kernel("go(b_col_major);", decl), ENTRY, [64; 3]);
            assert_eq!(facts.accumulator, want, "{decl}");
            assert_eq!(
                facts.accumulator_evidence.is_empty(),
                want == Accumulator::Unknown
            );
        }
    }

    #[test]
    fn padding_follows_the_named_tile_and_streams_and_arch_are_seen() {
        let tiles = "auto BM = Int<128>{}; auto BN = Int<256>{}; auto BK = Int<32>{};";
        let facts = read(&kernel("go(b_col_major);", tiles), ENTRY, [64, 256, 48]);
        assert_eq!(facts.padding, [64, 0, 16]);
        let partial = read(
            &kernel("go(b_col_major);", "auto BM = Int<128>{};"),
            ENTRY,
            [64; 3],
        );
        assert_eq!(partial.padding, [0; 3]);
        assert!(!partial.private_stream && !partial.cublas && !partial.arch_specific);
        let busy = "cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); cublasHgemm(h); \
                    asm(\"wgmma.fence.sync.aligned;\");";
        let facts = read(&kernel("go(b_col_major);", busy), ENTRY, [64; 3]);
        assert!(facts.private_stream && facts.cublas && facts.arch_specific);
    }
}
