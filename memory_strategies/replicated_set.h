// replicated_set.h: `memstrat train --replicate K`, a training set K times the size of the one
// loaded, for runs whose data must not fit the device (--device-budget). Copy 0 is the set as
// loaded; copy j >= 1 holds every sample j-augmented on the host with the `heavy` augmentation
// (augment.h) under the key below, its label copied. Sample i of copy j is row j*n + i, n the
// loaded set's size (after --train-samples). Made once, before any device work, on several
// threads; the bytes depend only on (the loaded set, K, seed), never on the thread count.
//
// The key of sample i of copy j is AugmentKey{seed, -j, i}. The per-epoch augmentations of the
// refresh and stream scenarios key by epoch >= 1 (Trainer epochs count from 1), so no replica key
// equals a per-epoch key as a triple: a replica's draws and an epoch's draws of the same seed
// start from streams augment_stream() derives from different epochs.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "common/host_dataset.h"
#include "memory_strategies/augment.h"

namespace memstrat {

/// The largest K: K times the loaded set's samples index int32 sample orders (shuffled_order)
/// for sets up to 2^31 / 4096 = 524288 samples (MNIST: 60000).
inline constexpr int kMaxReplicate = 4096;

/// The augmentation key of sample `index` of copy `copy` >= 1 (see the header comment).
inline AugmentKey replica_key(std::uint64_t seed, int copy, std::int64_t index) {
  return AugmentKey{seed, -copy, index};
}

/// Host bytes of a run on K copies of a set of n samples of `features` pixels: the replicated
/// set as loaded (uint8 pixels, int32 labels) plus one host copy of it in the transfer format
/// (`transfer_bytes_per_sample` + 4 bytes a sample), which the strategies keep beside it.
std::uint64_t replicated_host_bytes(std::int64_t n, int features, int k,
                                    std::size_t transfer_bytes_per_sample);

/// Why a run needing `need` bytes of host memory is refused when `available` (MemAvailable)
/// is what the host has: it must leave a tenth of it, and at least 1 GiB, to everything else.
/// "" when it fits; a message with both figures in GiB otherwise. No reading of /proc: pure.
std::string host_memory_refusal(std::uint64_t need, std::optional<std::uint64_t> available);

/// Replaces data's training set with K copies (K = 1: unchanged). `threads` workers (0: the
/// hardware's, at most 16); `progress`, when set, gets a line a second while it runs.
/// Throws std::invalid_argument when K is outside 1..kMaxReplicate or K*n exceeds int32.
void replicate_training_set(HostDataset& data, int k, std::uint64_t seed, int threads = 0,
                            std::ostream* progress = nullptr);

}  // namespace memstrat
