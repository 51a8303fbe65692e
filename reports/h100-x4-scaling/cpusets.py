"""One line per GPU: its share of this process's CPUs (an equal share each, disjoint), taken from
the CPUs local to the GPU first (/sys/bus/pci/devices/BUS/local_cpulist)."""

import os
import subprocess


def parse(text):
    """A CPU list as Linux writes it (0-15,32-47) as numbers."""
    cpus = []
    for part in text.strip().split(","):
        if "-" in part:
            first, last = part.split("-")
            cpus += range(int(first), int(last) + 1)
        elif part:
            cpus.append(int(part))
    return cpus


def local(bus):
    """The CPUs local to the GPU at PCI address ``bus`` (nvidia-smi's 00000000:00:06.0 form)."""
    domain, rest = bus.lower().split(":", 1)
    try:
        return parse(open(f"/sys/bus/pci/devices/{domain[-4:]}:{rest}/local_cpulist").read())
    except OSError:
        return []


allowed = sorted(os.sched_getaffinity(0))
query = ["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader"]
buses = subprocess.run(query, capture_output=True, text=True, check=True).stdout.split()
share = len(allowed) // len(buses)
taken = set()
for bus in buses:
    pick = [c for c in local(bus) if c in allowed and c not in taken][:share]
    pick += [c for c in allowed if c not in taken and c not in pick][: share - len(pick)]
    taken.update(pick)
    print(",".join(map(str, sorted(pick))))
