// Turning MPI error codes into ringd::Error. The communicators ringd owns use MPI_ERRORS_RETURN, so
// every MPI call's result passes through here.
#pragma once

#include <mpi.h>

#include <string>

#include "ringd/error.h"

namespace ringd::mpi {

// "MPI_ERR_TRUNCATE: message truncated (class 15)".
std::string describe_mpi_error(int code);

// Which ErrorCode an MPI error class stands for: truncation -> kMismatch (the ranks disagree on
// the message size); argument/communicator/type errors -> kInternal (a ringd bug); everything else
// (MPI_ERR_OTHER, MPI_ERR_INTERN, MPI_ERR_UNKNOWN, ULFM's MPIX_ERR_PROC_FAILED, ...) -> kPeerLost,
// since with point-to-point traffic on a private communicator that is what a failed process or
// broken connection looks like.
ErrorCode error_code_for_mpi_error(int code);

// Throws unless `code` is MPI_SUCCESS. `what` names the call and the peer, e.g.
// "rank 2: MPI_Isend of 4096 bytes to peer rank 3".
void check_mpi(int code, const std::string& what);

}  // namespace ringd::mpi
