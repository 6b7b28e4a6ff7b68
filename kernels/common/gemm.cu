// gemm.cu: class Gemm (see gemm.h): the MLP's GEMMs on cuBLAS or on the tiled kernels.
//
// No kernels in this file. The cuBLAS backend calls cublasSgemm and then applies the
// epilogue with bias_act / relu_backward (epilogue.cu) on the same stream.
//
// Layout convention (written once): all memstrat matrices are row-major. cuBLAS is
// column-major, and a row-major R×C matrix is, byte for byte, the column-major C×R matrix
// of its transpose. So for row-major C = op(A)·op(B) we ask cuBLAS for the column-major
// C^T = op(B)^T · op(A)^T, i.e. we swap the operands and the roles of M and N; C^T has
// N rows with leading dimension N:
//   nn: C = A[M×K]·B[K×N]    -> Sgemm(N, N, n=N, m=M, k=K, B, ldb=N, A, lda=K, C, N)
//   nt: C = A[M×K]·B[N×K]^T  -> Sgemm(T, N, n=N, m=M, k=K, B, ldb=K, A, lda=K, C, N)
//   tn: C = A[K×M]^T·B[K×N]  -> Sgemm(N, T, n=N, m=M, k=K, B, ldb=N, A, lda=M, C, N)
// (argument order: transa, transb, rows of C^T, cols of C^T, k, first operand, its ld, ...)
#include <stdexcept>
#include <string>

#include "common/cuda_check.h"
#include "kernels/common/gemm.h"
#include "kernels/layerwise/layer_kernels.h"

namespace memstrat::kernels {

std::string_view to_string(GemmBackend b) {
  switch (b) {
    case GemmBackend::Cublas:
      return "cublas";
    case GemmBackend::Tiled:
      return "tiled";
  }
  return "unknown";
}

namespace {

void check_dims(int M, int N, int K, const char* who) {
  if (M < 0 || N < 0 || K < 0)
    throw std::invalid_argument(std::string(who) + ": negative matrix dimension");
}

// One column-major cuBLAS call computing the row-major product (see the file comment).
// K == 0 is handled by the caller (cuBLAS rejects a zero leading dimension).
void sgemm_rowmajor(cublasHandle_t h, cublasOperation_t op_b, cublasOperation_t op_a, int M, int N,
                    int K, const float* A, int lda, const float* B, int ldb, float* C) {
  const float one = 1.f;
  const float zero = 0.f;
  CUBLAS_CHECK(cublasSgemm(h, op_b, op_a, N, M, K, &one, B, ldb, A, lda, &zero, C, N));
}

}  // namespace

Gemm::Gemm(GemmBackend backend, bool tf32, cudaStream_t stream)
    : backend_(backend), stream_(stream) {
  if (backend_ == GemmBackend::Cublas) {
    cublas_ = CublasHandle::create();
    CUBLAS_CHECK(cublasSetStream(cublas_.get(), stream_));
    workspace_ = DeviceBuffer<unsigned char>(kCublasWorkspaceBytes);
    CUBLAS_CHECK(cublasSetWorkspace(cublas_.get(), workspace_.data(), workspace_.bytes()));
    CUBLAS_CHECK(cublasSetPointerMode(cublas_.get(), CUBLAS_POINTER_MODE_HOST));
    // DEFAULT_MATH keeps cublasSgemm in full fp32 (no TF32, no fp32 emulation).
    CUBLAS_CHECK(
        cublasSetMathMode(cublas_.get(), tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  }
}

void Gemm::nn(const float* A, const float* B, float* C, int M, int N, int K, const float* bias,
              Epilogue ep) const {
  if (backend_ == GemmBackend::Tiled) {
    gemm_nn_tiled(A, B, C, M, N, K, bias, ep, stream_);
    return;
  }
  check_dims(M, N, K, "Gemm::nn");
  if (ep != Epilogue::None && bias == nullptr)
    throw std::invalid_argument("Gemm::nn: Epilogue::Bias/BiasRelu needs a bias");
  if (M == 0 || N == 0) return;
  if (K == 0) {
    CUDA_CHECK(cudaMemsetAsync(C, 0, sizeof(float) * static_cast<std::size_t>(M) * N, stream_));
  } else {
    sgemm_rowmajor(cublas_.get(), CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, A, K, B, N, C);
  }
  if (ep != Epilogue::None) bias_act(C, bias, M, N, ep == Epilogue::BiasRelu, stream_);
}

void Gemm::nt(const float* A, const float* B, float* C, int M, int N, int K,
              const float* relu_mask) const {
  if (backend_ == GemmBackend::Tiled) {
    gemm_nt_tiled(A, B, C, M, N, K, relu_mask, stream_);
    return;
  }
  check_dims(M, N, K, "Gemm::nt");
  if (M == 0 || N == 0) return;
  if (K == 0) {
    CUDA_CHECK(cudaMemsetAsync(C, 0, sizeof(float) * static_cast<std::size_t>(M) * N, stream_));
  } else {
    sgemm_rowmajor(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, A, K, B, K, C);
  }
  if (relu_mask != nullptr) relu_backward(C, relu_mask, static_cast<std::size_t>(M) * N, stream_);
}

void Gemm::tn(const float* A, const float* B, float* C, int M, int N, int K) const {
  if (backend_ == GemmBackend::Tiled) {
    gemm_tn_tiled(A, B, C, M, N, K, stream_);
    return;
  }
  check_dims(M, N, K, "Gemm::tn");
  if (M == 0 || N == 0) return;
  if (K == 0) {
    CUDA_CHECK(cudaMemsetAsync(C, 0, sizeof(float) * static_cast<std::size_t>(M) * N, stream_));
  } else {
    sgemm_rowmajor(cublas_.get(), CUBLAS_OP_N, CUBLAS_OP_T, M, N, K, A, M, B, N, C);
  }
}

}  // namespace memstrat::kernels
