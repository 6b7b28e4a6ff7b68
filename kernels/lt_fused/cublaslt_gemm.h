// cublaslt_gemm.h: GemmLt, a small cuBLASLt wrapper for the MLP's cuBLASLt path: row-major SGEMMs with
// a fused bias (+ ReLU) epilogue, or with a beta·C accumulation. It owns the cuBLASLt handle,
// the workspace, and one plan per distinct problem (matmul descriptor, layouts, and the
// algorithm the heuristic picked once), reused for every later call of that problem.
//
// Determinism: the plan depends only on the problem (op, M, N, K, epilogue, tf32) and on the
// alignments the caller *declares* (LtAlignment), never on the pointers of a call, and a fixed
// algorithm with a caller-owned workspace gives bitwise-identical results run to run (cuBLAS
// "Results reproducibility"). Declare the weakest alignment (4 bytes: any float pointer) for
// an operand whose address varies, e.g. a batch that may be an offset into a dataset, mapped
// host memory or managed memory; a call whose pointer breaks its declaration throws.
//
// Graph capture: a call of a planned problem only enqueues cublasLtMatmul (or a memset /
// bias_act) on the stream. Planning runs cuBLASLt's heuristic query, which is not safe while
// a stream captures (it fails under capture with recent cuBLASLt versions), so plan every
// problem before the capture (prepare_*); an unplanned problem met during a capture throws.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <tuple>

#include "common/cuda_raii.h"
#include "kernels/common/epilogue.h"

namespace memstrat::kernels {

/// Alignment in bytes (a power of two, 4..256) the caller guarantees for each row-major
/// operand of every call: A, B and C (C is also the output). Default: any float pointer.
struct LtAlignment {
  unsigned a = 4;
  unsigned b = 4;
  unsigned c = 4;
};

class GemmLt {
 public:
  static constexpr std::size_t kDefaultWorkspaceBytes = std::size_t{8} << 20;

  /// tf32: CUBLAS_COMPUTE_32F_FAST_TF32; otherwise CUBLAS_COMPUTE_32F (full fp32 FFMA).
  GemmLt(bool tf32, cudaStream_t stream, std::size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~GemmLt();
  GemmLt(const GemmLt&) = delete;
  GemmLt& operator=(const GemmLt&) = delete;

  /// C[M×N] = A[M×K]·B[K×N] (+ bias[N]) (ReLU). The bias (ep != None) is fused into the GEMM
  /// (CUBLASLT_EPILOGUE_BIAS / RELU_BIAS) when cuBLASLt has an algorithm for it, else applied
  /// by bias_act right after (see unfused_epilogues()).
  void nn(const float* A, const float* B, float* C, int M, int N, int K, const float* bias,
          Epilogue ep, LtAlignment align = {});
  /// C[M×N] = A[K×M]^T·B[K×N] + beta·C (beta == 0: C is not read). K == 0 needs beta == 0.
  void tn(const float* A, const float* B, float* C, int M, int N, int K, float beta,
          LtAlignment align = {});

  /// Plan an nn / tn problem now (e.g. before a CUDA-graph capture). Same arguments as the
  /// calls; no GPU work. The bias pointer matters only through its alignment.
  void prepare_nn(int M, int N, int K, const float* bias, Epilogue ep, LtAlignment align = {});
  void prepare_tn(int M, int N, int K, LtAlignment align = {});

  /// Problems planned so far.
  std::size_t plan_count() const { return plans_.size(); }
  /// Planned nn problems whose bias epilogue runs as a separate bias_act launch.
  std::size_t unfused_epilogues() const;

 private:
  enum class Op { NN, TN };
  // op, M, N, K, epilogue, align a/b/c, bias alignment (0: none)
  using Key = std::tuple<int, int, int, int, int, unsigned, unsigned, unsigned, unsigned>;
  struct Plan;
  Plan& plan(Op op, int M, int N, int K, const float* bias, Epilogue ep, LtAlignment al);
  std::unique_ptr<Plan> make_plan(Op op, int M, int N, int K, const float* bias, Epilogue ep,
                                  LtAlignment al) const;

  struct HandleDeleter {
    void operator()(cublasLtContext* h) const noexcept;
  };
  bool tf32_;
  cudaStream_t stream_;
  std::unique_ptr<cublasLtContext, HandleDeleter> handle_;
  DeviceBuffer<unsigned char> workspace_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace memstrat::kernels
