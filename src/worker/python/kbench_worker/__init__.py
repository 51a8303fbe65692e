"""kbench's Python side: the compile, reference and candidate workers.

Shipped inside the kbench binary and written to its cache at run time. The reference worker
(trusted) imports task files only; the candidate and compile workers import submissions.
"""

PROTOCOL_VERSION = 1
