#include "common/build_info.h"

#include <cuda_runtime.h>

#ifndef MEMSTRAT_GIT_SHA
#define MEMSTRAT_GIT_SHA "unknown"
#endif
#ifndef MEMSTRAT_GIT_DIRTY
#define MEMSTRAT_GIT_DIRTY 0
#endif
#ifndef MEMSTRAT_VERSION
#define MEMSTRAT_VERSION "0.0.0"
#endif

namespace memstrat {

BuildInfo build_info() {
  return {MEMSTRAT_VERSION, MEMSTRAT_GIT_SHA, MEMSTRAT_GIT_DIRTY != 0, CUDART_VERSION};
}

std::string cuda_version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string version_text() {
  const BuildInfo b = build_info();
  // cudaDriverGetVersion answers 0 when no driver is installed; an error where one is there
  // but cannot be used. Neither needs a device.
  int driver = 0;
  const cudaError_t err = cudaDriverGetVersion(&driver);
  std::string driver_line;
  if (err != cudaSuccess) {
    cudaGetLastError();
    driver_line = std::string("none usable (") + cudaGetErrorString(err) + ")";
  } else {
    driver_line = driver > 0 ? "supports CUDA " + cuda_version_string(driver)
                             : "none (no NVIDIA driver found)";
  }
  return "memstrat " + b.version + "\ncommit " + b.git_sha +
         (b.git_dirty ? " (built with uncommitted changes)" : "") + "\nbuilt with CUDA runtime " +
         cuda_version_string(b.cuda_runtime) + "\nCUDA driver: " + driver_line;
}

}  // namespace memstrat
