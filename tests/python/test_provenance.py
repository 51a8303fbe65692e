"""`profile.library_output` (kbench_worker/checks/provenance.py): which outputs library ops alone made.

A kernel of the submission's own is played here by a NumPy write into memory an allocator handed
out: like a kernel launch, the dispatcher never sees it."""

import numpy as np
import pytest
import torch

from kbench_worker.checks import provenance

torch.manual_seed(0)
X = torch.randn(64, 32)
W = torch.randn(16, 32)
B = torch.randn(16)
POSITIVE = torch.rand(64, 32)


def own(fill, like):
    """A kernel of the submission's: ``fill(out)`` writes a fresh buffer shaped like ``like``."""
    out = torch.empty_like(like)
    fill(out.numpy())
    return out


def own_copy(t):
    return own(lambda o: o.__setitem__(Ellipsis, t.numpy()), t)


def own_bias_relu(y):
    return own(lambda o: o.__setitem__(Ellipsis, np.maximum(y.numpy() + B.numpy(), 0)), y)


def own_gemm():
    return own(lambda o: o.__setitem__(Ellipsis, X.numpy() @ W.numpy().T), torch.empty(64, 16))


def own_in_place(y):
    """A fused epilogue written into the library's GEMM result."""
    y.numpy()[...] = np.maximum(y.numpy() + B.numpy(), 0)
    return y


CASES = [
    # The loophole: the reference's work by the library under other names, and a trivial kernel.
    ("addmm and clamp_min_, then a copy of its own", lambda: own_copy(torch.addmm(B, X, W.t()).clamp_min_(0)), "fail"),
    ("a copy of the input first, then the library", lambda: torch.clamp_min(torch.addmm(B, own_copy(X), W.t()), 0), "fail"),
    ("a copy between library ops", lambda: torch.clamp_min(own_copy(torch.addmm(B, X, W.t())), 0), "fail"),
    ("a copy, then a library op that changes nothing", lambda: own_copy(torch.relu(X @ W.t() + B)).mul_(1), "fail"),
    ("pure library", lambda: torch.relu(X @ W.t() + B), "fail"),
    # Honest: a kernel of its own made part of the output.
    ("a library GEMM, its own bias and ReLU", lambda: own_bias_relu(X @ W.t()), "pass"),
    ("its own GEMM, the library's bias and ReLU", lambda: torch.relu(own_gemm() + B), "pass"),
    ("its own epilogue written into the library's result", lambda: own_in_place(X @ W.t()), "pass"),
    # A ReLU of positive values: its output is its input, nothing to judge.
    ("its own ReLU of positive inputs", lambda: own_copy(POSITIVE), "pass"),
    # A kernel that writes one value everywhere is not taken for a copy of a library fill.
    ("a zero fill of its own beside the library's", lambda: (torch.zeros(64, 16), own(lambda o: o.fill(0), torch.empty(64, 16)))[1], "pass"),
]


@pytest.mark.parametrize("name, call, outcome", CASES, ids=[c[0] for c in CASES])
def test_library_output_judges_who_made_the_output(name, call, outcome):
    traced = provenance.library_output(call, lambda: None)
    assert provenance.judge([traced])[0] == outcome, traced


def test_every_traced_call_must_be_library_work_to_fail():
    library = provenance.library_output(lambda: own_copy(torch.relu(X @ W.t())), lambda: None)
    own_work = provenance.library_output(lambda: own_bias_relu(X @ W.t()), lambda: None)
    assert provenance.judge([library, library])[0] == "fail"
    assert provenance.judge([library, own_work])[0] == "pass"
    outcome, evidence = provenance.judge([library])
    assert "aten.relu.default" in evidence and "changed none of it" in evidence


def test_a_tensor_written_behind_the_dispatcher_loses_its_provenance():
    trace = provenance.Trace()
    with trace:
        y = X @ W.t()
    assert trace.made_by(y) == "aten.mm.default"
    y.numpy()[0, 0] += 1.0
    assert trace.made_by(y) is None


def test_fingerprints_compare_bits_in_logical_order():
    t = torch.randn(8, 8)
    assert provenance.fingerprint(t) == provenance.fingerprint(t.clone())
    assert provenance.fingerprint(t.t().contiguous().t()) == provenance.fingerprint(t)  # layout aside
    assert provenance.fingerprint(t) != provenance.fingerprint(t.t())  # another order
    assert provenance.fingerprint(t) != provenance.fingerprint(t.double())
    negative_zero = torch.zeros(4)
    negative_zero[1] = -0.0
    assert provenance.fingerprint(negative_zero) != provenance.fingerprint(torch.zeros(4))
    assert provenance.fingerprint(torch.tensor([True, False])) != provenance.fingerprint(torch.tensor([False, True]))


def test_a_compiler_s_fake_tensors_alive_in_the_process_do_not_stop_the_trace():
    """torch.compile leaves fake tensors alive after it compiles; the trace skips them (no
    memory of their own) instead of raising, which had made the check skip, after minutes on
    a large task, in every process that compiled anything."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.ones(1000)
    assert provenance.fingerprint(fake) is None
    traced = provenance.library_output(lambda: own_copy(torch.addmm(B, X, W.t()).clamp_min_(0)), lambda: None)
    assert provenance.judge([traced])[0] == "fail", traced
    del fake
