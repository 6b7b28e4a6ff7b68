// peer_access.h: PeerAccess, a move-only owner of one direction of GPU peer access (the memory of
// device `to` readable by kernels and copies running on device `from`), and CurrentDevice, which
// makes a device current for a scope and restores the one before. cudaDeviceEnablePeerAccess is
// process-wide state that another owner (another strategy, NCCL's P2P transport) may have set
// first: an access found enabled is used and left as it was; one this object enabled is disabled
// when it is destroyed.
#pragma once

#include <string>

namespace memstrat {

/// cudaSetDevice(device) for a scope; the device current before comes back at its end.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device);
  ~CurrentDevice();
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int before_ = 0;
};

class PeerAccess {
 public:
  PeerAccess() = default;
  /// cudaDeviceCanAccessPeer(from, to) (true when from == to: a device reads its own memory).
  static bool possible(int from, int to);
  /// "" when `from` can read `to`'s memory, else why not, in words a reader can act on.
  static std::string refusal(int from, int to);
  /// Enables access from `from` to `to` (from == to: nothing to enable). Throws
  /// std::runtime_error with refusal(from, to) when the pair has no peer access.
  static PeerAccess enable(int from, int to);
  ~PeerAccess();
  PeerAccess(PeerAccess&& o) noexcept;
  PeerAccess& operator=(PeerAccess&& o) noexcept;
  PeerAccess(const PeerAccess&) = delete;
  PeerAccess& operator=(const PeerAccess&) = delete;

  /// True when this object enabled the access (and will disable it).
  bool enabled_here() const { return enabled_here_; }

 private:
  void reset() noexcept;
  int from_ = -1;
  int to_ = -1;
  bool enabled_here_ = false;
};

}  // namespace memstrat
