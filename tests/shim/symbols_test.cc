// The cuGetProcAddress version table and environment parsing.
#include <gtest/gtest.h>

#include <cstring>

#include "config.h"
#include "symbols.h"

namespace chameleon::shim {
namespace {

const char* Pick(const char* base, int version, bool per_thread) {
  const int id = SelectVersion(base, version, per_thread);
  return id < 0 ? "" : kSymbols[id].name;
}

TEST(SymbolsTest, SelectsTheAbiOfTheRequestedVersionAndFlavour) {
  EXPECT_STREQ(Pick("cuMemAlloc", 12000, false), "cuMemAlloc_v2");
  EXPECT_STREQ(Pick("cuMemAlloc", 3010, false), "");  // the 32-bit ABI: passed through
  EXPECT_STREQ(Pick("cuMemcpyHtoD", 12000, true), "cuMemcpyHtoD_v2_ptds");
  EXPECT_STREQ(Pick("cuLaunchKernel", 12000, true), "cuLaunchKernel_ptsz");
  EXPECT_STREQ(Pick("cuLaunchKernel", 12000, false), "cuLaunchKernel");
  // No per-thread flavour: both requests get the one entry.
  EXPECT_STREQ(Pick("cuMemCreate", 12000, true), "cuMemCreate");
  EXPECT_STREQ(Pick("cuGetProcAddress", 11080, false), "cuGetProcAddress");
  EXPECT_STREQ(Pick("cuGetProcAddress", 12000, false), "cuGetProcAddress_v2");
  EXPECT_STREQ(Pick("cuCtxSynchronize", 12080, false), "cuCtxSynchronize");
  EXPECT_STREQ(Pick("cuCtxSynchronize", 13000, false), "cuCtxSynchronize_v2");
  EXPECT_STREQ(Pick("cuLaunchKernelEx", 11040, false), "");
  EXPECT_STREQ(Pick("cuNoSuchThing", 13000, false), "");
}

TEST(SymbolsTest, EveryExportedNameIsFoundAndUnique) {
  for (std::uint32_t i = 0; i < kSymbolCount; ++i) {
    EXPECT_EQ(FindSymbol(kSymbols[i].name), static_cast<int>(i)) << kSymbols[i].name;
  }
  EXPECT_EQ(FindSymbol("dlsym"), -1);
  EXPECT_EQ(FindSymbol(nullptr), -1);
}

TEST(ConfigTest, BoundedIntegersRejectJunk) {
  std::uint64_t v = 0;
  EXPECT_TRUE(ParseBoundedInt("42", 100, &v));
  EXPECT_EQ(v, 42u);
  EXPECT_FALSE(ParseBoundedInt("", 100, &v));
  EXPECT_FALSE(ParseBoundedInt("-1", 100, &v));
  EXPECT_FALSE(ParseBoundedInt("12a", 100, &v));
  EXPECT_FALSE(ParseBoundedInt("101", 100, &v));
  EXPECT_FALSE(ParseBoundedInt("99999999999999999999999", ~0ull, &v));
}

}  // namespace
}  // namespace chameleon::shim
