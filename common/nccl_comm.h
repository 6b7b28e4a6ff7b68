// nccl_comm.h: NCCL_CHECK (throws NcclError with the expression, NCCL's error string and
// file:line, like CUDA_CHECK) and NcclComm, a move-only owner of one communicator: destroyed
// with ncclCommDestroy, or aborted (ncclCommAbort) when its rank failed, so the other ranks'
// calls return instead of waiting for it. Only in a build with NCCL (MEMSTRAT_HAVE_NCCL,
// nccl_settings.h); the rest of the suite asks kHaveNccl.
#pragma once

#include "common/nccl_settings.h"

#if MEMSTRAT_HAVE_NCCL

#include <nccl.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace memstrat {

class NcclError : public std::runtime_error {
 public:
  NcclError(const std::string& what, ncclResult_t code) : std::runtime_error(what), code_(code) {}
  ncclResult_t code() const { return code_; }

 private:
  ncclResult_t code_;
};

[[noreturn]] void throw_nccl_error(ncclResult_t r, const char* expr, const char* file, int line);

class NcclComm {
 public:
  NcclComm() = default;
  explicit NcclComm(ncclComm_t c) : c_(c) {}
  ~NcclComm() { reset(); }
  NcclComm(NcclComm&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  NcclComm& operator=(NcclComm&& o) noexcept {
    if (this != &o) {
      reset();
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  /// One communicator per device of `devices` (rank r on devices[r]), all made by this thread
  /// (ncclCommInitAll). Throws NcclError.
  static std::vector<NcclComm> init_all(const std::vector<int>& devices);
  /// This process's communicator of a run of `world` processes (ncclCommInitRank, the current
  /// device), which meet through NCCL's bootstrap at NCCL_COMM_ID (host:port, the same in every
  /// process; rank 0 listens there). Blocks until every rank joined. Throws NcclError.
  static NcclComm init_rank(int world, int rank);
  ncclComm_t get() const { return c_; }
  explicit operator bool() const { return c_ != nullptr; }
  /// Ends the communicator at once, its pending operations abandoned (a rank that failed).
  void abort() noexcept;
  /// ncclCommDestroy (reported, never thrown).
  void reset() noexcept;

 private:
  ncclComm_t c_ = nullptr;
};

}  // namespace memstrat

#define NCCL_CHECK(expr)                                                     \
  do {                                                                       \
    ncclResult_t memstrat_nccl_ = (expr);                                    \
    if (memstrat_nccl_ != ncclSuccess)                                       \
      ::memstrat::throw_nccl_error(memstrat_nccl_, #expr, __FILE__, __LINE__); \
  } while (0)

#endif  // MEMSTRAT_HAVE_NCCL
