#!/usr/bin/env bash
# Run kbench on the bundled example: honest CUDA kernels on a GPU when there is one, else
# CPU-capable kernels (C++ extensions) at the small task sizes of each level's scale.toml.
set -euo pipefail
cd "$(dirname "$0")/../.."
kbench=target/release/kbench
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  exec "$kbench" eval benchmarks/example/gpu "$@"
else
  exec "$kbench" eval benchmarks/example/cpu --device cpu --scale small "$@"
fi
