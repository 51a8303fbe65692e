# Can a CUDA IPC handle exported in one process be opened in another, under various confinements?
import os
import pickle
import sys
import time

import torch
from torch.multiprocessing import reductions

role, path = sys.argv[1], sys.argv[2]
if role == "export":
    t = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    rebuild, args = reductions.reduce_tensor(t)
    with open(path + ".tmp", "wb") as f:
        pickle.dump(args, f)
    os.rename(path + ".tmp", path)
    print("exporter pid", os.getpid(), "uid", os.getuid(), "euid", os.geteuid(), flush=True)
    time.sleep(20)
else:
    if os.environ.get("KBENCH_PROBE_EUID"):
        os.seteuid(int(os.environ["KBENCH_PROBE_EUID"]))  # root, acting as that uid
    if os.environ.get("KBENCH_PROBE_NONDUMP"):
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0, as kbench's trusted side
    for _ in range(400):
        if os.path.exists(path):
            break
        time.sleep(0.05)
    args = pickle.load(open(path, "rb"))
    try:
        t = reductions.rebuild_cuda_tensor(*args)
        torch.cuda.synchronize()
        print("IMPORT OK", float(t.sum()), "as uid", os.getuid(), "euid", os.geteuid(), flush=True)
    except Exception as e:
        print("IMPORT FAILED", type(e).__name__, str(e).splitlines()[0], flush=True)
