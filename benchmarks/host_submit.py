"""Host submission time of one task's forward: in a plain process, in the reference worker's
model, and in the candidate worker's model after each step kbench makes it take (load, trials,
parameter perturbation, timing set-up and a timed block, the profile). Run from the repository
root on a GPU machine, one process per role:

    for role in plain reference candidate; do python3 benchmarks/host_submit.py $role TASK.py; done

Prints, per step, the median time for the forward to return (submit) and to finish (wall).
It answers whether a worker's own state slows the host side of a task (the identity run's
host-bound networks). DEV=cpu runs it without a GPU.
"""

import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, "src/worker/python")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402,F401 - imported before the roles start, as the worker's __main__ does
import torch.profiler  # noqa: E402,F401

from kbench_worker.checks import runtime  # noqa: E402
from kbench_worker.roles import candidate, reference  # noqa: E402
from kbench_worker.task import models, params  # noqa: E402
from kbench_worker.task.inputs import load_task, make_inputs  # noqa: E402
from kbench_worker.timing import modes  # noqa: E402

DEV = os.environ.get("DEV", "cuda:0")
CALLS = 40
SKIPPED = 5


def sync():
    if DEV != "cpu":
        torch.cuda.synchronize()


def host(role, model, task, label):
    inputs = make_inputs(task, 7, DEV, "fp32")
    submit, wall = [], []
    with torch.no_grad():
        for _ in range(CALLS):
            sync()
            t0 = time.perf_counter()
            model(*inputs)
            t1 = time.perf_counter()
            sync()
            submit.append((t1 - t0) * 1e3)
            wall.append((time.perf_counter() - t0) * 1e3)
    print(
        f"{role:10s} {label:28s} submit {statistics.median(submit[SKIPPED:]):7.3f} ms  wall {statistics.median(wall[SKIPPED:]):7.3f} ms",
        flush=True,
    )


def main():
    role, task_path = sys.argv[1], sys.argv[2]
    submission = os.path.join(tempfile.mkdtemp(), "identity.py")
    with open(task_path) as f, open(submission, "w") as out:
        out.write(f.read() + "\n\nModelNew = Model\n")
    req = dict(device=DEV, precision="fp32", atol=1e-4, rtol=1e-4, task=task_path, submission=submission)
    setup = {"cmd": "time_setup", "mode": "offline", "seed": 99}
    block = {"cmd": "time", "n": 10, "blocker_cycles": 20_000_000, "audits": 3}
    if role == "plain":
        task = load_task(task_path, {})
        model = models.build(task.Model, models.init_inputs(task), DEV, "fp32")
        host(role, model, task, "plain")
        runtime.strict_fp32()
        host(role, model, task, "plain+strict_fp32")
        runtime.warm_thread_pools(DEV)
        host(role, model, task, "plain+warm_pools")
    elif role == "reference":
        r = reference.Reference(req)
        host(role, r.model, r.task, "reference after load")
        modes.handle(r, setup, keep=False)
        host(role, r.model, r.task, "after time_setup")
        modes.handle(r, block, keep=False)
        host(role, r.model, r.task, "after timed block")
    elif role == "candidate":
        c = candidate.Candidate(req)
        host(role, c.model, c.task, "candidate after load")
        trial = dict(seed=11, forward_seed=12, deep=True, out=submission + ".out", transport="file")
        c.trial(trial)
        host(role, c.model, c.task, "after deep trial")
        c.trial(dict(trial, deep=False))
        host(role, c.model, c.task, "after trial")
        params.perturb(c.model, 5)
        host(role, c.model, c.task, "after perturb")
        c.time(setup)
        host(role, c.model, c.task, "after time_setup")
        c.time(block)
        host(role, c.model, c.task, "after timed block")
        c.profile(dict(trial, seed=13))
        host(role, c.model, c.task, "after profile")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
