#include "ps/worker_job.h"

#include <algorithm>
#include <cstring>

#include "common/logging.h"
#include "common/tunables.h"
#include "net/socket.h"
#include "ps/ps_sync.h"
#include "ps/server.h"
#include "ringd/collectives.h"
#include "ringd/error.h"

namespace ringd::ps {
namespace {

constexpr size_t kAddressBytes = 128;  // one allgathered "host:port", NUL-padded

// A worker that also hosts a server shard (co-located placement).
class ColocatedSync : public model::ParameterSync {
 public:
  ColocatedSync(std::unique_ptr<ParameterServer> server, std::unique_ptr<PsSync> sync,
                std::chrono::milliseconds idle_limit)
      : server_(std::move(server)), sync_(std::move(sync)), idle_limit_(idle_limit) {}

  ~ColocatedSync() override {
    sync_.reset();  // this worker's goodbye (or, unwinding, its loss) first
    if (!server_) return;
    try {
      server_->wait_until_done(idle_limit_);
    } catch (const Error& error) {
      RINGD_LOG(kWarn) << "co-located " << server_->address() << " ends: " << error.what();
    }
  }

  void initialize(const std::vector<model::ParameterView>& params) override {
    sync_->initialize(params);
  }
  void gradient_ready(size_t index, const model::StepInfo& step) override {
    sync_->gradient_ready(index, step);
  }
  void finish_step(const model::StepInfo& step) override { sync_->finish_step(step); }
  double blocked_seconds() const override { return sync_->blocked_seconds(); }

 private:
  std::unique_ptr<ParameterServer> server_;
  std::unique_ptr<PsSync> sync_;
  // How long the server may hear nothing from any worker at the end before it gives up on the
  // ones that have not said BYE (a worker that never came, or one stuck elsewhere).
  const std::chrono::milliseconds idle_limit_;
};

}  // namespace

std::vector<std::string> parse_server_list(const std::string& flag, const std::string& text) {
  std::vector<std::string> servers;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string address = text.substr(start, comma - start);
    if (!address.empty()) {
      try {
        net::parse_endpoint(address, flag);
      } catch (const Error&) {
        RINGD_THROW(kInvalidArgument, flag << ": '" << address << "' is not HOST:PORT");
      }
      servers.push_back(address);
    }
    start = comma + 1;
  }
  RINGD_CHECK_ARG(!servers.empty(), flag << ": no server address in '" << text << "'");
  return servers;
}

std::unique_ptr<model::ParameterSync> make_worker_sync(const WorkerJobOptions& options,
                                                       Context& ctx, const model::SgdOptions& sgd) {
  RINGD_CHECK_ARG(options.servers.empty() != (options.colocated == 0),
                  "parameter-server mode needs either --ps-servers (servers on their own nodes) "
                  "or --ps-colocate K (workers 0..K-1 host them), not "
                      << (options.servers.empty() ? "neither" : "both"));
  RINGD_CHECK_ARG(options.colocated <= ctx.size(), "--ps-colocate " << options.colocated
                                                                    << " exceeds the " << ctx.size()
                                                                    << " workers");
  PsSyncOptions sync_options;
  sync_options.rank = ctx.rank();
  sync_options.workers = ctx.size();
  sync_options.sharding = options.sharding;
  sync_options.asynchronous = options.asynchronous;
  sync_options.sgd = sgd;
  sync_options.secret = options.secret;
  sync_options.timeout = options.timeout;
  if (!options.servers.empty()) {
    sync_options.servers = options.servers;
    return std::make_unique<PsSync>(std::move(sync_options));
  }
  std::unique_ptr<ParameterServer> server;
  std::vector<char> mine(kAddressBytes, '\0');
  if (ctx.rank() < options.colocated) {
    ServerOptions server_options;
    // P + rank: several co-located servers on one host do not collide.
    server_options.port =
        options.colocated_port == 0
            ? 0
            : static_cast<uint16_t>(options.colocated_port + static_cast<uint16_t>(ctx.rank()));
    server_options.advertise_host = net::default_host_address(
        options.interface.empty() ? tunables().interface : options.interface);
    server_options.secret = options.secret;
    server_options.timeout = options.timeout;
    server = std::make_unique<ParameterServer>(server_options);
    const std::string address = server->address();
    std::memcpy(mine.data(), address.data(), std::min(address.size(), kAddressBytes - 1));
  }
  std::vector<char> all(kAddressBytes * static_cast<size_t>(ctx.size()));
  allgather(ctx, mine.data(), all.data(), kAddressBytes, DataType::kUInt8);
  sync_options.servers_source = "the co-located servers' addresses (--ps-colocate)";
  for (int s = 0; s < options.colocated; ++s) {
    sync_options.servers.emplace_back(all.data() + static_cast<size_t>(s) * kAddressBytes);
  }
  auto sync = std::make_unique<PsSync>(std::move(sync_options));
  const std::chrono::milliseconds timeout =
      options.timeout.count() > 0 ? options.timeout : tunables().timeout;
  return std::make_unique<ColocatedSync>(std::move(server), std::move(sync), 2 * timeout);
}

}  // namespace ringd::ps
