// The peer-fanout forms' pure half: where each rank's shard lies in the set held once on rank 0's
// GPU (PeerSet::shard_offsets), what each rank allocates (device_footprint) for MNIST's 60000
// samples at batch 256, and the group the data-parallel trainer hands every rank
// (ReplicaGroup::shared: made once, the same object for every rank). No GPU needed.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "memory_strategies/epoch_data.h"  // shard_rows
#include "memory_strategies/peer_set.h"
#include "memory_strategies/registry.h"
#include "memory_strategies/replica_group.h"

using namespace memstrat;

namespace {
constexpr std::int64_t kN = 60000;
constexpr int kF = 784;
constexpr std::uint64_t kBatchU8 = 256 * 788;  // one packed block of 256 rows, 16-byte whole
constexpr std::uint64_t kSetU8 = kN * 788;

BatchGeometry mnist(int batch, std::size_t per_sample = 784) {
  return BatchGeometry{kN, batch, per_sample};
}
std::uint64_t footprint(std::string_view name, const StrategyOptions& o) {
  return device_footprint(*find_strategy(name), o, kN, kF);
}
StrategyOptions rank(int shard, int shards) {
  StrategyOptions o;
  o.shard = shard;
  o.shards = shards;
  return o;
}
}  // namespace

// One shard: the whole epoch packed, resident's bytes. 60000 rows at 256 = 234 full blocks and
// one of 96 rows (75648 bytes, 16-byte whole): no padding anywhere.
TEST(PeerSet, OneShardIsTheWholeEpochPacked) {
  const std::vector<std::uint64_t> off = PeerSet::shard_offsets(mnist(256), 1);
  ASSERT_EQ(off.size(), 2u);
  EXPECT_EQ(off[0], 0u);
  EXPECT_EQ(off[1], kSetU8);
  EXPECT_EQ(off[1], PackedLayout{mnist(256)}.total_bytes());
}

// Several shards, shard after shard: each starts where the one before ends, 16-byte aligned, and
// holds exactly its shard's rows (the batches g·N + r) packed.
TEST(PeerSet, ShardsFollowEachOtherAligned) {
  for (const int shards : {2, 3, 8}) {
    for (const int batch : {1, 3, 100, 256, 100000}) {
      for (const std::size_t per : {std::size_t{784}, std::size_t{3136}, std::size_t{5}}) {
        SCOPED_TRACE(std::to_string(shards) + " shards, batch " + std::to_string(batch) +
                     ", " + std::to_string(per) + " bytes a sample");
        const BatchGeometry g = mnist(batch, per);
        const std::vector<std::uint64_t> off = PeerSet::shard_offsets(g, shards);
        ASSERT_EQ(off.size(), static_cast<std::size_t>(shards) + 1);
        EXPECT_EQ(off.front(), 0u);
        std::int64_t rows = 0;
        for (int r = 0; r < shards; ++r) {
          const BatchGeometry s = PeerSet::shard_geometry(g, r, shards);
          EXPECT_EQ(s.samples, shard_rows(kN, batch, r, shards));
          EXPECT_EQ(s.batch, batch);
          rows += s.samples;
          EXPECT_EQ(off[r] % PackedLayout::kAlign, 0u) << "shard " << r;
          EXPECT_EQ(off[r + 1] - off[r], PackedLayout{s}.total_bytes()) << "shard " << r;
        }
        EXPECT_EQ(rows, kN) << "every row in exactly one shard";
      }
    }
  }
  EXPECT_EQ(PeerSet::shard_offsets(mnist(256), 2).back(), kSetU8);  // MNIST needs no padding
  EXPECT_THROW(PeerSet::shard_offsets(mnist(256), 0), std::invalid_argument);
}

// Rank 0 holds the set (every shard); another rank only its slots: one block (peer-fanout),
// --depth chunk slots (peer-fanout-ring: 1 MiB holds 5 blocks of 201728 bytes).
TEST(PeerSet, EachRankDeclaresWhatItAllocates) {
  for (const char* s : {"peer-fanout", "peer-fanout-ring"}) {
    EXPECT_EQ(footprint(s, rank(0, 1)), kSetU8) << s;
    EXPECT_EQ(footprint(s, rank(0, 2)), kSetU8) << s;
    EXPECT_EQ(footprint(s, rank(0, 8)), kSetU8) << s;
  }
  EXPECT_EQ(footprint("peer-fanout", rank(1, 2)), kBatchU8);
  EXPECT_EQ(footprint("peer-fanout", rank(7, 8)), kBatchU8);
  StrategyOptions o = rank(1, 2);
  o.depth = 3;
  o.copy_chunk_mib = 1;
  EXPECT_EQ(footprint("peer-fanout-ring", o), 3 * 5 * kBatchU8);
  o.transfer = Transfer::F32;  // 8 MiB default chunk of 803840-byte blocks: 10 a chunk
  o.copy_chunk_mib = 8;
  o.depth = 2;
  EXPECT_EQ(footprint("peer-fanout-ring", o), 2 * 10 * 256u * 3140);
  EXPECT_EQ(footprint("peer-fanout", o), 256u * 3140);
}

// The trainer's group: the device of each rank, and one shared object per type, made by the
// first caller only, whichever thread asks.
TEST(ReplicaGroup, MakesEachSharedObjectOnce) {
  ReplicaGroup g({3, 4, 5});
  EXPECT_EQ(g.ranks(), 3);
  EXPECT_EQ(g.device(0), 3);
  EXPECT_EQ(g.device(2), 5);
  EXPECT_THROW(g.device(3), std::out_of_range);
  int made = 0;
  const auto make = [&] {
    ++made;
    return std::make_shared<int>(42);
  };
  std::vector<std::shared_ptr<int>> got(8);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] { got[i] = g.shared<int>(make); });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(made, 1);
  for (const auto& p : got) EXPECT_EQ(p.get(), got[0].get());
  // Another type is another object.
  const auto d = g.shared<double>([] { return std::make_shared<double>(1.5); });
  EXPECT_EQ(*d, 1.5);
  EXPECT_EQ(*g.shared<int>(make), 42);
  EXPECT_EQ(made, 1);
  EXPECT_THROW(g.shared<long>([] { return std::shared_ptr<long>(); }), std::logic_error);
}
