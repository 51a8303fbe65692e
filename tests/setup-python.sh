#!/usr/bin/env bash
# Create the project-local venv (.venv) holding kbench's pinned Python side.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt
