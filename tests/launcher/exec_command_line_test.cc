// What an agent agrees to run: the ssh-style command lines Open MPI's rsh launcher produces are
// parsed without a shell; anything else a shell would do is refused.
#include "launcher/exec_command_line.h"

#include <gtest/gtest.h>

#include <map>

#include "launcher/exec_allow_list.h"
#include "ringd/error.h"
#include "testing/fake_env.h"

namespace ringd::launcher {
namespace {

using testing::fake_env;

const job::EnvLookup kEnv = fake_env({{"PATH", "/usr/bin"}, {"HOME", "/root"}});

using Words = std::vector<std::string>;

TEST(ExecCommandLine, OpenMpiOrtedLine) {
  // Open MPI 4.1's orted line as the rsh agent receives it (words joined by ringd exec).
  const std::string line = join_command_words(
      {"orted", "-mca", "ess", "\"env\"", "-mca", "ess_base_jobid", "\"2785476608\"", "-mca",
       "ess_base_vpid", "1", "-mca", "orte_hnp_uri", "\"2785476608.0;tcp://10.77.0.1:41231\"",
       "-mca", "plm_rsh_agent", "\"/usr/bin/ringd exec\""});
  const ExecCommand command = parse_exec_command_line(line, kEnv);
  EXPECT_TRUE(command.assignments.empty());
  EXPECT_EQ(command.argv, (Words{"orted", "-mca", "ess", "env", "-mca", "ess_base_jobid",
                                 "2785476608", "-mca", "ess_base_vpid", "1", "-mca", "orte_hnp_uri",
                                 "2785476608.0;tcp://10.77.0.1:41231", "-mca", "plm_rsh_agent",
                                 "/usr/bin/ringd exec"}));
  EXPECT_EQ(check_environment(command), "");
}

TEST(ExecCommandLine, OpenMpiPrefixFormSetsTheEnvironment) {
  const ExecCommand command = parse_exec_command_line(
      "PATH=/opt/ompi/bin:$PATH ; export PATH ; LD_LIBRARY_PATH=/opt/ompi/lib:${LD_LIBRARY_PATH:-} "
      "; export LD_LIBRARY_PATH ; /opt/ompi/bin/orted -mca ess \"env\"",
      kEnv);
  ASSERT_EQ(command.assignments.size(), 2u);
  EXPECT_EQ(command.assignments[0],
            std::make_pair(std::string("PATH"), std::string("/opt/ompi/bin:/usr/bin")));
  EXPECT_EQ(command.assignments[1],
            std::make_pair(std::string("LD_LIBRARY_PATH"), std::string("/opt/ompi/lib:")));
  EXPECT_EQ(command.argv, (Words{"/opt/ompi/bin/orted", "-mca", "ess", "env"}));
  // Parsed, but not run: the loader's variables never reach a command (exec_allow_list.h).
  EXPECT_NE(check_environment(command).find("LD_LIBRARY_PATH=/opt/ompi/lib: refused: LD_* and "
                                            "DYLD_* variables are never passed to a command"),
            std::string::npos)
      << check_environment(command);
}

TEST(ExecCommandLine, OpenMpiProfileWrapperForShIsDropped) {
  const ExecCommand command = parse_exec_command_line(
      "( test ! -r ./.profile || . ./.profile; orted -mca ess \"env\" )", kEnv);
  EXPECT_EQ(command.argv, (Words{"orted", "-mca", "ess", "env"}));
  EXPECT_THROW(parse_exec_command_line("( test ! -r ./.profile || . ./.profile; orted", kEnv),
               Error);
  EXPECT_THROW(parse_exec_command_line("( sh -c x )", kEnv), Error);
}

TEST(ExecCommandLine, QuotingAndExpansion) {
  const ExecCommand command = parse_exec_command_line(
      "A=1 B=\"$A two\" ringd 'single $HOME' \"double $HOME\" back\\ slash ${UNSET:-dflt} "
      "\"\\\"q\\\"\"",
      kEnv);
  EXPECT_EQ(command.assignments.size(), 2u);
  EXPECT_EQ(command.assignments[1].second, "1 two");
  EXPECT_EQ(command.argv,
            (Words{"ringd", "single $HOME", "double /root", "back slash", "dflt", "\"q\""}));
}

TEST(ExecCommandLine, ShellSyntaxIsRefused) {
  for (const char* line :
       {"orted ; rm -rf /", "orted | nc evil 1", "orted && reboot", "orted > /etc/passwd",
        "orted < /etc/shadow", "orted $(id)", "orted `id`", "orted \"`id`\"", "(orted)", "orted &",
        "echo hi ; orted", "export 1X ; orted", "orted 'unterminated", "orted \"unterminated",
        "orted ${A", "", "   ", "A=1 ;", "A=1"}) {
    EXPECT_THROW(parse_exec_command_line(line, kEnv), Error) << line;
  }
}

}  // namespace
}  // namespace ringd::launcher
