"""Timing in the workers: one block of samples per request, in the session's mode (`modes`:
`offline`, `upstream`, `server`), from inputs drawn by kbench's seeds (`seeds`), the outputs of
timed calls kept for the reference worker to check (`kept`), and the arms a worker times beside
its own model (`arms`).
"""
