// `ringd ps`: one parameter server on its own node (or several under mpirun, one per process), for
// `ringd train --mode ps --ps-servers ...` workers. cli.cc hands the command line over here when
// it starts with "ps". The server itself is src/ps/server.h.
#pragma once

namespace ringd::cli {

// argv[1] == "ps".
bool is_ps_command(int argc, const char* const* argv);

// Parse, serve until every worker of the job has finished; exit code 0, 1 (the job failed: a lost
// worker, named) or 2 (bad command line).
int run_ps_command_line(int argc, const char* const* argv);

}  // namespace ringd::cli
