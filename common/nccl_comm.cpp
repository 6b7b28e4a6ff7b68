#include "common/nccl_comm.h"

#if MEMSTRAT_HAVE_NCCL

#include <cstdio>

namespace memstrat {

void throw_nccl_error(ncclResult_t r, const char* expr, const char* file, int line) {
  throw NcclError(std::string(expr) + " failed: " + ncclGetErrorString(r) + " (" + file + ":" +
                      std::to_string(line) + ")",
                  r);
}

std::vector<NcclComm> NcclComm::init_all(const std::vector<int>& devices) {
  std::vector<ncclComm_t> raw(devices.size(), nullptr);
  NCCL_CHECK(ncclCommInitAll(raw.data(), static_cast<int>(devices.size()), devices.data()));
  std::vector<NcclComm> out;
  out.reserve(raw.size());
  for (ncclComm_t c : raw) out.emplace_back(c);
  return out;
}

NcclComm NcclComm::init_rank(int world, int rank) {
  // With NCCL_COMM_ID set, ncclGetUniqueId returns the id of that address in every process, and
  // rank 0's ncclCommInitRank starts NCCL's bootstrap root there: no id to hand around.
  ncclUniqueId id{};
  NCCL_CHECK(ncclGetUniqueId(&id));
  ncclComm_t c = nullptr;
  NCCL_CHECK(ncclCommInitRank(&c, world, id, rank));
  return NcclComm(c);
}

void NcclComm::abort() noexcept {
  if (c_ != nullptr) ncclCommAbort(c_);
  c_ = nullptr;
}

void NcclComm::reset() noexcept {
  if (c_ == nullptr) return;
  if (const ncclResult_t r = ncclCommDestroy(c_); r != ncclSuccess)
    std::fprintf(stderr, "memstrat: ncclCommDestroy failed: %s\n", ncclGetErrorString(r));
  c_ = nullptr;
}

}  // namespace memstrat

#endif  // MEMSTRAT_HAVE_NCCL
