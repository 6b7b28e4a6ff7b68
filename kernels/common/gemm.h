// gemm.h: Gemm, the GEMM backend the MLP calls: cuBLAS (default) or the custom tiled kernels
// (kernels/layerwise/gemm_tiled.cu). The layer-by-layer path runs every GEMM through it; the
// cuBLASLt path runs, through its cuBLAS backend, the GEMMs of row counts it has no cuBLASLt
// plan for. Same row-major contract as the tiled kernels (layer_kernels.h); the cuBLAS backend
// applies epilogues with bias_act / relu_backward (epilogue.h).
#pragma once

#include <cuda_runtime.h>

#include <string_view>

#include "common/cuda_raii.h"
#include "kernels/common/epilogue.h"

namespace memstrat::kernels {

enum class GemmBackend { Cublas, Tiled };
std::string_view to_string(GemmBackend b);

class Gemm {
 public:
  /// cuBLAS workspace size: NVIDIA recommends 32 MiB on Hopper (cublasSetWorkspace docs).
  static constexpr std::size_t kCublasWorkspaceBytes = 32u << 20;
  /// tf32: allow TF32 tensor-core math in cuBLAS (ignored by the tiled kernels).
  Gemm(GemmBackend backend, bool tf32, cudaStream_t stream);
  GemmBackend backend() const { return backend_; }
  /// C[M×N] = A[M×K]·B[K×N] (+bias)(ReLU)
  void nn(const float* A, const float* B, float* C, int M, int N, int K, const float* bias,
          Epilogue ep) const;
  /// C[M×N] = A[M×K]·B[N×K]^T (⊙ 1[mask>0])
  void nt(const float* A, const float* B, float* C, int M, int N, int K,
          const float* relu_mask) const;
  /// C[M×N] = A[K×M]^T·B[K×N]
  void tn(const float* A, const float* B, float* C, int M, int N, int K) const;

 private:
  GemmBackend backend_;
  cudaStream_t stream_;
  CublasHandle cublas_;  // only for the cuBLAS backend
  // cuBLAS's workspace, owned here: without one, cuBLAS takes it per call with
  // cudaMallocAsync (seen on an H200: 2 per training step, inside the captured graphs).
  DeviceBuffer<unsigned char> workspace_;
};

}  // namespace memstrat::kernels
