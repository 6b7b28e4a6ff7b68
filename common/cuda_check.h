// cuda_check.h: CUDA_CHECK / CUBLAS_CHECK / CUDA_CHECK_LAST (throwing, with expression,
// error name and file:line) and CUDA_CHECK_NOTHROW for destructors.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace memstrat {

/// Thrown for every failed CUDA runtime / cuBLAS call. Library code never calls exit().
class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& what, cudaError_t code)
      : std::runtime_error(what), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file,
                                     int line);
void report_cuda_error_nothrow(cudaError_t err, const char* expr, const char* file, int line);

}  // namespace memstrat

#define CUDA_CHECK(expr)                                                   \
  do {                                                                     \
    cudaError_t memstrat_err_ = (expr);                                    \
    if (memstrat_err_ != cudaSuccess)                                      \
      ::memstrat::throw_cuda_error(memstrat_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// For destructors: report, never throw.
#define CUDA_CHECK_NOTHROW(expr)                                                     \
  do {                                                                               \
    cudaError_t memstrat_err_ = (expr);                                              \
    if (memstrat_err_ != cudaSuccess)                                                \
      ::memstrat::report_cuda_error_nothrow(memstrat_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch.
#define CUDA_CHECK_LAST() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(expr)                                                     \
  do {                                                                         \
    cublasStatus_t memstrat_st_ = (expr);                                      \
    if (memstrat_st_ != CUBLAS_STATUS_SUCCESS)                                 \
      ::memstrat::throw_cublas_error(memstrat_st_, #expr, __FILE__, __LINE__); \
  } while (0)
