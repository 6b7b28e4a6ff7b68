#include "common/peer_access.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <utility>

#include "common/cuda_check.h"

namespace memstrat {

CurrentDevice::CurrentDevice(int device) {
  CUDA_CHECK(cudaGetDevice(&before_));
  CUDA_CHECK(cudaSetDevice(device));
}

CurrentDevice::~CurrentDevice() { CUDA_CHECK_NOTHROW(cudaSetDevice(before_)); }

bool PeerAccess::possible(int from, int to) {
  if (from == to) return true;
  int can = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
  return can != 0;
}

std::string PeerAccess::refusal(int from, int to) {
  if (possible(from, to)) return "";
  return "GPU " + std::to_string(from) + " cannot access the memory of GPU " + std::to_string(to) +
         " (cudaDeviceCanAccessPeer = 0: no NVLink or PCIe peer path between them, or peer "
         "access off in this system); choose GPUs that have one (nvidia-smi topo -m)";
}

PeerAccess PeerAccess::enable(int from, int to) {
  PeerAccess a;
  if (from == to) return a;
  if (const std::string why = refusal(from, to); !why.empty()) throw std::runtime_error(why);
  CurrentDevice on(from);
  const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // enabled before by another owner: use it, leave it as it is
  } else {
    CUDA_CHECK(e);
    a.enabled_here_ = true;
  }
  a.from_ = from;
  a.to_ = to;
  return a;
}

void PeerAccess::reset() noexcept {
  if (enabled_here_) {
    int before = 0;
    CUDA_CHECK_NOTHROW(cudaGetDevice(&before));
    CUDA_CHECK_NOTHROW(cudaSetDevice(from_));
    CUDA_CHECK_NOTHROW(cudaDeviceDisablePeerAccess(to_));
    CUDA_CHECK_NOTHROW(cudaSetDevice(before));
  }
  from_ = to_ = -1;
  enabled_here_ = false;
}

PeerAccess::~PeerAccess() { reset(); }

PeerAccess::PeerAccess(PeerAccess&& o) noexcept
    : from_(std::exchange(o.from_, -1)),
      to_(std::exchange(o.to_, -1)),
      enabled_here_(std::exchange(o.enabled_here_, false)) {}

PeerAccess& PeerAccess::operator=(PeerAccess&& o) noexcept {
  if (this != &o) {
    reset();
    from_ = std::exchange(o.from_, -1);
    to_ = std::exchange(o.to_, -1);
    enabled_here_ = std::exchange(o.enabled_here_, false);
  }
  return *this;
}

}  // namespace memstrat
