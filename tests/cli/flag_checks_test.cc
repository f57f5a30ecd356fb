// Every floating-point flag and every duration flag of every command refuses nan and inf (and a
// duration too long to be a deadline) with a usage error (exit 2) that names the flag. The flags
// are read from each command's --help, so one added later is tried without being listed here.
//
// Each try appends an unknown flag: CLI11 checks the values before it complains about extra
// words, so a value that slips through ends in "not expected" (exit 2 too, but without the flag's
// name) and never starts a job.
#include "cli/flag_checks.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "common/tunables.h"

namespace ringd::cli {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

Result run(std::vector<std::string> words) {
  words.insert(words.begin(), "ringd");
  std::vector<const char*> argv;
  for (const std::string& word : words) argv.push_back(word.c_str());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  Result result;
  result.exit_code = run_command_line(static_cast<int>(argv.size()), argv.data());
  result.out = testing::internal::GetCapturedStdout();
  result.err = testing::internal::GetCapturedStderr();
  return result;
}

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& word : words) text += (text.empty() ? "" : " ") + word;
  return text;
}

// Every command with flags of its own (exec parses its few by hand: parse_seconds, tested in
// tunables_test).
const std::vector<std::vector<std::string>>& commands() {
  static const std::vector<std::vector<std::string>> list = {{"bench", "allreduce"},
                                                             {"bench", "replay"},
                                                             {"train"},
                                                             {"ps"},
                                                             {"agent"},
                                                             {"launch"},
                                                             {"hostfile"}};
  return list;
}

// The flags whose --help line shows `kind` as their value (a hidden flag, of group "", would not
// be listed; CLI11 also leaves its name out of errors, so ringd hides none): "  --lr FLOAT:in [0 -
// 1000]" is a FLOAT flag (CLI11 names every float or double target so), "  --timeout SECONDS" a
// duration.
std::vector<std::string> flags_of_kind(const std::vector<std::string>& command,
                                       const std::string& kind) {
  const Result help = run([&] {
    std::vector<std::string> words = command;
    words.push_back("--help");
    return words;
  }());
  EXPECT_EQ(help.exit_code, 0) << joined(command) << " --help: " << help.err;
  const std::regex line("^ +(?:-[A-Za-z],)?(--[A-Za-z0-9-]+) " + kind + "(?::|\\s|$)");
  std::vector<std::string> flags;
  std::string::size_type start = 0;
  while (start < help.out.size()) {
    std::string::size_type end = help.out.find('\n', start);
    if (end == std::string::npos) end = help.out.size();
    std::smatch match;
    const std::string text = help.out.substr(start, end - start);
    if (std::regex_search(text, match, line)) flags.push_back(match[1]);
    start = end + 1;
  }
  return flags;
}

void expect_refused(const std::vector<std::string>& command, const std::string& flag,
                    const std::string& value) {
  std::vector<std::string> words = command;
  words.insert(words.end(), {flag, value, "--no-such-flag-after-the-value"});
  const Result result = run(words);
  EXPECT_EQ(result.exit_code, 2) << joined(words) << "\n" << result.err;
  EXPECT_NE(result.err.find(flag + ":"), std::string::npos)
      << joined(words) << " should be refused naming " << flag << "; stderr:\n"
      << result.err;
}

TEST(FlagChecks, EveryFloatFlagOfEveryCommandRefusesNanAndInf) {
  int tried = 0;
  for (const std::vector<std::string>& command : commands()) {
    for (const std::string& flag : flags_of_kind(command, "FLOAT")) {
      for (const char* value :
           {"nan", "NaN", "-nan", "inf", "-inf", "infinity", "1e999", "1e300"}) {
        expect_refused(command, flag, value);
      }
      ++tried;
    }
  }
  // train: --compute-ms --lr --momentum --weight-decay --cycle-time-ms --throttle-ms; bench replay:
  // --compute-ms --cycle-time-ms; agent --stop-grace; launch and hostfile --wait-timeout.
  EXPECT_GE(tried, 11) << "the --help parsing found fewer FLOAT flags than there are";
}

TEST(FlagChecks, EveryDurationFlagIsFiniteAndBounded) {
  int tried = 0;
  for (const std::vector<std::string>& command : commands()) {
    for (const std::string& flag : flags_of_kind(command, "SECONDS")) {
      for (const char* value : {"nan", "inf", "1e10", "1e300", "0"}) {
        expect_refused(command, flag, value);
      }
      ++tried;
    }
  }
  EXPECT_GE(tried, 4) << "bench, bench replay, train and ps each have --timeout";
}

TEST(FlagChecks, TheLongestDurationIsAccepted) {
  const std::string longest = std::to_string(static_cast<int64_t>(kMaxSeconds));
  std::vector<std::string> words = {"bench", "allreduce", "--timeout", longest,
                                    "--no-such-flag-after-the-value"};
  const Result result = run(words);
  EXPECT_EQ(result.err.find("--timeout:"), std::string::npos) << result.err;
}

TEST(FlagChecks, FiniteRangeSaysWhatItTakes) {
  CLI::App app;
  double value = 0;
  app.add_option("--x", value)->check(finite_range(0, 2.5));
  const char* good[] = {"prog", "--x", "2.5"};
  app.parse(3, good);
  EXPECT_EQ(value, 2.5);
  for (const char* text : {"nan", "inf", "-0.5", "3", "1x", ""}) {
    const char* bad[] = {"prog", "--x", text};
    try {
      app.parse(3, bad);
      ADD_FAILURE() << text << " was accepted";
    } catch (const CLI::ValidationError& error) {
      EXPECT_NE(std::string(error.what()).find("is not a finite number in [0 - 2.5]"),
                std::string::npos)
          << error.what();
    } catch (const CLI::ParseError&) {
      // "" is not even a value to CLI11
    }
  }
}

}  // namespace
}  // namespace ringd::cli
