"""The roles a worker process plays, one module each (`python -m kbench_worker ROLE` runs its
`run(channel)`): compile, reference, candidate, probe, inspect and ceilings; `static_check/` is
the check role, kept apart for needing the standard library only. `memo` is the reference
worker's outputs kept across a task's candidates.
"""
