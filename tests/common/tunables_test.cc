// The value parsers behind RINGD_* variables and CLI flags, and the table docs/ shows.
#include "common/tunables.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
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

// A deadline is now + the timeout in nanoseconds of a 64-bit clock: 1e10 s overflowed it (the
// first wait timed out at once) and 1e300 s overflowed the conversion to milliseconds.
TEST(ParseSeconds, IsBoundedSoThatEveryDeadlineFits) {
  EXPECT_EQ(parse_seconds("T", "1e6"), std::chrono::seconds(1000000));
  EXPECT_LE(std::chrono::steady_clock::now().time_since_epoch() +
                std::chrono::duration<double>(kMaxSeconds),
            std::chrono::steady_clock::duration::max() / 2);
  for (const std::string text : {"1000000.001", "1e7", "1e10", "1e300", "1e999"}) {
    expect_invalid([&] { parse_seconds("RINGD_TIMEOUT", text); }, "RINGD_TIMEOUT", text);
  }
  try {
    parse_seconds("--timeout", "1e10");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("longer than the longest wait ringd allows, 1000000 s"),
              std::string::npos)
        << e.what();
  }
}

// Variables holding text (names, paths, secrets), which any value suits, and the identity
// variables src/job/topology.cc reads instead of load_tunables() (RINGD_REPLICAS, RINGD_SERVICE,
// RINGD_CLUSTER_DOMAIN, RINGD_TRANSPORT, RINGD_RENDEZVOUS_PORT: their bad values are
// tests/job/topology_test.cc's and pod_identity_test.cc's).
const std::set<std::string> kTextVariables = {
    "RINGD_IFACE",        "RINGD_JOB_SECRET",      "RINGD_IB_DEVICE",      "RINGD_TIMELINE",
    "RINGD_METRICS_FILE", "RINGD_REPLICAS",        "RINGD_SERVICE",        "RINGD_CLUSTER_DOMAIN",
    "RINGD_TRANSPORT",    "RINGD_RENDEZVOUS_PORT", "RINGD_TCP_CONGESTION", "RINGD_JOB_ID"};

// Sets one variable for the life of the object.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedVariable() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Every variable that is not text refuses nan, inf and numbers too large to be meant, naming
// itself: a variable added to the table is tried without being listed here.
TEST(LoadTunables, EveryNumericVariableRefusesNanInfAndHugeValues) {
  int tried = 0;
  for (const TunableInfo& info : tunable_table()) {
    if (kTextVariables.count(info.name)) continue;
    for (const std::string text : {"nan", "NaN", "inf", "-inf", "1e300", "1e10"}) {
      ScopedVariable variable(info.name, text);
      expect_invalid([] { load_tunables(); }, info.name, text);
    }
    ++tried;
  }
  EXPECT_GE(tried, 20);
}

TEST(LoadTunables, TheLongestDurationsAreAccepted) {
  ScopedVariable timeout("RINGD_TIMEOUT", "1e6");
  ScopedVariable warning("RINGD_STALL_WARNING_S", "1e6");
  ScopedVariable shutdown("RINGD_STALL_SHUTDOWN_S", "1e6");
  const Tunables t = load_tunables();
  EXPECT_EQ(t.timeout, std::chrono::seconds(1000000));
  EXPECT_EQ(t.stall_warning_s, 1e6);
  EXPECT_EQ(t.stall_shutdown_s, 1e6);
}

