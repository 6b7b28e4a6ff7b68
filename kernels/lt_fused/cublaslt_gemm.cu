// cublaslt_gemm.cu: class GemmLt (see cublaslt_gemm.h). No kernels in this file: cublasLtMatmul, plus
// cudaMemsetAsync / bias_act for the corner cases.
//
// Layout convention (as in kernels/common/gemm.cu): memstrat matrices are row-major, cuBLASLt is column-major
// here (CUBLASLT_ORDER_COL, the default). A row-major R×C matrix is, byte for byte, the
// column-major C×R matrix of its transpose, so for row-major C = op(A)·B we ask cuBLASLt for
// the column-major C^T (N×M, ld N) = B^T · op(A)^T, i.e. cuBLASLt's "A" is our B and its "B"
// is our A:
//   nn: C = A[M×K]·B[K×N]    -> Lt A = B as N×K (ld N, op N), Lt B = A as K×M (ld K, op N)
//   tn: C = A[K×M]^T·B[K×N]  -> Lt A = B as N×K (ld N, op N), Lt B = A as M×K (ld M, op T)
//   D = C as N×M (ld N); C and D share one layout (in place for beta != 0).
// The bias of CUBLASLT_EPILOGUE_BIAS has one entry per row of D, i.e. per column n of our C:
// exactly "+ bias[N] per row" of the row-major contract.
// So our A's declared alignment goes to CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES and our B's
// to ..._A_BYTES.
#include "kernels/lt_fused/cublaslt_gemm.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda_check.h"

namespace memstrat::kernels {
namespace {

struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const noexcept { cublasLtMatmulDescDestroy(d); }
};
struct LayoutDeleter {
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const noexcept {
    cublasLtMatrixLayoutDestroy(l);
  }
};
struct PrefDeleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const noexcept {
    cublasLtMatmulPreferenceDestroy(p);
  }
};
using LtDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using LtLayout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter>;
using LtPref = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PrefDeleter>;

constexpr unsigned kMaxAlign = 256;

// Largest power of two (<= 256) dividing the address; 256 for nullptr.
unsigned alignment_of(const void* p) {
  const auto v = reinterpret_cast<std::uintptr_t>(p);
  unsigned a = 1;
  while (a < kMaxAlign && v % (2u * a) == 0) a *= 2;
  return a;
}

void check_declared(unsigned a, const char* which) {
  if (a < 4 || a > kMaxAlign || (a & (a - 1)) != 0)
    throw std::invalid_argument(std::string("GemmLt: declared alignment of ") + which +
                                " must be a power of two in 4..256, got " + std::to_string(a));
}

void check_alignment(LtAlignment al) {
  check_declared(al.a, "A");
  check_declared(al.b, "B");
  check_declared(al.c, "C");
}

void check_pointer(const void* p, unsigned declared, const char* who, const char* which) {
  if (alignment_of(p) < declared)
    throw std::invalid_argument(std::string(who) + ": " + which + " is not " +
                                std::to_string(declared) + "-byte aligned as declared");
}

void check_dims(int M, int N, int K, const char* who) {
  if (M < 0 || N < 0 || K < 0)
    throw std::invalid_argument(std::string(who) + ": negative matrix dimension");
}

template <typename T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}
template <typename T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& v) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof(v)));
}

LtLayout make_layout(int rows, int cols, int ld) {
  cublasLtMatrixLayout_t l = nullptr;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, static_cast<std::uint64_t>(rows),
                                          static_cast<std::uint64_t>(cols),
                                          static_cast<std::int64_t>(ld)));
  return LtLayout(l);
}

