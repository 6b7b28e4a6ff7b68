// transfer_primitive.h: one way of moving bytes that the memory strategies are built on (a
// pinned copy, an SM copy from mapped memory, a prefetch, a page fault...), and the one list of
// them. A primitive says *how* a transfer is issued and how its data is checked; measure.h
// decides *what* is measured (warm-up, samples, clock, statistics).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/nvtx.h"
#include "memory_strategies/memory_strategy.h"

namespace memstrat {

/// Which clock times a sample. CudaEvents: an event pair on the primitive's stream brackets the
/// enqueued work. SteadyClock: the host clock brackets work the host does or waits for.
enum class TimedBy { CudaEvents, SteadyClock };
std::string_view to_string(TimedBy t);  // "cuda-events" | "steady-clock"

/// Which way the bytes go: "host-to-device", "device-to-host" or "none" (nothing moves).
enum class Direction { HostToDevice, DeviceToHost, None };
std::string_view to_string(Direction d);

/// What every primitive works with; the streams are owned by the caller.
struct PrimitiveContext {
  int device = 0;
  cudaStream_t stream = nullptr;  // everything is enqueued and timed here
  cudaStream_t side = nullptr;    // a second stream, for primitives that use two
};

class TransferPrimitive {
 public:
  virtual ~TransferPrimitive() = default;
  virtual TimedBy timed_by() const = 0;
  virtual Direction direction() const = 0;
  /// The NVTX phase its timed work is shown under.
  virtual Phase phase() const = 0;
  /// Allocate for transfers of up to max_bytes and write the sources. Once, before any sample.
  virtual void prepare(std::size_t max_bytes, const PrimitiveContext& ctx) = 0;
  /// Bring back the state a sample starts from (clear the destination, move pages back...).
  /// Outside the timed region; work it enqueues on ctx.stream precedes the timing events.
  virtual void reset(std::size_t bytes, std::uint32_t seed) = 0;
  /// The timed transfer of `bytes`. CudaEvents: enqueue it on ctx.stream (side may fork and
  /// join back). SteadyClock: return when the transfer is complete.
  virtual void transfer(std::size_t bytes, std::uint32_t seed) = 0;
  /// After the timed region, with ctx.stream idle: "" when the destination holds what the
  /// transfer should have put there, else what is wrong.
  virtual std::string verify(std::size_t bytes, std::uint32_t seed) = 0;
};

struct PrimitiveEntry {
  std::string_view name;         // the CLI name
  std::string_view description;  // one line: what exactly is timed
  /// Empty when the device can run it, else the reason it is waived (not failed).
  std::string (*unsupported)(const DeviceCaps&);
  std::unique_ptr<TransferPrimitive> (*make)();
};

const std::vector<PrimitiveEntry>& primitive_registry();
/// nullptr when unknown.
const PrimitiveEntry* find_primitive(std::string_view name);
/// "pageable-h2d, pinned-h2d, ..." for messages.
std::string primitive_names();

}  // namespace memstrat
