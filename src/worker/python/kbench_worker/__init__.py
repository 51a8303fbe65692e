"""kbench's Python side: the compile, reference and candidate workers and the other roles.

Shipped inside the kbench binary and written to its cache at run time. The reference worker
(trusted) imports task files only; the candidate and compile workers import submissions.
The package is in wings: `roles/` (one module per worker role), `wire/` (the protocol, its
messages and errors, the outputs' transfer), `task/` (the task as both workers load, build and
feed it), `checks/` (the runtime checks), `timing/` (the timed samples) and `static_check/`.
"""
