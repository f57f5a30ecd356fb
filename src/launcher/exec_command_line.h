// What `ringd exec HOST WORD...` asks an agent to run. Open MPI's rsh launcher (like ssh) hands its
// agent one shell command line; the agent does not give it to a shell. It parses the small subset
// Open MPI produces and runs the program directly, so an authenticated caller still cannot chain
// commands, redirect files or substitute output:
//
//   [NAME=VALUE ; | export NAME ; | export NAME=VALUE ;]... [NAME=VALUE]... PROGRAM ARG...
//
// Words are split on blanks; '...' is literal, "..." allows \" \\ \$ \` escapes and expansions,
// a backslash outside quotes escapes the next character; $NAME, ${NAME} and ${NAME:-WORD} expand
// from the agent's environment and earlier assignments (Open MPI's --prefix form is
// "PATH=/opt/bin:$PATH ; export PATH ; ... orted ..."). Anything else a shell would treat
// specially outside quotes (| & < > ( ) ` $( and ; in any other position) is refused. Which
// PROGRAM and which assignments the agent then accepts is exec_allow_list.h's rule. Open MPI's
// wrapper for sh/ksh remote shells, "( test ! -r ./.profile || . ./.profile; LINE )", is accepted
// as LINE (no profile is sourced).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "job/topology.h"

namespace ringd::launcher {

struct ExecCommand {
  std::vector<std::pair<std::string, std::string>> assignments;  // in order, all exported
  std::vector<std::string> argv;
};

// Throws ringd::Error(kInvalidArgument) saying what in `line` is not allowed.
ExecCommand parse_exec_command_line(const std::string& line, const job::EnvLookup& env);

// Programs an agent runs without --allow: Open MPI's daemons and ringd itself (base names, found on
// the agent's PATH: exec_allow_list.h).
const std::vector<std::string>& default_allowed_programs();

// Joins `words` with spaces, as ssh does with its command arguments.
std::string join_command_words(const std::vector<std::string>& words);

}  // namespace ringd::launcher
