// device_check.h: the checks that decide whether a command can use a GPU at all, before any
// device work: a missing GPU (or driver) and a strategy the device cannot run are not failures
// of a run but a property of the machine (exit code 3); a --device that does not exist is a
// usage error (exit code 2).
#pragma once

#include <stdexcept>
#include <string_view>

namespace memstrat {

/// This machine cannot run the request: no usable GPU, a strategy waived on this device, or a
/// kernel launch form whose single-launch step this device cannot run.
class DeviceUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws DeviceUnavailable ("<why there is no GPU>; <needs>") when no CUDA device is usable and
/// std::invalid_argument when `device` is not one of them. `needs` finishes the sentence for the
/// command at hand, e.g. "`info` needs an NVIDIA GPU and driver.".
void require_device(int device, std::string_view needs);

}  // namespace memstrat
