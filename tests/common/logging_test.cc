// Log lines carry date, time (UTC), host, pid, rank and level, as text or as one JSON object.
#include "common/logging.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

namespace ringd {
namespace {

LogFields sample_fields() {
  LogFields fields;
  fields.level = LogLevel::kWarn;
  // 2026-11-25T11:59:17.042Z
  fields.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1795607957042));
  fields.host = "ringd-2";
  fields.pid = 4711;
  fields.rank = 3;
  fields.message = "rank 3: peer rank 1 \"lost\"";
  return fields;
}

TEST(LogLine, TextHasDateTimeHostPidRankAndLevel) {
  LogFields fields = sample_fields();
  EXPECT_EQ(format_log_line(fields, false),
            "[ringd r3 W 2026-11-25T11:59:17.042Z ringd-2 4711] rank 3: peer rank 1 \"lost\"\n");
  fields.rank = -1;  // not known yet: left out
  fields.level = LogLevel::kError;
  EXPECT_EQ(format_log_line(fields, false),
            "[ringd E 2026-11-25T11:59:17.042Z ringd-2 4711] rank 3: peer rank 1 \"lost\"\n");
}

TEST(LogLine, JsonIsOneObjectPerLineWithTheSameFields) {
  LogFields fields = sample_fields();
  const std::string line = format_log_line(fields, true);
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line: " << line;
  const nlohmann::json object = nlohmann::json::parse(line);
  EXPECT_EQ(object["time"], "2026-11-25T11:59:17.042Z");
  EXPECT_EQ(object["level"], "warn");
  EXPECT_EQ(object["host"], "ringd-2");
  EXPECT_EQ(object["pid"], 4711);
  EXPECT_EQ(object["rank"], 3);
  EXPECT_EQ(object["message"], "rank 3: peer rank 1 \"lost\"");
  fields.rank = -1;
  fields.message = std::string("bytes \xff\xfe from a stranger\nsecond line");
  const std::string unknown_rank = format_log_line(fields, true);
  EXPECT_EQ(unknown_rank.find('\n'), unknown_rank.size() - 1) << unknown_rank;
  const nlohmann::json parsed = nlohmann::json::parse(unknown_rank);  // invalid UTF-8 replaced
  EXPECT_FALSE(parsed.contains("rank"));
  EXPECT_NE(parsed["message"].get<std::string>().find("second line"), std::string::npos);
}

}  // namespace
}  // namespace ringd
