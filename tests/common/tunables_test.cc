// The value parsers behind RINGD_* variables and CLI flags, and the table docs/ shows.
#include "common/tunables.h"

#include <gtest/gtest.h>

#include <string>

#include "ringd/error.h"

namespace ringd {
namespace {

TEST(ParseBytes, PlainAndSuffixed) {
  EXPECT_EQ(parse_bytes("X", "4096"), 4096u);
  EXPECT_EQ(parse_bytes("X", "0"), 0u);
  EXPECT_EQ(parse_bytes("X", "64K"), 64u << 10);
  EXPECT_EQ(parse_bytes("X", "1M"), 1u << 20);
  EXPECT_EQ(parse_bytes("X", "2G"), size_t{2} << 30);
  EXPECT_EQ(parse_bytes("X", "3k"), 3u << 10);
  EXPECT_EQ(parse_bytes("X", "8MiB"), 8u << 20);
}

// Errors name the variable and the bad text, so the message points at what to fix.
void expect_invalid(const std::function<void()>& parse, const std::string& name,
                    const std::string& text) {
  try {
    parse();
    FAIL() << name << "=" << text << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(name + "=" + text), std::string::npos) << e.what();
  }
}

TEST(ParseBytes, RejectsGarbageNegativeAndUnknownUnits) {
  for (const std::string text :
       {"x", "-1", " -1", "5Q", "", "K", "12KQ", "99999999999G", "99999999999999999999999"}) {
    expect_invalid([&] { parse_bytes("RINGD_SEGMENT_BYTES", text); }, "RINGD_SEGMENT_BYTES", text);
  }
}

TEST(ParseSeconds, WholeAndFractional) {
  EXPECT_EQ(parse_seconds("T", "30"), std::chrono::milliseconds(30000));
  EXPECT_EQ(parse_seconds("T", "1.5"), std::chrono::milliseconds(1500));
  EXPECT_EQ(parse_seconds("T", "0.0001"), std::chrono::milliseconds(1));  // rounds up, never 0
}

TEST(ParseSeconds, RejectsZeroNegativeAndGarbage) {
  for (const std::string text : {"0", "-3", "abc", "", "5s", "nan", "inf"}) {
    expect_invalid([&] { parse_seconds("RINGD_TIMEOUT", text); }, "RINGD_TIMEOUT", text);
  }
}

TEST(TunableTable, EveryEntryIsDocumented) {
  const auto& table = tunable_table();
  ASSERT_FALSE(table.empty());
  bool has_timeout = false;
  for (const TunableInfo& info : table) {
    EXPECT_EQ(std::string(info.name).rfind("RINGD_", 0), 0u) << info.name;
    EXPECT_NE(std::string(info.default_value), "") << info.name;
    EXPECT_NE(std::string(info.description), "") << info.name;
    has_timeout |= std::string(info.name) == "RINGD_TIMEOUT";
  }
  EXPECT_TRUE(has_timeout);
}

}  // namespace
}  // namespace ringd
