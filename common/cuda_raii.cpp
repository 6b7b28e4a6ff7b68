#include "common/cuda_raii.h"

#include <cstdio>

namespace memstrat {
namespace detail {

void* alloc(MemKind k, std::size_t bytes, unsigned flags) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  switch (k) {
    case MemKind::Device:
      CUDA_CHECK(cudaMalloc(&p, bytes));
      break;
    case MemKind::Pinned:
      if (flags == 0) {
        CUDA_CHECK(cudaMallocHost(&p, bytes));
      } else {
        CUDA_CHECK(cudaHostAlloc(&p, bytes, flags));
      }
      break;
    case MemKind::Managed:
      CUDA_CHECK(cudaMallocManaged(&p, bytes, flags ? flags : cudaMemAttachGlobal));
      break;
  }
  return p;
}

void release(MemKind k, void* p) noexcept {
  switch (k) {
    case MemKind::Device:
    case MemKind::Managed:
      CUDA_CHECK_NOTHROW(cudaFree(p));
      break;
    case MemKind::Pinned:
      CUDA_CHECK_NOTHROW(cudaFreeHost(p));
      break;
  }
}

}  // namespace detail

CublasHandle CublasHandle::create() {
  CublasHandle h;
  CUBLAS_CHECK(cublasCreate(&h.h_));
  return h;
}

void CublasHandle::reset() noexcept {
  if (h_) {
    cublasStatus_t st = cublasDestroy(h_);
    if (st != CUBLAS_STATUS_SUCCESS)
      std::fprintf(stderr, "memstrat: warning: cublasDestroy failed: %s\n", cublasGetStatusName(st));
  }
  h_ = nullptr;
}

bool cuda_device_available(std::string* reason) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state
    if (reason) *reason = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    return false;
  }
  if (n == 0) {
    if (reason) *reason = "no CUDA device found";
    return false;
  }
  return true;
}

}  // namespace memstrat
