#include "experiments/core/device_check.h"

#include <cuda_runtime.h>

#include <string>

#include "common/cuda_check.h"
#include "common/cuda_raii.h"

namespace memstrat {

void require_device(int device, std::string_view needs) {
  std::string reason;
  if (!cuda_device_available(&reason)) throw DeviceUnavailable(reason + "; " + std::string(needs));
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device >= count)
    throw std::invalid_argument("--device " + std::to_string(device) + " does not exist (" +
                                std::to_string(count) + " device(s))");
}

}  // namespace memstrat
