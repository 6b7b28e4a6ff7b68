// EpochWriter: order, augmentation and format of the data every strategy moves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "kernels/common/pixel_norm.h"
#include "memory_strategies/epoch_data.h"
#include "memory_strategies/epoch_order.h"
#include "tests/support/synthetic_dataset.h"

using namespace memstrat;

namespace {
HostDataset synthetic(int n) { return memstrat::testing::synthetic_dataset(n); }
StrategyOptions opts(Transfer t, Scenario s) {
  StrategyOptions o;
  o.transfer = t;
  o.scenario = s;
  o.seed = 11;
  return o;
}
}  // namespace

TEST(EpochData, OrderIsAPermutationAndSeeded) {
  const auto a = shuffled_order(1000, 5), b = shuffled_order(1000, 5), c = shuffled_order(1000, 6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<std::int32_t> s = a;
  std::sort(s.begin(), s.end());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(s[i], i);
}

TEST(EpochData, StaticWritesTheSameBytesEveryEpochRefreshDoesNot) {
  const HostDataset d = synthetic(9000);
  for (Transfer t : {Transfer::U8, Transfer::F32}) {
    EpochWriter st(d, opts(t, Scenario::Static)), rf(d, opts(t, Scenario::Refresh));
    std::vector<std::uint8_t> a(st.image_bytes()), b(st.image_bytes());
    std::vector<std::int32_t> la(9000), lb(9000);
    st.write(1, a.data(), la.data());
    st.write(2, b.data(), lb.data());
    EXPECT_EQ(a, b);
    EXPECT_EQ(la, lb);
    rf.write(1, a.data(), la.data());
    rf.write(2, b.data(), lb.data());
    EXPECT_NE(a, b);
    EXPECT_NE(la, lb);  // reshuffled
    std::vector<std::uint8_t> again(st.image_bytes());
    rf.write(2, again.data(), lb.data());
    EXPECT_EQ(again, b) << "refresh must be deterministic per (seed, epoch)";
  }
}

TEST(EpochData, LabelsFollowTheOrderAndF32IsNormalisedU8) {
  const HostDataset d = synthetic(5000);
  EpochWriter u(d, opts(Transfer::U8, Scenario::Static)), f(d, opts(Transfer::F32, Scenario::Static));
  EXPECT_EQ(f.image_bytes(), 4 * u.image_bytes());
  std::vector<std::uint8_t> iu(u.image_bytes());
  std::vector<float> ifl(u.image_bytes());
  std::vector<std::int32_t> l(5000), l2(5000);
  u.write(1, iu.data(), l.data());
  f.write(1, ifl.data(), l2.data());
  EXPECT_EQ(l, l2);
  const auto ord = u.order(1);
  for (int i = 0; i < 5000; ++i) {
    ASSERT_EQ(l[i], d.train_labels[ord[i]]);
    ASSERT_EQ(0, std::memcmp(iu.data() + i * 784, d.train_images.data() + ord[i] * 784, 784));
  }
  for (std::size_t k = 0; k < iu.size(); ++k)
    ASSERT_EQ(ifl[k], kernels::normalize_pixel(iu[k])) << k;
}

TEST(EpochData, RefreshAugmentationIsAShiftOfAtMostTwoPixels) {
  const HostDataset d = synthetic(300);
  EpochWriter w(d, opts(Transfer::U8, Scenario::Refresh));
  std::vector<std::uint8_t> img(w.image_bytes());
  std::vector<std::int32_t> lab(300);
  w.write(3, img.data(), lab.data());
  const auto ord = w.order(3);
  std::set<std::pair<int, int>> shifts_seen;
  for (int i = 0; i < 300; ++i) {
    const std::uint8_t* src = d.train_images.data() + ord[i] * 784;
    const std::uint8_t* got = img.data() + i * 784;
    bool found = false;
    for (int dy = -2; dy <= 2 && !found; ++dy)
      for (int dx = -2; dx <= 2 && !found; ++dx) {
        bool ok = true;
        for (int y = 0; y < 28 && ok; ++y)
          for (int x = 0; x < 28 && ok; ++x) {
            const int sy = y - dy, sx = x - dx;
            const int want = (sy >= 0 && sy < 28 && sx >= 0 && sx < 28) ? src[sy * 28 + sx] : 0;
            ok = got[y * 28 + x] == want;
          }
        if (ok) {
          found = true;
          shifts_seen.insert({dx, dy});
        }
      }
    ASSERT_TRUE(found) << "sample " << i << " is not a <=2px shift of its source";
  }
  EXPECT_GT(shifts_seen.size(), 15u);  // the shifts actually vary
}

TEST(EpochData, EpochOrderIsTheRefreshOrderReshuffledInPlace) {
  const HostDataset d = synthetic(3000);
  EpochWriter refresh(d, opts(Transfer::U8, Scenario::Refresh));
  EpochOrder o(3000, 11);
  const std::int32_t* storage = o.order();
  std::vector<std::int32_t> previous;
  for (int epoch : {1, 2, 3, 2}) {
    o.set_epoch(epoch);
    EXPECT_EQ(o.epoch(), epoch);
    EXPECT_EQ(o.order(), storage) << "reshuffled in place, not reallocated";
    const std::vector<std::int32_t> got(o.order(), o.order() + o.size());
    EXPECT_EQ(got, refresh.order(epoch));
    EXPECT_EQ(got, shuffled_order(3000, epoch_order_seed(11, epoch)));
    EXPECT_NE(got, previous);
    EXPECT_EQ(o.rows_from(256)[0], got[256]);
    previous = got;
  }
  // The static order is epoch 0's.
  EXPECT_EQ(EpochWriter(d, opts(Transfer::U8, Scenario::Static)).order(5),
            shuffled_order(3000, epoch_order_seed(11, 0)));
}

TEST(EpochData, WriteRowsOfAnyRangeMatchTheWholeEpoch) {
  const HostDataset d = synthetic(1000);
  for (Transfer t : {Transfer::U8, Transfer::F32}) {
    EpochWriter w(d, opts(t, Scenario::Refresh));
    const std::size_t row = w.image_bytes_per_sample();
    std::vector<std::uint8_t> whole(w.image_bytes()), parts(w.image_bytes());
    std::vector<std::int32_t> lw(1000), lp(1000);
    w.write(4, whole.data(), lw.data());
    const auto ord = w.order(4);
    const EpochRows rows{&d, ord.data(), Augment::Light, t, 11, 4};
    std::vector<std::uint8_t> scratch(784);
    for (std::int64_t first = 0; first < 1000; first += 137) {
      const std::int64_t count = std::min<std::int64_t>(137, 1000 - first);
      write_rows(rows, first, count, parts.data() + first * row, lp.data() + first, scratch.data());
    }
    EXPECT_EQ(parts, whole);
    EXPECT_EQ(lp, lw);
  }
}

TEST(EpochData, BatchCount) {
  EXPECT_EQ(batch_count(60000, 256), 235);
  EXPECT_EQ(batch_count(60000, 1000), 60);
  EXPECT_EQ(batch_count(1, 8), 1);
}

// Several GPUs: shard r of N is the single-GPU batches g·N + r, written as an epoch of its own.
// Its batch g holds exactly the bytes of the whole epoch's batch g·N + r, in the split and the
// packed layouts, and the shards together are the whole epoch, each row once: static, and
// refresh (its reshuffle and its per-row shift are the whole epoch's, at two epochs).
TEST(EpochData, AShardIsTheWholeEpochsBatchesOfItsRankInOrder) {
  const int n = 1000, batch = 64;  // 15 full batches and one of 40
  const HostDataset d = synthetic(n);
  for (Scenario sc : {Scenario::Static, Scenario::Refresh})
  for (int epoch : {1, 2})
  for (Transfer t : {Transfer::U8, Transfer::F32})
    for (int shards : {2, 3}) {
      SCOPED_TRACE(std::string(to_string(sc)) + " epoch " + std::to_string(epoch));
      StrategyOptions o = opts(t, sc);
      o.batch = batch;
      const EpochWriter whole(d, o);
      std::vector<std::uint8_t> wi(whole.image_bytes());
      std::vector<std::int32_t> wl(n);
      whole.write(epoch, wi.data(), wl.data());
      const std::size_t row = whole.image_bytes_per_sample();
      const BatchGeometry wg{n, batch, row};
      std::int64_t rows = 0;
      std::set<std::int32_t> seen;
      for (int r = 0; r < shards; ++r) {
        SCOPED_TRACE("shard " + std::to_string(r) + " of " + std::to_string(shards));
        o.shard = r;
        o.shards = shards;
        const EpochWriter mine(d, o);
        EXPECT_EQ(mine.samples(), shard_rows(n, batch, r, shards));
        rows += mine.samples();
        std::vector<std::uint8_t> si(mine.image_bytes());
        std::vector<std::int32_t> sl(static_cast<std::size_t>(mine.samples()));
        mine.write(epoch, si.data(), sl.data());
        const BatchGeometry sg{mine.samples(), batch, row};
        const PackedLayout pl{sg};
        std::vector<std::uint8_t> packed(pl.total_bytes());
        mine.write_packed(epoch, packed.data(), pl);
        for (const std::int32_t s : mine.order(epoch)) EXPECT_TRUE(seen.insert(s).second) << s;
        for (int g = 0; g < sg.batches(); ++g) {
          const int b = g * shards + r;
          ASSERT_LT(b, wg.batches());
          ASSERT_EQ(sg.rows(g), wg.rows(b)) << "batch " << g;
          EXPECT_EQ(0, std::memcmp(si.data() + sg.image_offset(g), wi.data() + wg.image_offset(b),
                                   wg.image_bytes(b))) << "batch " << g;
          EXPECT_EQ(0, std::memcmp(sl.data() + sg.first(g), wl.data() + wg.first(b),
                                   wg.label_bytes(b))) << "batch " << g;
          EXPECT_EQ(0, std::memcmp(packed.data() + pl.block_offset(g), wi.data() + wg.image_offset(b),
                                   wg.image_bytes(b))) << "packed batch " << g;
        }
        // Every batch of the whole epoch with this rank is in the shard.
        EXPECT_EQ(sg.batches(), (wg.batches() - r + shards - 1) / shards);
      }
      EXPECT_EQ(rows, n);
      EXPECT_EQ(seen.size(), static_cast<std::size_t>(n));
    }
}

TEST(EpochData, AShardPastTheLastRankIsRefused) {
  const HostDataset d = synthetic(1000);
  StrategyOptions o = opts(Transfer::U8, Scenario::Static);
  o.shard = 2;
  o.shards = 2;
  EXPECT_THROW(EpochWriter(d, o), std::invalid_argument);
}