cublasLtEpilogue_t lt_epilogue(Epilogue ep) {
  switch (ep) {
    case Epilogue::None:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::Bias:
      return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::BiasRelu:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

}  // namespace

struct GemmLt::Plan {
  LtDesc desc;
  LtLayout a, b, c;  // cuBLASLt's A (our B), B (our A), and C = D
  cublasLtMatmulAlgo_t algo{};
  bool fused_epilogue = false;      // the descriptor carries the bias (+ ReLU) epilogue
  const void* desc_bias = nullptr;  // the bias pointer currently set in desc
};

void GemmLt::HandleDeleter::operator()(cublasLtContext* h) const noexcept {
  const cublasStatus_t st = cublasLtDestroy(h);
  (void)st;  // nothing useful to do in a destructor
}

GemmLt::GemmLt(bool tf32, cudaStream_t stream, std::size_t workspace_bytes)
    : tf32_(tf32), stream_(stream) {
  if (workspace_bytes > 0) workspace_ = DeviceBuffer<unsigned char>(workspace_bytes);
  cublasLtHandle_t h = nullptr;
  CUBLAS_CHECK(cublasLtCreate(&h));
  handle_.reset(h);
}

GemmLt::~GemmLt() = default;

std::size_t GemmLt::unfused_epilogues() const {
  std::size_t n = 0;
  for (const auto& [key, p] : plans_)
    if (std::get<4>(key) != static_cast<int>(Epilogue::None) && !p->fused_epilogue) ++n;
  return n;
}

std::unique_ptr<GemmLt::Plan> GemmLt::make_plan(Op op, int M, int N, int K, const float* bias,
                                                Epilogue ep, LtAlignment al) const {
  const bool nn = op == Op::NN;
  const cublasComputeType_t compute = tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;

  // First with the requested epilogue; if cuBLASLt has no algorithm for it, without (the
  // caller then applies bias_act).
  for (const bool fuse : {true, false}) {
    if (!fuse && ep == Epilogue::None) break;
    auto p = std::make_unique<Plan>();
    cublasLtMatmulDesc_t d = nullptr;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&d, compute, CUDA_R_32F));
    p->desc.reset(d);
    set_desc(d, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<std::int32_t>(CUBLAS_OP_N));
    set_desc(d, CUBLASLT_MATMUL_DESC_TRANSB,
             static_cast<std::int32_t>(nn ? CUBLAS_OP_N : CUBLAS_OP_T));
    const cublasLtEpilogue_t e = fuse ? lt_epilogue(ep) : CUBLASLT_EPILOGUE_DEFAULT;
    set_desc(d, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<std::uint32_t>(e));
    if (fuse && ep != Epilogue::None) {
      // The heuristic reads the bias pointer's value for its alignment (cublasLt.h).
      const void* b = bias;
      set_desc(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, b);
      p->desc_bias = b;
    }
    p->fused_epilogue = fuse && ep != Epilogue::None;
    p->a = make_layout(N, K, N);
    p->b = nn ? make_layout(K, M, K) : make_layout(M, K, M);
    p->c = make_layout(N, M, N);

    cublasLtMatmulPreference_t pr = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pr));
    LtPref pref(pr);
    set_pref(pr, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
             static_cast<std::uint64_t>(workspace_.bytes()));
    set_pref(pr, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<std::uint32_t>(al.b));
    set_pref(pr, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<std::uint32_t>(al.a));
    set_pref(pr, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<std::uint32_t>(al.c));
    set_pref(pr, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<std::uint32_t>(al.c));

    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        handle_.get(), d, p->a.get(), p->b.get(), p->c.get(), p->c.get(), pr, 1, &result, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
      p->algo = result.algo;
      return p;
    }
    // A refusal of the fused epilogue (any status) falls back to the plain GEMM; a failure
    // of the plain GEMM is reported with its status.
    const bool last = !fuse || ep == Epilogue::None;
    if (last && st != CUBLAS_STATUS_SUCCESS) CUBLAS_CHECK(st);
  }
  throw std::runtime_error("GemmLt: cuBLASLt has no algorithm for " +
                           std::string(nn ? "nn" : "tn") + " M=" + std::to_string(M) +
                           " N=" + std::to_string(N) + " K=" + std::to_string(K));
}

GemmLt::Plan& GemmLt::plan(Op op, int M, int N, int K, const float* bias, Epilogue ep,
                           LtAlignment al) {
  const unsigned bias_align = ep == Epilogue::None ? 0u : alignment_of(bias);
  const Key key{static_cast<int>(op), M, N, K, static_cast<int>(ep), al.a, al.b, al.c, bias_align};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
    if (capture != cudaStreamCaptureStatusNone)
      throw std::logic_error("GemmLt: " + std::string(op == Op::NN ? "nn" : "tn") +
                             " M=" + std::to_string(M) + " N=" + std::to_string(N) +
                             " K=" + std::to_string(K) +
                             " was not planned before this CUDA-graph capture (cuBLASLt's "
                             "heuristic query cannot run during a capture): call prepare_* first");
    it = plans_.emplace(key, make_plan(op, M, N, K, bias, ep, al)).first;
  }
  return *it->second;
}

