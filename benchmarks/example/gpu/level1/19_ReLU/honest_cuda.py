# Fate: pass. Elementwise ReLU in a vectorised CUDA kernel (float4 loads and stores when both
# pointers are 16-byte aligned, a scalar kernel for the tail or for unaligned views),
# grid-stride loops with 64-bit indices, launched on the current stream.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

cuda_source = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <cstdint>

__device__ __forceinline__ float relu1(float v) {
    return v < 0.0f ? 0.0f : v;  // keeps NaN, like torch.relu
}

__global__ void relu_vec4_kernel(const float4* __restrict__ in, float4* __restrict__ out, int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = in[i];
        v.x = relu1(v.x);
        v.y = relu1(v.y);
        v.z = relu1(v.z);
        v.w = relu1(v.w);
        out[i] = v;
    }
}

__global__ void relu_scalar_kernel(const float* __restrict__ in, float* __restrict__ out,
                                   int64_t begin, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = begin + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = relu1(in[i]);
    }
}

static unsigned int blocks_for(int64_t work, int threads) {
    int64_t blocks = (work + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    if (blocks < 1) blocks = 1;
    return (unsigned int)blocks;
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "relu_forward: expected a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "relu_forward: expected float32, got ", x.scalar_type());
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = at::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int threads = 256;
    const bool aligned = (reinterpret_cast<uintptr_t>(in) % 16 == 0) &&
                         (reinterpret_cast<uintptr_t>(out) % 16 == 0);
    int64_t done = 0;
    if (aligned) {
        const int64_t n4 = n / 4;
        if (n4 > 0) {
            relu_vec4_kernel<<<blocks_for(n4, threads), threads, 0, stream>>>(
                reinterpret_cast<const float4*>(in), reinterpret_cast<float4*>(out), n4);
        }
        done = n4 * 4;
    }
    if (done < n) {
        relu_scalar_kernel<<<blocks_for(n - done, threads), threads, 0, stream>>>(in, out, done, n);
    }
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "relu_forward: kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

relu_ext = load_inline(
    name="kbench_fixture_gpu_relu_honest",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
