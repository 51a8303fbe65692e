# Fate: pass. Row softmax over dim 1 of a 2-D tensor, one block per row, numerically stable:
# each thread keeps an online (max, sum of exp) over its strided share of the row, the
# block merges them with warp shuffles, then a second pass writes exp(x - max) / sum.
# Rows of any length (e.g. 393216) are handled by the strided loops.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor softmax_rows(torch::Tensor x);"

cuda_source = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <math_constants.h>

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

// Merge two partial (max, sum of exp(x - max)) pairs.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    if (m2 == -CUDART_INF_F) return;
    if (m == -CUDART_INF_F) { m = m2; s = s2; return; }
    if (m2 > m) {
        s = s * expf(m - m2) + s2;
        m = m2;
    } else {
        s = s + s2 * expf(m2 - m);
    }
}

__global__ void __launch_bounds__(kThreads)
softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
    float* yr = y + row * cols;

    float m = -CUDART_INF_F;
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
        const float v = xr[c];
        if (v > m) {
            s = (m == -CUDART_INF_F ? 0.0f : s * expf(m - v)) + 1.0f;
            m = v;
        } else if (v != -CUDART_INF_F) {  // exp(-inf - m) adds nothing
            s += expf(v - m);
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float m2 = __shfl_down_sync(0xffffffffu, m, offset);
        const float s2 = __shfl_down_sync(0xffffffffu, s, offset);
        merge(m, s, m2, s2);
    }
    __shared__ float warp_m[kWarps];
    __shared__ float warp_s[kWarps];
    __shared__ float row_m;
    __shared__ float row_inv_s;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) { warp_m[warp] = m; warp_s[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < kWarps ? warp_m[lane] : -CUDART_INF_F;
        s = lane < kWarps ? warp_s[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float m2 = __shfl_down_sync(0xffffffffu, m, offset);
            const float s2 = __shfl_down_sync(0xffffffffu, s, offset);
            merge(m, s, m2, s2);
        }
        if (lane == 0) { row_m = m; row_inv_s = 1.0f / s; }
    }
    __syncthreads();
    const float mx = row_m;
    const float inv = row_inv_s;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
        yr[c] = expf(xr[c] - mx) * inv;
    }
}

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "softmax_rows: expected a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "softmax_rows: expected float32, got ", x.scalar_type());
    TORCH_CHECK(x.dim() == 2, "softmax_rows: expected a 2-D tensor, got ", x.dim(), " dimensions");
    TORCH_CHECK(x.size(0) <= 0x7fffffff, "softmax_rows: too many rows");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = at::empty_like(xc);
    const int64_t rows = xc.size(0);
    const int64_t cols = xc.size(1);
    if (rows == 0 || cols == 0) return y;
    softmax_rows_kernel<<<(unsigned int)rows, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "softmax_rows: kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

softmax_ext = load_inline(
    name="kbench_fixture_gpu_softmax_honest",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["softmax_rows"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_rows(x)
