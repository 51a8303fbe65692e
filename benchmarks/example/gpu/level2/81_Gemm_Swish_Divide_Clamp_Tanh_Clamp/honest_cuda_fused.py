# Fate: pass. The GEMM stays on cuBLAS through nn.Linear (created as in the task, so the
# weights match); the whole elementwise tail (swish, / 2, clamp, tanh, clamp) runs in one
# CUDA kernel, one read and one write per element.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor swish_div_clamp_tanh_clamp(torch::Tensor x);"

cuda_source = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float epilogue(float v) {
    float t = v * (1.0f / (1.0f + expf(-v)));  // swish: x * sigmoid(x)
    t = t / 2.0f;
    t = fminf(fmaxf(t, -1.0f), 1.0f);
    t = tanhf(t);
    return fminf(fmaxf(t, -1.0f), 1.0f);
}

__global__ void swish_tail_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = epilogue(in[i]);
    }
}

torch::Tensor swish_div_clamp_tanh_clamp(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "swish_div_clamp_tanh_clamp: expected a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "swish_div_clamp_tanh_clamp: expected float32");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = at::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    swish_tail_kernel<<<(unsigned int)blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "swish_div_clamp_tanh_clamp: kernel launch failed: ",
                cudaGetErrorString(err));
    return y;
}
"""

fused_ext = load_inline(
    name="kbench_fixture_gpu_gemm_swish_tail_fused",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["swish_div_clamp_tanh_clamp"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x):
        return fused_ext.swish_div_clamp_tanh_clamp(self.gemm(x))
