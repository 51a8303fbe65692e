#!/usr/bin/env bash
# The corpus files the first call left unevaluated, the seed fixture, and level2/81's honest
# fused kernel by both binaries (its candidate was charged by the new one).
set -uo pipefail
mkdir -p /tmp/r2/sub/level1/19_ReLU /tmp/r2/sub/level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp /tmp/r2/f81/level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp
for f in honest_multistream_joined honest_shape_refusal wrong_cuda_graph_static_output; do cp tests/fixtures/gpu/level1/19_ReLU/$f.py /tmp/r2/sub/level1/19_ReLU/; done
cp tests/fixtures/cpu/level1/19_ReLU/cheat_seed_precompute.py /tmp/r2/sub/level1/19_ReLU/
cp benchmarks/example/gpu/level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp/honest_cuda_fused.py /tmp/r2/f81/level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp/
run() { local bin=$1 name=$2 dir=$3; timeout 200 $bin eval $dir --python python3 --out /tmp/r2/$name > /tmp/r2/$name.console.txt 2>&1; tail -n 25 /tmp/r2/$name.console.txt | grep -E "pass|cheat|incorrect|no_kernel|error|time:" ; }
export KBENCH_CACHE=/tmp/r2/cache
run target/release/kbench new-sub /tmp/r2/sub
run target/release/kbench new-81a /tmp/r2/f81
run .gpu/kbench-old old-81a /tmp/r2/f81
run target/release/kbench new-81b /tmp/r2/f81
run .gpu/kbench-old old-81b /tmp/r2/f81
cd /tmp/r2 && tar -czf $OUT/r2.tar.gz --exclude=cache .
