// MPI_Init_thread with its wait bounded and interruptible.
//
// Under mpirun, MPI_Init returns only once every process of the job has called it, and nothing
// can be raised from inside it: a rank that never starts ringd (its script failed or exited before
// ringd.init(), or does not call it) holds every other rank there, silently and for ever. While
// MPI_Init runs, a watchdog thread ends this process, saying why, when
//   - `timeout` passes (RINGD_TIMEOUT, or the command's --timeout): the message says how many
//     processes the job has and which of this host's ranks reached MPI_Init (each rank leaves a
//     marker in mpirun's session directory for this host first), so on one host the missing rank
//     is named, and on several the host that lacks one says so;
//   - SIGINT arrives while a handler (Python's, which only sets a flag MPI never looks at) would
//     otherwise swallow it: Ctrl-C ends the wait (exit status 130).
// mpirun then ends the job's other processes. Once MPI_Init has returned, everything is as before
// (the previous SIGINT disposition restored).
#pragma once

#include <chrono>

namespace ringd::mpi {

// Returns the thread level MPI provides; throws ringd::Error(kUnavailable) when MPI_Init_thread
// fails.
int init_thread_bounded(int required, std::chrono::milliseconds timeout);

}  // namespace ringd::mpi
