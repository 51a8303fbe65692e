//! The Python files of one CUDA-L2 shape: the task (KernelBench format: a `Model` computing the
//! GEMM on fp16 operands in the layout the kernel reads) and the submission (a `ModelNew` that
//! builds the kernel's `.cu` as CUDA-L2's build script does and calls it as their harness does).

use super::source::{Facts, Layout};

/// The nvcc flags of CUDA-L2's build (`tools/utils.py`), but its `-I` paths (CUTLASS's come from
/// `extra_include_paths`) and the ptxas verbosity.
const NVCC_FLAGS: [&str; 9] = [
    "-O3",
    "-std=c++17",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "--use_fast_math",
];

/// The task's judging, read by kbench's reference worker: the output against the float64
/// product rounded to fp16, within a bound set by what fp32 accumulation gives at this K.
pub const JUDGE: &str = "KBENCH_JUDGE = \"fp32_accumulation\"";

/// The operands `forward` takes, in order, for a layout.
fn operands(layout: Layout) -> &'static [&'static str] {
    match layout {
        Layout::RowMajor => &["A", "B"],
        Layout::ColMajor => &["A", "B_t"],
        Layout::Both => &["A", "B", "B_t"],
    }
}

/// The task file of one shape.
pub fn task(shape: [u64; 3], gpu: &str, layout: Layout) -> String {
    let [m, n, k] = shape;
    let (doc, inputs, product) = match layout {
        Layout::RowMajor => (
            "B row-major (K x N)",
            "    return [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)]",
            "torch.matmul(A, B)",
        ),
        Layout::ColMajor => (
            "B column-major: given as its transpose B_t (N x K, row-major)",
            "    return [torch.randn(M, K, dtype=torch.float16), torch.randn(N, K, dtype=torch.float16)]",
            "torch.matmul(A, B_t.t())",
        ),
        Layout::Both => (
            "B in both layouts: B (K x N, row-major) and B_t (its transpose, N x K, row-major)",
            "    B = torch.randn(K, N, dtype=torch.float16)\n    return [torch.randn(M, K, dtype=torch.float16), B, B.t().contiguous()]",
            "torch.matmul(A, B)",
        ),
    };
    let b_k_by_n = match layout {
        Layout::RowMajor | Layout::Both => "B",
        Layout::ColMajor => "B_t.t()",
    };
    let args = operands(layout).join(", ");
    format!(
        r#""""CUDA-L2 HGEMM {m} x {n} x {k} ({gpu}_F32F16F16F32): C = A @ B in fp16 (fp32 accumulation).

A is M x K row-major; {doc}, the layout CUDA-L2's kernel for this shape reads. Written by
`kbench import cuda-l2`.
"""

import torch
import torch.nn as nn

M = {m}
N = {n}
K = {k}
# kbench judges the fp16 output against the float64 product rounded to fp16, within what fp32
# accumulation gives at this K (precision.fp32_accumulation in docs/checks.md).
{JUDGE}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {args}):
        return {product}


def kbench_fp16_accumulation({args}, rows=128):
    """The product's first rows with an fp16 accumulator (each k16 step's sum rounded to fp16):
    what precision.fp32_accumulation must tell fp32 accumulation from, on the same inputs."""
    a, b = A[:rows].float(), {b_k_by_n}.float()
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float16, device=a.device)
    for k0 in range(0, a.shape[1], 16):
        acc = (acc.float() + a[:, k0 : k0 + 16] @ b[k0 : k0 + 16]).half()
    return acc


def get_inputs():
{inputs}


def get_init_inputs():
    return []
"#
    )
}

/// `text` as a Python string literal: raw and triple-quoted where it can be, else escaped.
fn literal(text: &str) -> String {
    if !text.contains("'''") && !text.ends_with('\\') {
        format!("r'''{text}'''")
    } else {
        serde_json::to_string(text).expect("a string serializes")
    }
}

/// The arch flags for the GPU the kernels were written for (`--gpu`): the `a` variant on Hopper
/// (wgmma, TMA), as CUDA-L2 builds with TORCH_CUDA_ARCH_LIST=9.0a.
pub fn arch(gpu: &str) -> Option<&'static str> {
    match gpu {
        "h100" | "h200" | "h20" => Some("90a"),
        "a100" => Some("80"),
        "3090" => Some("86"),
        _ => None,
    }
}

/// The submission for one kernel: `code` built with `declaration` (the entry's C++ declaration,
/// from CUDA-L2's pybind glue) and called as CUDA-L2's harness calls it.
pub fn submission(
    shape: [u64; 3],
    gpu: &str,
    entry: &str,
    declaration: &str,
    facts: &Facts,
    code: &str,
) -> String {
    let preamble = preamble(shape, gpu, (entry, declaration), facts, code);
    format!(
        "{preamble}{CUTLASS_INCLUDE}{}",
        model_new(shape, gpu, facts)
    )
}

/// The submission's docstring, imports and constants: the shape, its padding, the entry, the
/// nvcc flags and the kernel's source.
fn preamble(
    [m, n, k]: [u64; 3],
    gpu: &str,
    (entry, declaration): (&str, &str),
    facts: &Facts,
    code: &str,
) -> String {
    let [pm, pn, pk] = facts.padding;
    let arch = arch(gpu).unwrap_or("90a");
    let mut flags: Vec<String> = NVCC_FLAGS.iter().map(|f| format!("{f:?}")).collect();
    flags.push(format!("\"-gencode=arch=compute_{arch},code=sm_{arch}\""));
    format!(
        r#""""CUDA-L2's kernel for the {m} x {n} x {k} HGEMM (kernels/{gpu}_F32F16F16F32/{m}_{n}_{k}.cu).

Built as CUDA-L2's build script builds it (its nvcc flags, CUTLASS's headers, sm_{arch}) and
called as its harness calls it: `{entry}(a, b, b_col_major, c)` with c written in place.
Specialized to its shape: any other is refused. Written by `kbench import cuda-l2`; the kernel's
source is CUDA-L2's, unchanged.