void GemmLt::prepare_nn(int M, int N, int K, const float* bias, Epilogue ep, LtAlignment al) {
  check_dims(M, N, K, "GemmLt::prepare_nn");
  check_alignment(al);
  if (ep != Epilogue::None && bias == nullptr)
    throw std::invalid_argument("GemmLt::prepare_nn: Epilogue::Bias/BiasRelu needs a bias");
  if (M == 0 || N == 0 || K == 0) return;
  plan(Op::NN, M, N, K, bias, ep, al);
}

void GemmLt::prepare_tn(int M, int N, int K, LtAlignment al) {
  check_dims(M, N, K, "GemmLt::prepare_tn");
  check_alignment(al);
  if (M == 0 || N == 0 || K == 0) return;
  plan(Op::TN, M, N, K, nullptr, Epilogue::None, al);
}

void GemmLt::nn(const float* A, const float* B, float* C, int M, int N, int K, const float* bias,
                Epilogue ep, LtAlignment al) {
  check_dims(M, N, K, "GemmLt::nn");
  check_alignment(al);
  if (ep != Epilogue::None && bias == nullptr)
    throw std::invalid_argument("GemmLt::nn: Epilogue::Bias/BiasRelu needs a bias");
  if (M == 0 || N == 0) return;
  const bool relu = ep == Epilogue::BiasRelu;
  if (K == 0) {  // an empty sum: C = epilogue(0)
    CUDA_CHECK(cudaMemsetAsync(C, 0, sizeof(float) * static_cast<std::size_t>(M) * N, stream_));
    if (ep != Epilogue::None) bias_act(C, bias, M, N, relu, stream_);
    return;
  }
  check_pointer(A, al.a, "GemmLt::nn", "A");
  check_pointer(B, al.b, "GemmLt::nn", "B");
  check_pointer(C, al.c, "GemmLt::nn", "C");
  Plan& p = plan(Op::NN, M, N, K, bias, ep, al);
  if (p.fused_epilogue && p.desc_bias != bias) {  // same alignment (it is in the key)
    const void* b = bias;
    set_desc(p.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, b);
    p.desc_bias = b;
  }
  const float one = 1.f;
  const float zero = 0.f;
  CUBLAS_CHECK(cublasLtMatmul(handle_.get(), p.desc.get(), &one, B, p.a.get(), A, p.b.get(), &zero,
                              C, p.c.get(), C, p.c.get(), &p.algo, workspace_.data(),
                              workspace_.bytes(), stream_));
  if (ep != Epilogue::None && !p.fused_epilogue) bias_act(C, bias, M, N, relu, stream_);
}

void GemmLt::tn(const float* A, const float* B, float* C, int M, int N, int K, float beta,
                LtAlignment al) {
  check_dims(M, N, K, "GemmLt::tn");
  check_alignment(al);
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (beta != 0.f)
      throw std::invalid_argument("GemmLt::tn: K == 0 with beta != 0 is not supported");
    CUDA_CHECK(cudaMemsetAsync(C, 0, sizeof(float) * static_cast<std::size_t>(M) * N, stream_));
    return;
  }
  check_pointer(A, al.a, "GemmLt::tn", "A");
  check_pointer(B, al.b, "GemmLt::tn", "B");
  check_pointer(C, al.c, "GemmLt::tn", "C");
  Plan& p = plan(Op::TN, M, N, K, nullptr, Epilogue::None, al);
  const float one = 1.f;
  CUBLAS_CHECK(cublasLtMatmul(handle_.get(), p.desc.get(), &one, B, p.a.get(), A, p.b.get(), &beta,
                              C, p.c.get(), C, p.c.get(), &p.algo, workspace_.data(),
                              workspace_.bytes(), stream_));
}

}  // namespace memstrat::kernels
