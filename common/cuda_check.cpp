#include "common/cuda_check.h"

#include <cstdio>

namespace memstrat {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  throw CudaError(std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) +
                      ") in `" + expr + "` at " + file + ":" + std::to_string(line),
                  err);
}

void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file, int line) {
  throw CudaError(std::string(cublasGetStatusName(st)) + " (" + cublasGetStatusString(st) +
                      ") in `" + expr + "` at " + file + ":" + std::to_string(line),
                  cudaErrorUnknown);
}

void report_cuda_error_nothrow(cudaError_t err, const char* expr, const char* file, int line) {
  std::fprintf(stderr, "memstrat: warning: %s (%s) in `%s` at %s:%d\n", cudaGetErrorName(err),
               cudaGetErrorString(err), expr, file, line);
}

}  // namespace memstrat
