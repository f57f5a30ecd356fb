// common/text.h: lower_case and hex, the one hex writer of job ids, checksums and magic numbers.
#include "common/text.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace ringd {
namespace {

TEST(Text, LowerCaseTouchesAsciiLettersOnly) {
  EXPECT_EQ(lower_case("Float32 WARN_x"), "float32 warn_x");
}

TEST(Text, HexIsTwoLowercaseDigitsPerByteInOrder) {
  const uint8_t bytes[] = {0x00, 0x0f, 0x10, 0xab, 0xff};
  EXPECT_EQ(hex(bytes, sizeof(bytes)), "000f10abff");
  EXPECT_EQ(hex(bytes, 0), "");
}

}  // namespace
}  // namespace ringd
