// C API only: keep <mpi.h> from pulling in the deprecated C++ bindings (libmpi_cxx).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include "transport/mpi/mpi_errors.h"

#include <sstream>

namespace ringd::mpi {

std::string describe_mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  int error_class = code;
  MPI_Error_class(code, &error_class);
  std::ostringstream os;
  os << (length > 0 ? std::string(text, static_cast<size_t>(length)) : "unknown MPI error")
     << " (MPI error class " << error_class << ")";
  return os.str();
}

ErrorCode error_code_for_mpi_error(int code) {
  int error_class = code;
  if (MPI_Error_class(code, &error_class) != MPI_SUCCESS) error_class = code;
  switch (error_class) {
    case MPI_ERR_TRUNCATE: return ErrorCode::kMismatch;
    case MPI_ERR_BUFFER:
    case MPI_ERR_COUNT:
    case MPI_ERR_TYPE:
    case MPI_ERR_TAG:
    case MPI_ERR_COMM:
    case MPI_ERR_RANK:
    case MPI_ERR_REQUEST:
    case MPI_ERR_ARG: return ErrorCode::kInternal;
    default: return ErrorCode::kPeerLost;
  }
}

void check_mpi(int code, const std::string& what) {
  if (code == MPI_SUCCESS) return;
  const ErrorCode error_code = error_code_for_mpi_error(code);
  std::ostringstream os;
  os << what << " failed: " << describe_mpi_error(code);
  if (error_code == ErrorCode::kPeerLost) {
    os << "; the peer process has probably died or its connection broke: check that rank's log";
  } else if (error_code == ErrorCode::kMismatch) {
    os << "; the ranks disagree on the message size (are they running the same collective?)";
  }
  detail::throw_error(error_code, os.str(), __FILE__, __LINE__);
}

}  // namespace ringd::mpi
