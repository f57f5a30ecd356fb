// Which file an agent runs for a program word, and which environment assignments it takes: real
// paths on the agent's own search path, never a caller's script, symlink or PATH; no LD_*.
#include "launcher/exec_allow_list.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>

namespace ringd::launcher {
namespace {

// A scratch tree:  bin/orted bin/ringd (the agent's programs), other/orted (another file of that
// name), evil/orted -> /bin/sh, alias/orted -> ../bin/orted.
class ExecAllowList : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ringd-allow-list-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
    for (const char* dir : {"/bin", "/other", "/evil", "/alias"}) {
      ASSERT_EQ(::mkdir((root_ + dir).c_str(), 0755), 0);
    }
    script(root_ + "/bin/orted");
    script(root_ + "/bin/ringd");
    script(root_ + "/other/orted");
    ASSERT_EQ(::symlink("/bin/sh", (root_ + "/evil/orted").c_str()), 0);
    ASSERT_EQ(::symlink("../bin/orted", (root_ + "/alias/orted").c_str()), 0);
  }
  void TearDown() override { std::system(("rm -rf " + root_).c_str()); }

  static void script(const std::string& path) {
    std::ofstream(path) << "#!/bin/sh\necho " << path << "\n";
    ::chmod(path.c_str(), 0755);
  }
  ProgramChoice choose(const std::string& word,
                       std::vector<std::string> allowed = {"orted", "prted", "ringd"}) {
    return choose_program(word, allowed, root_ + "/bin");
  }

  std::string root_;
};

TEST_F(ExecAllowList, ANameIsFoundOnTheAgentsSearchPath) {
  EXPECT_EQ(choose("orted").path, root_ + "/bin/orted");
  EXPECT_EQ(choose("ringd").refusal, "");
  // On the system, but not on the agent's search path: not what the agent runs.
  EXPECT_NE(choose("sh").refusal.find("program 'sh' is not allowed here"), std::string::npos)
      << choose("sh").refusal;
  EXPECT_EQ(choose("prted").refusal,
            "cannot run prted: not found in the agent's PATH=" + root_ + "/bin");
}

TEST_F(ExecAllowList, AnAbsolutePathMustBeTheAllowedFileItself) {
  EXPECT_EQ(choose(root_ + "/bin/orted").path, root_ + "/bin/orted");
  EXPECT_EQ(choose(root_ + "/bin/../bin/orted").path, root_ + "/bin/orted");
  // A symlink to the allowed file runs the allowed file (the agent's own path, not the link).
  EXPECT_EQ(choose(root_ + "/alias/orted").path, root_ + "/bin/orted");
  // Another file named orted, and a symlink named orted to a shell, are refused.
  const std::string other = choose(root_ + "/other/orted").refusal;
  EXPECT_NE(other.find("program '" + root_ + "/other/orted' is not allowed here"),
            std::string::npos)
      << other;
  EXPECT_NE(other.find("orted = " + root_ + "/bin/orted"), std::string::npos) << other;
  char shell[PATH_MAX];
  ASSERT_NE(::realpath("/bin/sh", shell), nullptr);
  const std::string evil = choose(root_ + "/evil/orted").refusal;
  EXPECT_NE(evil.find(std::string("is not allowed here: it is ") + shell), std::string::npos)
      << evil;
  EXPECT_NE(choose(root_ + "/bin/missing").refusal.find("no such file"), std::string::npos);
}

TEST_F(ExecAllowList, RelativePathsAreNeverRun) {
  for (const char* word : {"bin/orted", "./orted", "../bin/orted"}) {
    EXPECT_NE(choose(word).refusal.find("a relative path is never run"), std::string::npos) << word;
  }
}

TEST_F(ExecAllowList, RelativeAndEmptySearchPathEntriesAreSkipped) {
  char saved[PATH_MAX];
  ASSERT_NE(::getcwd(saved, sizeof(saved)), nullptr);
  ASSERT_EQ(::chdir((root_ + "/other").c_str()), 0);
  const ProgramChoice dot = choose_program("orted", {"orted"}, ".:");
  const ProgramChoice found = choose_program("orted", {"orted"}, ".:" + root_ + "/bin");
  ASSERT_EQ(::chdir(saved), 0);
  EXPECT_EQ(dot.refusal, "cannot run orted: not found in the agent's PATH=.:");
  EXPECT_EQ(found.path, root_ + "/bin/orted");
}

TEST_F(ExecAllowList, AnAbsoluteAllowEntryAllowsThatFileOnly) {
  const std::vector<std::string> allowed = {root_ + "/other/orted"};
  EXPECT_EQ(choose(root_ + "/other/orted", allowed).path, root_ + "/other/orted");
  // "orted" on the search path is another file.
  EXPECT_NE(choose("orted", allowed).refusal.find("is not allowed here"), std::string::npos);
}

ExecCommand with_assignments(std::vector<std::pair<std::string, std::string>> assignments) {
  ExecCommand command;
  command.assignments = std::move(assignments);
  command.argv = {"orted"};
  return command;
}

TEST(ExecEnvironment, OpenMpiPrrtePmixAndRingdVariablesAndPathPass) {
  EXPECT_EQ(check_environment(with_assignments({{"PATH", "/opt/bin:/usr/bin"},
                                                {"OMPI_MCA_btl", "tcp,self"},
                                                {"OPAL_PREFIX", "/opt/ompi"},
                                                {"ORTE_X", "1"},
                                                {"PRTE_MCA_y", "2"},
                                                {"PRRTE_Z", "3"},
                                                {"PMIX_MCA_w", "4"},
                                                {"RINGD_TIMEOUT", "30"}})),
            "");
}

TEST(ExecEnvironment, LoaderVariablesAreRefusedNamingTheRule) {
  for (const char* name : {"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_LIBRARY_PATH"}) {
    const std::string refusal = check_environment(with_assignments({{name, "/tmp/x.so"}}));
    EXPECT_EQ(refusal.rfind(std::string("environment assignment ") + name +
                                "=/tmp/x.so refused: LD_* and DYLD_* variables are never passed "
                                "to a command (docs/launcher.md)",
                            0),
              0u)
        << refusal;
  }
}

TEST(ExecEnvironment, OtherVariablesAreRefusedNamingTheRule) {
  const std::string refusal = check_environment(
      with_assignments({{"OMPI_MCA_x", "1"}, {"BASH_ENV", std::string(100, 'v')}}));
  EXPECT_EQ(refusal, "environment assignment BASH_ENV=" + std::string(40, 'v') +
                         "... refused: a command may set only PATH and OMPI_*, OPAL_*, ORTE_*, "
                         "PRTE_*, PRRTE_*, PMIX_*, RINGD_* variables (docs/launcher.md)");
  EXPECT_NE(check_environment(with_assignments({{"HOME", "/tmp"}})), "");
  EXPECT_NE(check_environment(with_assignments({{"ompi_lowercase", "1"}})), "");
}

}  // namespace
}  // namespace ringd::launcher
