#include "common/profiler/api_names.h"

namespace memstrat {

std::string normalize_api_name(std::string_view s) {
  std::size_t pos = s.rfind("_v");
  if (pos == std::string_view::npos || pos == 0) return std::string(s);
  std::string_view digits = s.substr(pos + 2);
  if (digits.size() < 4) return std::string(s);
  for (char c : digits)
    if (c < '0' || c > '9') return std::string(s);
  return std::string(s.substr(0, pos));
}

const std::vector<std::string>& watched_api_names() {
  static const std::vector<std::string> names = {
      "cudaMalloc", "cudaFree", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost",
      "cudaMallocManaged", "cudaMallocAsync", "cudaFreeAsync", "cudaMemcpy", "cudaMemcpyAsync",
      "cudaMemPrefetchAsync", "cudaMemAdvise", "cudaStreamSynchronize", "cudaDeviceSynchronize",
      "cudaLaunchKernel",
      // CUDA 13's <<<>>> launches through __cudaLaunchKernel (cudaLaunchKernel only for
      // explicit calls and code built with __NV_LEGACY_LAUNCH): both are kernel launches.
      "__cudaLaunchKernel", "cudaGraphLaunch"};
  return names;
}

bool is_traced_api(std::string_view n) {
  static const char* const prefixes[] = {"cudaMalloc",
                                         "cudaFree",
                                         "cudaHostAlloc",
                                         "cudaMemcpy",
                                         "cudaMemset",
                                         "cudaMemPrefetch",
                                         "cudaMemAdvise",
                                         "cudaStreamSynchronize",
                                         "cudaDeviceSynchronize",
                                         "cudaEventSynchronize",
                                         "cudaStreamWaitEvent",
                                         "cudaGraphLaunch"};
  for (const char* p : prefixes)
    if (n.rfind(p, 0) == 0) return true;
  return false;
}

}  // namespace memstrat
