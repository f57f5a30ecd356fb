// docs/tunables.md must list exactly the variables of tunable_table(), with the same defaults.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/tunables.h"

namespace ringd {
namespace {

TEST(TunablesDoc, EveryVariableIsDocumentedWithItsDefault) {
  std::ifstream in(std::string(RINGD_SOURCE_DIR) + "/docs/tunables.md");
  ASSERT_TRUE(in) << "docs/tunables.md is missing";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  size_t rows = 0;
  for (const TunableInfo& info : tunable_table()) {
    const std::string row = std::string("| `") + info.name + "` | " + info.default_value + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << "docs/tunables.md lacks the row: " << row;
    ++rows;
  }
  // No documented variable that the code does not know.
  size_t documented = 0;
  for (size_t pos = doc.find("| `RINGD_"); pos != std::string::npos;
       pos = doc.find("| `RINGD_", pos + 1)) {
    ++documented;
  }
  EXPECT_EQ(documented, rows);
}

}  // namespace
}  // namespace ringd
