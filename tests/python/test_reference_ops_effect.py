"""benchmarks/reference_ops_effect.py: `profile.reference_ops` replayed on a record's launches,
as kbench decides it (src/reference_ops.rs, src/verdict.rs)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("reference_ops_effect", ROOT / "benchmarks" / "reference_ops_effect.py")
effect = importlib.util.module_from_spec(spec)
spec.loader.exec_module(effect)

GEMM, ADD, RELU = "sm90_xmma_gemm", "elementwise<add>", "elementwise<clamp_min>"


def k(name, launches, ms, own=False):
    return {"name": name, "launches": launches, "ms": ms, "own": own}


REFERENCE = [k(GEMM, 1, 2.7), k(ADD, 1, 0.02), k(RELU, 1, 0.02)]


@pytest.mark.parametrize(
    "candidate, reference, turns",
    [
        # The reference's ops and a copy kernel of its own: 1 % of the time.
        ([k(GEMM, 1, 2.7), k(ADD, 1, 0.02), k(RELU, 1, 0.02), k("copy", 1, 0.03, True)], REFERENCE, True),
        # A fused epilogue replaces the add and the ReLU.
        ([k(GEMM, 1, 2.7), k("bias_relu", 1, 0.03, True)], REFERENCE, False),
        # One ReLU of three replaced: fewer launches of it.
        ([k(GEMM, 3, 2.7), k(RELU, 2, 0.02), k("relu", 1, 0.01, True)], [k(GEMM, 3, 2.7), k(RELU, 3, 0.03)], False),
        # Every launch, but its own kernels take most of the time.
        ([k(GEMM, 1, 2.7), k(ADD, 1, 0.02), k(RELU, 1, 0.02), k("slow", 1, 3.0, True)], REFERENCE, False),
        # A call under 20 µs is not judged.
        ([k(GEMM, 1, 0.01), k(ADD, 1, 0.001), k(RELU, 1, 0.001), k("copy", 1, 0.001, True)], REFERENCE, False),
        # A reference without launches.
        ([k(GEMM, 1, 2.7), k("copy", 1, 0.03, True)], [], False),
    ],
)
def test_replay(candidate, reference, turns):
    assert effect.replay({"reference": reference, "candidate": candidate})[0] is turns
