// The command line of --consumer train|none: none only in the stream scenario, never beside what
// needs a step (a loss curve, a kernel launch form, several GPUs), and recorded as config.consumer
// (null outside the stream scenario). No GPU needed.
#include <gtest/gtest.h>

#include "cli_test_support.h"

using namespace memstrat;
using namespace memstrat::testing;

TEST(CliConsumer, NoneIsAStreamOptionAndNeedsNoStep) {
  expect_refused({"train", "--consumer", "none"}, "--consumer is an option of the stream scenario");
  expect_refused({"train", "--scenario", "refresh", "--consumer", "train"}, "--consumer");
  expect_refused({"train", "--scenario", "stream", "--strategy", "pinned", "--consumer", "none",
                  "--loss-curve", "c.csv"}, "no loss curve");
  expect_refused({"train", "--scenario", "stream", "--strategy", "pinned", "--consumer", "none",
                  "--launch-form", "kernel"}, "--consumer none runs no step");
  expect_refused({"train", "--scenario", "stream", "--strategy", "pinned", "--consumer", "all"},
                 "--consumer");
}

TEST(CliConsumer, ParsedIntoTheRunConfig) {
  const Parsed p = parse({"train", "--scenario", "stream", "--strategy", "pinned", "--consumer",
                          "none"});
  ASSERT_FALSE(p.code) << p.err;
  EXPECT_EQ(p.req.run.consumer, Consumer::None);
  EXPECT_FALSE(p.req.run.trains());
  const Parsed d = parse({"train", "--scenario", "stream", "--strategy", "pinned"});
  ASSERT_FALSE(d.code) << d.err;
  EXPECT_TRUE(d.req.run.trains());
}
