// "Did you mean": edit distances, and the closest known name only when it is a slip.
#include "common/suggest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ringd {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("train", "train"), 0u);
  EXPECT_EQ(edit_distance("tran", "train"), 1u);      // insertion
  EXPECT_EQ(edit_distance("trains", "train"), 1u);    // deletion
  EXPECT_EQ(edit_distance("trein", "train"), 1u);     // substitution
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);  // the textbook case
  EXPECT_EQ(edit_distance("Train", "train"), 1u);     // case counts here
}

TEST(ClosestName, FindsTheSlipAndNothingForAnotherWord) {
  const std::vector<std::string> commands = {"bench", "train", "ps", "agent", "exec", "launch"};
  EXPECT_EQ(closest_name("tran", commands), "train");
  EXPECT_EQ(closest_name("TRAIN", commands), "train");  // compared without case
  EXPECT_EQ(closest_name("bnech", commands), "bench");
  EXPECT_EQ(closest_name("lunch", commands), "launch");
  EXPECT_EQ(closest_name("kubernetes", commands), "");
  EXPECT_EQ(closest_name("help", commands), "");
  const std::vector<std::string> variables = {"RINGD_TIMEOUT", "RINGD_TIMELINE", "RINGD_IFACE"};
  EXPECT_EQ(closest_name("RINGD_TIMOUT", variables), "RINGD_TIMEOUT");
  EXPECT_EQ(closest_name("RINGD_TIME_LINE", variables), "RINGD_TIMELINE");
  EXPECT_EQ(closest_name("RINGD_INTERFACE", variables), "RINGD_IFACE");  // 4 edits of 15
  EXPECT_EQ(closest_name("RINGD_COMPLETELY_DIFFERENT", variables), "");
  EXPECT_EQ(closest_name("anything", {}), "");
}

}  // namespace
}  // namespace ringd
