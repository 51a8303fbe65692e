"""Does the CPU a process runs on set how fast a host-bound forward goes? Run from the
repository root on a GPU machine:

    python3 benchmarks/host_placement.py TASK.py [TASK.py ...]

Prints the machine's NUMA nodes, then per task the median wall time of a forward (device
synchronized before and after) in fresh processes:
- sweep: one process that pins itself to each allowed CPU in turn (same process, its memory
  placed where it first ran), which separates the core from the process;
- fixed: processes pinned to one CPU from their start, which shows what differs between
  processes on the same core;
- free: unpinned processes, as kbench's workers ran, with the CPUs each was seen on.
"""

import glob
import os
import statistics
import subprocess
import sys
import time

CALLS = 30
SKIPPED = 5


def cpu_now():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def measure(model, inputs, seen):
    import torch

    walls = []
    with torch.no_grad():
        for _ in range(CALLS):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(*inputs)
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
            seen.add(cpu_now())
    return statistics.median(walls[SKIPPED:])


def child(mode, task_path):
    sys.path.insert(0, "src/worker/python")

    from kbench_worker.checks import runtime
    from kbench_worker.task import models
    from kbench_worker.task.inputs import load_task, make_inputs

    runtime.strict_fp32()
    task = load_task(task_path, {})
    model = models.build(task.Model, models.init_inputs(task), "cuda:0", "fp32")
    inputs = make_inputs(task, 7, "cuda:0", "fp32")
    seen = set()
    if mode == "sweep":
        for cpu in sorted(os.sched_getaffinity(0)):
            os.sched_setaffinity(0, {cpu})
            print(f"  sweep pid {os.getpid()} cpu {cpu:3d}: {measure(model, inputs, seen):8.3f} ms", flush=True)
    else:
        first = measure(model, inputs, seen)
        second = measure(model, inputs, seen)
        print(f"  {mode:5s} pid {os.getpid()}: {first:8.3f} {second:8.3f} ms on cpus {sorted(seen)}", flush=True)


def run(mode, task_path, cpu=None):
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    subprocess.run([sys.executable, __file__, "--child", mode, task_path], preexec_fn=pin, check=True)


def main():
    if sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    for node in sorted(glob.glob("/sys/devices/system/node/node[0-9]*")):
        with open(os.path.join(node, "cpulist")) as f:
            print(f"{os.path.basename(node)}: cpus {f.read().strip()}")
    print(f"allowed cpus: {sorted(os.sched_getaffinity(0))}", flush=True)
    cpus = sorted(os.sched_getaffinity(0))
    for task_path in sys.argv[1:]:
        print(task_path, flush=True)
        run("sweep", task_path)
        for cpu in (cpus[0], cpus[0], cpus[0], cpus[-1], cpus[-1]):
            run("fixed", task_path, cpu)
        for _ in range(4):
            run("free", task_path)


if __name__ == "__main__":
    main()
