// RINGD_TIMELINE: every rank's file (a %r in the path) is valid Chrome-trace JSON with a row per
// tensor holding its phases, and a "cycles" row.
#include "fusion/timeline.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "fusion/engine_test_support.h"
#include "ringd/engine.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

std::filesystem::path temp_dir() {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ringd_timeline_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

nlohmann::json load(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  return nlohmann::json::parse(in);  // throws on invalid JSON
}

// Phase names per row ("cycles" or a tensor name).
std::map<std::string, std::set<std::string>> phases_by_row(const nlohmann::json& trace) {
  std::map<int, std::string> rows;
  for (const auto& event : trace) {
    if (event["ph"] == "M" && event["name"] == "thread_name") {
      rows[event["tid"].get<int>()] = event["args"]["name"].get<std::string>();
    }
  }
  std::map<std::string, std::set<std::string>> phases;
  for (const auto& event : trace) {
    if (event["ph"] == "M") continue;
    EXPECT_TRUE(event.contains("ts"));
    phases[rows.at(event["tid"].get<int>())].insert(event["name"].get<std::string>());
  }
  return phases;
}

TEST(Timeline, EveryRankWritesValidChromeTraceJson) {
  const auto dir = temp_dir();
  // Uncompressed, a fused bucket runs on its members' buffers (allreduce_list): no copies; with
  // fp16 its members are converted into a fusion buffer and back.
  for (const Compression compression : {Compression::kNone, Compression::kFp16}) {
    SCOPED_TRACE(compression_name(compression));
    const std::string pattern = (dir / "trace.%r.json").string();
    testing::run_ranks(testing::Transport::kInproc, 2, [&](Context& ctx) {
      EngineOptions options = testing::test_engine_options();
      options.timeline_path = pattern;
      options.compression = compression;
      Engine engine(ctx, options);
      std::vector<testing::WorkItem> items = testing::float_items(ctx.rank(), 4, 1000);
      for (int step = 0; step < 2; ++step) testing::run_group_step(engine, items, "layer");
    });
    for (int rank = 0; rank < 2; ++rank) {
      const nlohmann::json trace = load(dir / ("trace." + std::to_string(rank) + ".json"));
      ASSERT_TRUE(trace.is_array());
      const auto phases = phases_by_row(trace);
      ASSERT_TRUE(phases.count("cycles"));
      EXPECT_TRUE(phases.at("cycles").count("cycle"));
      EXPECT_TRUE(phases.at("cycles").count("negotiate"));
      // t1 ran fused with the rest of its group.
      ASSERT_TRUE(phases.count("t1"));
      for (const char* phase : {"submitted", "negotiate", "fused", "allreduce", "done"}) {
        EXPECT_TRUE(phases.at("t1").count(phase)) << "rank " << rank << " lacks " << phase;
      }
      const bool copied = compression != Compression::kNone;
      for (const char* phase : {"memcpy in", "memcpy out"}) {
        EXPECT_EQ(phases.at("t1").count(phase), copied ? 1u : 0u)
            << "rank " << rank << " " << phase;
      }
    }
  }
  std::filesystem::remove_all(dir);
}

// Without a %r only rank 0 writes; a full queue drops events (counted) instead of growing.
TEST(Timeline, BoundedQueueDropsAndCounts) {
  const auto dir = temp_dir();
  const auto path = dir / "bounded.json";
  {
    fusion::Timeline timeline(path.string(), 0);
    const auto now = fusion::Timeline::Clock::now();
    // No flush: the writer wakes at half capacity, but cannot keep up with a burst this size
    // every time; whatever it misses is counted.
    for (size_t i = 0; i < 3 * fusion::Timeline::kMaxQueuedEvents; ++i) {
      timeline.instant("t", "tick", now);
    }
  }
  const nlohmann::json trace = load(path);
  ASSERT_TRUE(trace.is_array());
  size_t ticks = 0;
  int64_t dropped = 0;
  for (const auto& event : trace) {
    if (event["name"] == "tick") ++ticks;
    if (event["name"] == "dropped events") dropped = event["args"]["dropped"].get<int64_t>();
  }
  EXPECT_EQ(ticks + static_cast<size_t>(dropped), 3 * fusion::Timeline::kMaxQueuedEvents);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ringd
