#include "cli/job_flags.h"

#include <CLI/CLI.hpp>

#include "cli/flag_checks.h"
#include "ringd/config.h"

namespace ringd::cli {

void add_job_options(CLI::App& app, job::TopologyFlags* topology, std::string* interface,
                     int* tcp_port, std::string* timeout_text) {
  app.add_option("--transport", topology->transport,
                 "tcp, mpi, ibverbs or inproc (default: mpi under mpirun when built with MPI, "
                 "else tcp)")
      ->check(CLI::IsMember({"tcp", "mpi", "ibverbs", "inproc"}));
  app.add_option("--ranks", topology->inproc_ranks,
                 "--transport inproc: number of ranks (threads in this process)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--rank", topology->rank, "this process's rank (without mpirun)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--size", topology->size, "number of ranks (without mpirun)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--rendezvous", topology->rendezvous,
                 "HOST:PORT of rank 0's rendezvous store (without mpirun, tcp)")
      ->type_name("HOST:PORT");
  app.add_option("--iface", *interface,
                 "tcp: listen on and advertise this interface's IPv4 address (default "
                 "RINGD_IFACE)")
      ->type_name("NAME");
  app.add_option("--tcp-port", *tcp_port, "tcp: this rank's listening port (default: any)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--timeout", *timeout_text, "seconds any wait may take (overrides RINGD_TIMEOUT)")
      ->type_name("SECONDS")
      ->check(seconds_check("--timeout"));
}

void add_local_device_options(CLI::App& app, int* devices, std::string* hierarchy_text) {
  app.add_option("--local-devices", *devices,
                 "devices in each process (one node): CPU devices, or GPUs with --gpus; each "
                 "with its own gradients (train: its own share of the batch); the engine's "
                 "buckets go through the hierarchy: reduce inside the node, across nodes, "
                 "broadcast inside (default 1: flat)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--hierarchy", *hierarchy_text,
                 "with --local-devices > 1: reduce-bcast (default) or rs-ag")
      ->check(CLI::IsMember({"reduce-bcast", "rs-ag"}));
}

void check_gpus_flag(const std::optional<Compression>& compression) {
  if (!RINGD_HAVE_NCCL) {
    throw CLI::ValidationError("--gpus",
                               "needs a CUDA build with NCCL; this ringd has none "
                               "(`ringd --version` lists what it was built with)");
  }
  if (compression && *compression != Compression::kNone) {
    throw CLI::ValidationError("--gpus",
                               "runs uncompressed buckets only (GPU buffers are not "
                               "copied into fusion buffers); drop --compression");
  }
}

Hierarchy local_hierarchy(int devices, const std::string& hierarchy_text,
                          const std::optional<Compression>& compression, bool group_of_one) {
  if (devices > 1 && compression == Compression::kDgc) {
    throw CLI::ValidationError("--compression",
                               "dgc does not run over local devices yet; use --local-devices 1 "
                               "with dgc");
  }
  if (hierarchy_text.empty()) return kDefaultHierarchy;
  if (devices == 1 && !group_of_one) {
    throw CLI::ValidationError("--hierarchy",
                               "needs --local-devices > 1 (one device per process "
                               "has no step inside the node)");
  }
  return parse_hierarchy(hierarchy_text);
}

}  // namespace ringd::cli
