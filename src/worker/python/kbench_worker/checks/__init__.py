"""The runtime checks: each module is a family of them (outputs, precision, integrity, provenance,
kernels, poison, process state, ...), by the check names its entries carry; `log` keeps a
request's entries. The candidate worker runs the checks on its own calls; the reference worker
compares what the candidate handed over (`correctness`, `float64`).
"""
