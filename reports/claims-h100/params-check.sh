#!/usr/bin/env bash
# The perturbation on scaled inputs, tried on the GPU before committing it: the GPU corpus files of
# tasks with parameters and six CUDA-L1 rows with parameters that passed before (one call).
#   OUT=DIR bash reports/claims-h100/params-check.sh
set -u
mkdir -p /tmp/gp/level3/1_MLP /tmp/gp/level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp /tmp/gp/level2/76_Gemm_Add_ReLU /tmp/gp/level2/83_Conv3d_GroupNorm_Min_Clamp_Dropout
cp benchmarks/example/gpu/level3/1_MLP/honest_cuda.py /tmp/gp/level3/1_MLP/
cp benchmarks/example/gpu/level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp/honest_cuda_fused.py /tmp/gp/level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp/
cp tests/fixtures/gpu/level2/76_Gemm_Add_ReLU/*.py /tmp/gp/level2/76_Gemm_Add_ReLU/
cp tests/fixtures/gpu/level2/83_Conv3d_GroupNorm_Min_Clamp_Dropout/honest_memset.py /tmp/gp/level2/83_Conv3d_GroupNorm_Min_Clamp_Dropout/
target/release/kbench import cuda-l1 .gpu/h100.json /tmp/l1 >/dev/null 2>&1
timeout 190 target/release/kbench eval /tmp/gp --python python3 --out /tmp/gpo --budget 1 > $OUT/corpus.txt 2>&1 &
timeout 190 target/release/kbench eval /tmp/l1/submissions --tasks /tmp/l1/tasks --only 3/29,2/34,3/17,2/13,2/6,2/9 --published /tmp/l1/published.csv --python python3 --out /tmp/l1o --budget 1 --sandbox require --kernelbench-tolerance 1e-4 > $OUT/cl1.txt 2>&1 &
wait
grep -E "^ +[a-z_]+  level" $OUT/corpus.txt $OUT/cl1.txt | cut -c1-260
