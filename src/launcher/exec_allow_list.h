// What the agent agrees to run for an authenticated `ringd exec` caller, once its command line has
// been parsed (exec_command_line.h): which file, and which environment assignments.
//
// Programs: the agent's search path is its own PATH as it was when the agent started (absolute
// directories only); a command's own PATH=... changes the child's environment, never where the
// program is looked up. Each allowed entry is a base name (found on that search path: orted,
// prted, ringd, --allow NAME) or an absolute path (--allow /opt/tool/bin/x). The program word
//   - NAME is looked up on the search path;
//   - /ABS/PATH is taken as given;
//   - a relative path (bin/orted, ./orted) is refused;
// then both sides are compared by real path (symlinks and .. resolved): the word must resolve to
// the same file as an allowed entry, and the agent executes that entry's own file, never the
// caller's path (a symlink swapped after the check changes nothing). A script named orted in /tmp,
// or a symlink to /bin/sh, is refused.
//
// Environment: assignments may set only PATH and the families Open MPI, PRRTE, PMIx and ringd
// read (OMPI_*, OPAL_*, ORTE_*, PRTE_*, PRRTE_*, PMIX_*, RINGD_*); LD_* and DYLD_* (the dynamic
// loader's: LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT...) are never passed. Anything else refuses the
// command, naming the rule.
#pragma once

#include <string>
#include <vector>

#include "launcher/exec_command_line.h"

namespace ringd::launcher {

struct ProgramChoice {
  std::string path;     // the file to execute; "" when refused
  std::string refusal;  // why the command is not run; "" when allowed
};

// `search_path`: the agent's PATH captured at its start (':'-separated).
ProgramChoice choose_program(const std::string& word, const std::vector<std::string>& allowed,
                             const std::string& search_path);

// "" when every assignment of `command` may reach the child, else the refusal naming the rule.
std::string check_environment(const ExecCommand& command);

}  // namespace ringd::launcher
