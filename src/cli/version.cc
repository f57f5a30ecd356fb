#include "cli/version.h"

#include "ringd/config.h"

namespace ringd {
namespace {

std::string item(bool built, const char* name) {
  return std::string(built ? "[X] " : "[ ] ") + name;
}

}  // namespace

const char* version_string() { return RINGD_VERSION; }

std::string build_report() {
  std::string out = std::string("ringd ") + version_string() + "\n";
  out += "Transports:       " + item(true, "tcp") + "  " + item(RINGD_HAVE_MPI, "mpi") + "  " +
         item(RINGD_HAVE_IBVERBS, "ibverbs (RDMA)") + "  " + item(true, "inproc") + "\n";
  out += "Local groups:     " + item(true, "CPU devices") + "  " +
         item(RINGD_HAVE_NCCL, "NCCL (GPUs)") + "\n";
  out +=
      "Reduce kernels:   " + item(true, "CPU (SIMD)") + "  " + item(RINGD_HAVE_CUDA, "CUDA") + "\n";
  out += "Matrix products:  " + item(true, "OpenBLAS") + "  " + item(RINGD_HAVE_CUBLAS, "cuBLAS") +
         "\n";
  out += "Launch:           " + item(RINGD_HAVE_MPI, "mpirun (Open MPI)") + "  " +
         item(true, "standalone (--rendezvous)") + "  " + item(true, "StatefulSet (ringd agent)");
  return out;
}

std::string build_info_labels() {
  const auto flag = [](const char* name, bool built) {
    return std::string(",") + name + "=\"" + (built ? "true" : "false") + "\"";
  };
  return std::string("version=\"") + version_string() + "\"" + flag("mpi", RINGD_HAVE_MPI) +
         flag("ibverbs", RINGD_HAVE_IBVERBS) + flag("cuda", RINGD_HAVE_CUDA) +
         flag("nccl", RINGD_HAVE_NCCL) + flag("cublas", RINGD_HAVE_CUBLAS);
}

}  // namespace ringd
