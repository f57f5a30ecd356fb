#include "cli/ps_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/command_errors.h"
#include "cli/flag_checks.h"
#include "common/files.h"
#include "common/tunables.h"
#include "job/topology.h"
#include "net/socket.h"
#include "ps/server.h"
#include "ringd/config.h"
#include "ringd/error.h"

namespace ringd::cli {
namespace {

constexpr const char* kFooter = R"(
The server learns the job from its workers: the first to connect fixes the number of workers, the
model's tensors, which of them this server holds (sharding), sync or async and the optimizer;
every later worker must agree. It prints "ringd ps: serving on HOST:PORT" and exits 0 once every
worker has finished (exit 1 if a worker was lost). Workers list the servers in one order, the
same everywhere: that order is the server index.

Under mpirun (or torchrun), each process is one server: a fixed --listen port is offset by the
process's local rank on its host, and %r in --address-file becomes its rank.

Examples:
  ringd ps --listen 0.0.0.0:7000 &                      # on each server node
  ringd train --mode ps --ps-servers ps0:7000,ps1:7000 ...   # on the workers
  mpirun -np 2 --host ps0,ps1 ringd ps --listen 0.0.0.0:7000
  ringd train --mode ps --ps-colocate 2 ...             # no ringd ps: workers 0 and 1 host them
Set RINGD_JOB_SECRET (or RINGD_JOB_SECRET_FILE) to the workers' secret.
)";

struct PsFlags {
  std::string listen = "0.0.0.0:0";
  std::string interface;
  std::string address_file;
  std::string timeout;
};

std::string replace_rank(std::string path, const std::string& rank) {
  for (size_t at = path.find("%r"); at != std::string::npos; at = path.find("%r", at)) {
    path.replace(at, 2, rank);
  }
  return path;
}

// "HOST:PORT", ":PORT" (all interfaces) or "HOST:0" (any free port).
uint16_t parse_listen(const std::string& text, std::string* host) {
  const size_t colon = text.rfind(':');
  char* end = nullptr;
  const unsigned long port =
      colon == std::string::npos ? 0 : std::strtoul(text.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || end == text.c_str() + colon + 1 || *end != '\0' ||
      port > 65535) {
    RINGD_THROW(kInvalidArgument, "--listen " << text << " is not HOST:PORT (e.g. 0.0.0.0:7000, "
                                              << ":7000, 127.0.0.1:0 for any free port)");
  }
  *host = colon == 0 ? "0.0.0.0" : text.substr(0, colon);
  return static_cast<uint16_t>(port);
}

}  // namespace

bool is_ps_command(int argc, const char* const* argv) {
  return argc >= 2 && std::strcmp(argv[1], "ps") == 0;
}

int run_ps_command_line(int argc, const char* const* argv) {
  CLI::App app{"ringd ps: a parameter server (the baseline `ringd train --mode ps` compares with)",
               "ringd ps"};
  app.footer(kFooter);
  PsFlags flags;
  app.add_option("--listen", flags.listen, "HOST:PORT to listen on (default 0.0.0.0:0, any port)")
      ->type_name("HOST:PORT");
  app.add_option("--iface", flags.interface,
                 "advertise this interface's IPv4 address (default RINGD_IFACE, else this host's)")
      ->type_name("NAME");
  app.add_option("--address-file", flags.address_file,
                 "write the address workers should use (HOST:PORT) to FILE once listening")
      ->type_name("FILE");
  app.add_option("--timeout", flags.timeout,
                 "seconds a pull may wait for the other workers' gradients (default RINGD_TIMEOUT)")
      ->type_name("SECONDS")
      ->check(seconds_check("--timeout"));
  ps::ServerOptions options;
  job::Topology topology;
  const int parsed = parse_command_line(app, "ringd ps", argc, argv, 2, [&] {
    tunables();  // a malformed RINGD_* variable is a usage error (exit 2) like a malformed flag
    // Where this server sits, as every command reads it (job/topology.h): mpirun's or torchrun's
    // rank and local rank, 0 of 1 when started alone.
    topology = job::resolve_topology(job::TopologyFlags{}, job::process_environment(),
                                     RINGD_HAVE_MPI != 0);
    uint16_t port = parse_listen(flags.listen, &options.host);
    if (port != 0) port = static_cast<uint16_t>(port + topology.local_rank);
    options.port = port;
    if (!flags.timeout.empty()) options.timeout = parse_seconds("--timeout", flags.timeout);
    if (!flags.interface.empty() || options.host == "0.0.0.0") {
      options.advertise_host = net::default_host_address(
          flags.interface.empty() ? tunables().interface : flags.interface);
    }
  });
  if (parsed >= 0) return parsed;
  try {
    ps::ParameterServer server(options);
    std::printf("ringd ps: serving on %s\n", server.address().c_str());
    std::fflush(stdout);
    if (!flags.address_file.empty()) {
      write_file_atomically(replace_rank(flags.address_file, std::to_string(topology.rank)),
                            server.address() + "\n");
    }
    server.wait_until_done();
    std::printf("ringd ps: every worker finished\n");
    return 0;
  } catch (const std::exception& error) {
    print_error(error);
    return 1;
  }
}

}  // namespace ringd::cli
