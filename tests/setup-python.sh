#!/usr/bin/env bash
# Create the project-local venv (.venv) holding kbench's pinned Python side. torch comes from
# PyPI, whose Linux wheel carries CUDA's libraries (about 4.7 GB installed) on a machine without a
# GPU too: one venv for both devices, from the index every machine reaches (README, "Set-up").
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
echo "setup-python: tests/requirements.txt into .venv (a fresh machine downloads torch with CUDA's libraries: minutes)"
started=$(date +%s)
.venv/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt
echo "setup-python: ready in $(( $(date +%s) - started )) s"