// A congestion control's name is checked for its form here (the kernel says whether it has it,
// tests/transport/tcp_congestion_test.cc); "system" keeps the kernel's default.
TEST(LoadTunables, TcpCongestionIsANameOrSystem) {
  EXPECT_EQ(load_tunables().tcp_congestion, "reno");
  for (const std::string text : {"system", "cubic", "bbr", "dctcp", "scalable", "h-tcp_2"}) {
    ScopedVariable variable("RINGD_TCP_CONGESTION", text);
    EXPECT_EQ(load_tunables().tcp_congestion, text);
  }
  for (const std::string text : {"Reno", "reno cubic", "../bbr", "sixteen_letters_"}) {
    ScopedVariable variable("RINGD_TCP_CONGESTION", text);
    expect_invalid([] { load_tunables(); }, "RINGD_TCP_CONGESTION", text);
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

TEST(LogLevel, TheUsualSpellingsInAnyCase) {
  for (const std::string text : {"error", "ERROR", "Err", "0"}) EXPECT_EQ(parse_log_level(text), 0);
  for (const std::string text : {"warn", "WARN", "warning", "WARNING", "Warning", "1"}) {
    EXPECT_EQ(parse_log_level(text), 1) << text;
  }
  for (const std::string text : {"info", "INFO", "2"}) EXPECT_EQ(parse_log_level(text), 2);
  for (const std::string text : {"debug", "Debug", "3"}) EXPECT_EQ(parse_log_level(text), 3);
  for (const std::string text : {"verbose", "4", "", "warnings", "-1"}) {
    expect_invalid([&] { parse_log_level(text); }, "RINGD_LOG_LEVEL", text);
  }
}

TEST(UnknownVariables, AMisspeltNameIsNamedWithTheClosestKnownOne) {
  const std::vector<std::string> warnings = unknown_variable_warnings(
      {"PATH=/bin", "RINGD_TIMOUT=5", "RINGD_TIMEOUT=5", "RINGD_IFACE=eth0", "RINGD_LOG_LEVL=info",
       "RINGD_BUILD_DIR=build", "RINGD_WHATEVER_ELSE=1", "OMPI_COMM_WORLD_RANK=0", "RINGD_=x"});
  ASSERT_EQ(warnings.size(), 4u) << ::testing::PrintToString(warnings);
  EXPECT_EQ(warnings[0],
            "RINGD_TIMOUT is not a ringd variable and is ignored; did you mean RINGD_TIMEOUT? "
            "(ringd --help-env lists them)");
  EXPECT_NE(warnings[1].find("RINGD_LOG_LEVL is not a ringd variable"), std::string::npos);
  EXPECT_NE(warnings[1].find("did you mean RINGD_LOG_LEVEL?"), std::string::npos) << warnings[1];
  EXPECT_EQ(warnings[2].find("did you mean"), std::string::npos) << warnings[2];  // nothing close
  EXPECT_NE(warnings[2].find("RINGD_WHATEVER_ELSE"), std::string::npos);
  EXPECT_NE(warnings[3].find("RINGD_ is not"), std::string::npos);
  EXPECT_TRUE(unknown_variable_warnings({}).empty());
}

// Every RINGD_* variable that scripts/ and bench/ read from the environment is either the
// binary's (tunable_table) or listed in script_variables(), so setting it never draws a warning;
// and the list holds no name that no script reads any more.
TEST(UnknownVariables, TheScriptsVariablesAreKnown) {
  std::set<std::string> known;
  for (const TunableInfo& info : tunable_table()) known.insert(info.name);
  const std::set<std::string> scripts(script_variables().begin(), script_variables().end());
  // Shell: ${RINGD_X...} or $RINGD_X; Python: environ.get("RINGD_X" / environ["RINGD_X" /
  // "RINGD_X": in an environment dict.
  const std::regex read(
      R"re(\$\{?(RINGD_[A-Z0-9_]+)|environ(?:\.get\(|\[)\s*"(RINGD_[A-Z0-9_]+)"|"(RINGD_[A-Z0-9_]+)":)re");
  std::set<std::string> read_by_scripts;
  const std::filesystem::path root(RINGD_SOURCE_DIR);
  for (const char* folder :
       {"scripts", "bench", "tests/integration", "tests/k8s", ".ci", "python/ringd"}) {
    if (!std::filesystem::exists(root / folder)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".sh" && ext != ".py" && ext != "")) continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string body = text.str();
      for (std::sregex_iterator it(body.begin(), body.end(), read), end; it != end; ++it) {
        for (size_t group = 1; group <= 3; ++group) {
          if ((*it)[group].matched) read_by_scripts.insert((*it)[group].str());
        }
      }
    }
  }
  ASSERT_FALSE(read_by_scripts.empty()) << "no script found under " << root;
  for (const std::string& name : read_by_scripts) {
    EXPECT_TRUE(known.count(name) || scripts.count(name))
        << name << " is read by a script but neither a tunable nor in script_variables(): ringd "
        << "would warn about it";
  }
  for (const std::string& name : scripts) {
    EXPECT_TRUE(read_by_scripts.count(name)) << name << " is in script_variables() but no script "
                                             << "reads it";
    EXPECT_FALSE(known.count(name)) << name << " is a tunable and a script variable";
  }
}

// RINGD_JOB_SECRET_FILE pointed at something that is not a secret file: an error naming it at
// once, not a hang (a FIFO) or an endless read (/dev/zero; issue 35, item 9).
TEST(JobSecretFile, AFifoADeviceOrADirectoryIsRefusedAtOnce) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ringd-secret-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "a-directory");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  const std::pair<std::string, std::string> cases[] = {
      {(dir / "fifo").string(), "is a FIFO, not a regular file"},
      {"/dev/zero", "is a character device, not a regular file"},
      {(dir / "a-directory").string(), "is a directory, not a regular file"},
      {(dir / "absent").string(), "does not exist"},
  };
  for (const auto& [path, expected] : cases) {
    ScopedVariable secret("RINGD_JOB_SECRET_FILE", path);
    const auto start = std::chrono::steady_clock::now();
    try {
      load_tunables();
      ADD_FAILURE() << path << " was accepted as a secret file";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("RINGD_JOB_SECRET_FILE"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << path;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ringd
