# Fate: pass. The MLP keeps its nn.Linear layers (created in the task's order, so the weights
# match) and runs every hidden ReLU in a custom CUDA kernel.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

cuda_source = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = in[i];
        out[i] = v < 0.0f ? 0.0f : v;
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "relu_forward: expected a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "relu_forward: expected float32");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = at::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    relu_kernel<<<(unsigned int)blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "relu_forward: kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

relu_ext = load_inline(
    name="kbench_fixture_gpu_mlp_relu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        hidden = []
        current = input_size
        for size in layer_sizes:
            hidden.append(nn.Linear(current, size))
            current = size
        self.hidden = nn.ModuleList(hidden)
        self.out = nn.Linear(current, output_size)

    def forward(self, x):
        for layer in self.hidden:
            x = relu_ext.relu_forward(layer(x))
        return self.out(x)
