#!/usr/bin/env bash
# CI: the shipped Kubernetes manifests (benchmarks/shards/k8s-shards.yaml,
# benchmarks/serve-cluster/k8s-serve.yaml) validated against Kubernetes' own schemas, strictly
# (no field the API does not know), by kubernetes-validate in a venv of its own under target/
# (a test tool only: the project's venv does not carry it). No cluster is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/k8s-validate
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q kubernetes-validate==1.37.0
fi
"$venv/bin/kubernetes-validate" --strict --kubernetes-version 1.32.0 \
  benchmarks/shards/k8s-shards.yaml benchmarks/serve-cluster/k8s-serve.yaml
