// test_nccl_settings.cpp: what a multi-GPU run records about NCCL (every NCCL_* variable) and
// its refusal to start with NVLink multicast not explicitly off.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/nccl_settings.h"

namespace memstrat {
namespace {

TEST(NcclSettings, EveryNcclVariableAndNothingElse) {
  const char* env[] = {"PATH=/bin", "NCCL_NVLS_ENABLE=0", "NCCL_ALGO=Ring", "XNCCL_X=1",
                       "NCCL_PROTO=", "NCCL_DEBUG=INFO=x", nullptr};
  const auto s = nccl_settings(env);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s.at("NCCL_NVLS_ENABLE"), "0");
  EXPECT_EQ(s.at("NCCL_ALGO"), "Ring");
  EXPECT_EQ(s.at("NCCL_PROTO"), "");
  EXPECT_EQ(s.at("NCCL_DEBUG"), "INFO=x");  // the first '=' ends the name
  EXPECT_TRUE(nccl_settings(nullptr).empty());
}

TEST(NcclSettings, MultiGpuNeedsNvlsExplicitlyOff) {
  EXPECT_EQ(nvls_refusal({{"NCCL_NVLS_ENABLE", "0"}}), "");
  const std::string unset = nvls_refusal({});
  EXPECT_NE(unset.find("NCCL_NVLS_ENABLE=0"), std::string::npos) << unset;
  EXPECT_NE(unset.find("not set"), std::string::npos) << unset;
  const std::string on = nvls_refusal({{"NCCL_NVLS_ENABLE", "1"}});
  EXPECT_NE(on.find("'1'"), std::string::npos) << on;
  EXPECT_NE(nvls_refusal({{"NCCL_NVLS_ENABLE", ""}}), "");
}

TEST(NcclSettings, VersionOnlyWithNccl) {
  if (kHaveNccl) {
    const std::string v = nccl_version();
    EXPECT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;  // loads the library: major.minor.patch
  } else {
    EXPECT_EQ(nccl_version(), "");
  }
}

}  // namespace
}  // namespace memstrat