Static reading of the source (kbench import): accumulator {accumulator} ({evidence}); private
non-blocking stream: {stream}.
"""

import importlib.util
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

M = {m}
N = {n}
K = {k}
# Zeros CUDA-L2's harness adds to each dimension (to a multiple of the kernel's BM, BN, BK).
PAD_M = {pm}
PAD_N = {pn}
PAD_K = {pk}
ENTRY = "{entry}"
DECLARATION = "{declaration}"
NVCC_FLAGS = [
    {flags},
]
KERNEL = {kernel}


"#,
        accumulator = facts.accumulator.name(),
        evidence = if facts.accumulator_evidence.is_empty() {
            "no declaration recognised".to_string()
        } else {
            facts
                .accumulator_evidence
                .replace('"', "'")
                .replace('\\', "/")
        },
        stream = if facts.private_stream { "yes" } else { "no" },
        flags = flags.join(",\n    "),
        kernel = literal(code),
    )
}

/// Where the submission finds CUTLASS's headers (a function of its own, the same in every one).
const CUTLASS_INCLUDE: &str = r#"def cutlass_include():
    """CUTLASS's include folders: $CUTLASS_DIR (a CUTLASS checkout), else the headers the
    nvidia-cutlass package installs (cutlass_library/source; the package is not imported)."""
    root = os.environ.get("CUTLASS_DIR")
    if not root:
        spec = importlib.util.find_spec("cutlass_library")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(
                "CUTLASS headers not found: pip install --no-deps nvidia-cutlass==4.2.0.0, "
                "or set CUTLASS_DIR to a CUTLASS checkout"
            )
        root = os.path.join(list(spec.submodule_search_locations)[0], "source")
    return [os.path.join(root, "include"), os.path.join(root, "tools", "util", "include")]


"#;

/// The submission's `ModelNew`: the kernel built in its constructor, called in `forward` on
/// operands laid out (and padded) as CUDA-L2's harness hands them over.
fn model_new([m, n, k]: [u64; 3], gpu: &str, facts: &Facts) -> String {
    let ldflags = if facts.cublas { "[\"-lcublas\"]" } else { "[]" };
    let args = operands(facts.layout).join(", ");
    let shapes = match facts.layout {
        Layout::RowMajor => "(tuple(A.shape), tuple(B.shape)) != ((M, K), (K, N))",
        Layout::ColMajor => "(tuple(A.shape), tuple(B_t.shape)) != ((M, K), (N, K))",
        Layout::Both => {
            "(tuple(A.shape), tuple(B.shape), tuple(B_t.shape)) != ((M, K), (K, N), (N, K))"
        }
    };
    let unpack = match facts.layout {
        Layout::ColMajor if facts.padding != [0; 3] => "        B = None\n",
        _ => "",
    };
    let call = call(facts);
    format!(
        r#"class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        module = load_inline(
            name="cuda_l2_{gpu}_{m}_{n}_{k}",
            cpp_sources=DECLARATION,
            cuda_sources=KERNEL,
            functions=[ENTRY],
            extra_cflags=["-O3", "-std=c++17"],
            extra_cuda_cflags=NVCC_FLAGS,
            extra_ldflags={ldflags},
            extra_include_paths=cutlass_include(),
        )
        self.kernel = getattr(module, ENTRY)

    def forward(self, {args}):
        if {shapes}:
            raise ValueError(f"CUDA-L2's kernel is specialized to M, N, K = {{M}}, {{N}}, {{K}}")
{unpack}{call}
"#
    )
}

/// `forward`'s call of the kernel and its return.
fn call(facts: &Facts) -> String {
    // b (K x N row-major) and b_col_major (shape (K, N), the memory of B's transpose) as the
    // harness hands them over; the one the kernel does not read is a view of the right shape.
    let operands = match facts.layout {
        Layout::RowMajor => "a, b = A, B\n        b_col_major = B  # not read by this kernel",
        Layout::ColMajor => "a = A\n        b, b_col_major = B_t.t(), B_t.view(K, N)",
        Layout::Both => "a, b = A, B\n        b_col_major = B_t.view(K, N)",
    };
    if facts.padding == [0; 3] {
        format!(
            "        {operands}\n        c = torch.empty(M, N, dtype=torch.float16, device=A.device)\n        \
             self.kernel(a, b, b_col_major, c)\n        return c"
        )
    } else {
        "        # Zeros up to the kernel's tile, as CUDA-L2's harness pads before the call.\n        \
         a = torch.zeros(M + PAD_M, K + PAD_K, dtype=torch.float16, device=A.device)\n        \
         a[:M, :K] = A\n        \
         b = torch.zeros(K + PAD_K, N + PAD_N, dtype=torch.float16, device=A.device)\n        \
         b[:K, :N] = B if B is not None else B_t.t()\n        \
         b_col_major = b.t().contiguous().view(K + PAD_K, N + PAD_N)\n        \
         c = torch.empty(M + PAD_M, N + PAD_N, dtype=torch.float16, device=A.device)\n        \
         self.kernel(a, b, b_col_major, c)\n        \
         return c[:M, :N].contiguous()"
            .to_string()
    }
}
