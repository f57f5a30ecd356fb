#include "ringd/job.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/fork_guard.h"
#include "job/elastic_job.h"
#include "job/job_context.h"
#include "job/topology.h"
#include "ringd/collectives.h"
#include "ringd/config.h"
#include "ringd/error.h"

namespace ringd {
namespace {

job::TopologyFlags topology_flags(const JobOptions& options) {
  job::TopologyFlags flags;
  flags.rank = options.rank;
  flags.size = options.size;
  flags.rendezvous = options.rendezvous;
  flags.transport = options.transport;
  return flags;
}

// Horovod's cross communicator: the ranks with this rank's local rank, in rank order. One
// allgather of every rank's local rank (and local size, which must agree across the job only in
// that every node's processes count themselves the same way: not checked here).
void place_across_nodes(Context& ctx, JobIdentity* identity) {
  std::vector<int32_t> local_ranks(static_cast<size_t>(ctx.size()));
  const int32_t mine = identity->local_rank;
  allgather(ctx, &mine, local_ranks.data(), 1, DataType::kInt32);
  identity->cross_rank = 0;
  identity->cross_size = 0;
  for (int rank = 0; rank < ctx.size(); ++rank) {
    if (local_ranks[static_cast<size_t>(rank)] != mine) continue;
    if (rank < identity->rank) ++identity->cross_rank;
    ++identity->cross_size;
  }
}

}  // namespace

struct Job::Impl {
  JobIdentity identity;
  job::JobContext connection;  // store server, store and Context
  std::unique_ptr<Engine> engine;
  bool shut_down = false;
  // inherited() in a child forked after the job opened: its threads, locks and sockets are the
  // parent's.
  const ForkOwner owner;
};

Job::Job(Formed) : impl_(std::make_unique<Impl>()) {}

Job::Job(const JobOptions& options) : impl_(std::make_unique<Impl>()) {
  const job::Topology topology =
      job::resolve_topology(topology_flags(options), job::process_environment(), RINGD_HAVE_MPI);
  if (topology.transport == "inproc") {
    RINGD_THROW(kInvalidArgument,
                "a Job is one process of a multi-process job: for ranks as "
                "threads of one process use InprocHub (ringd/inproc.h)");
  }
  job::JobConnectOptions connect;
  connect.timeout = options.timeout;
  connect.interface = options.interface;
  connect.tcp_port = options.tcp_port;
  connect.mpi_from_other_thread = options.start_engine;
  impl_->connection = job::connect_job(topology, connect);
  Context& ctx = *impl_->connection.ctx;

  JobIdentity& identity = impl_->identity;
  identity.rank = topology.rank;
  identity.size = topology.size;
  identity.local_rank = topology.local_rank;
  identity.local_size = topology.local_size;
  identity.transport = ctx.transport_name();
  identity.source = topology.source;
  place_across_nodes(ctx, &identity);
  if (options.start_engine) impl_->engine = std::make_unique<Engine>(ctx, options.engine);
}

std::unique_ptr<Job> Job::open(const JobOptions& options, const std::function<bool()>& interrupted,
                               std::chrono::milliseconds every) {
  const job::Topology topology =
      job::resolve_topology(topology_flags(options), job::process_environment(), RINGD_HAVE_MPI);
  if (topology.transport == "mpi" || !interrupted) return std::make_unique<Job>(options);
  struct Opening {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    bool abandoned = false;
    std::unique_ptr<Job> job;
    std::exception_ptr error;
  };
  auto opening = std::make_shared<Opening>();
  std::thread([opening, options] {
    std::unique_ptr<Job> job;
    std::exception_ptr error;
    try {
      job = std::make_unique<Job>(options);
    } catch (...) {
      error = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(opening->mutex);
    opening->done = true;
    if (opening->abandoned) {
      lock.unlock();
      return;  // `job` (if it opened) shuts down here: nobody wants it any more
    }
    opening->job = std::move(job);
    opening->error = error;
    lock.unlock();
    opening->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(opening->mutex);
  while (!opening->done_cv.wait_for(lock, every, [&] { return opening->done; })) {
    lock.unlock();
    const bool stop = interrupted();
    lock.lock();
    if (stop) {
      opening->abandoned = true;
      std::unique_ptr<Job> opened = std::move(opening->job);  // if it opened meanwhile
      lock.unlock();
      return nullptr;  // `opened` shuts down here
    }
  }
  if (opening->error) std::rethrow_exception(opening->error);
  return std::move(opening->job);
}

Job::~Job() {
  if (impl_->owner.inherited()) {
    (void)impl_.release();  // NOLINT(bugprone-unused-return-value): the parent's, leaked
    return;
  }
  try {
    shutdown();
  } catch (...) {  // a destructor reports nothing more
  }
}

const JobIdentity& Job::identity() const { return impl_->identity; }

Engine& Job::engine() {
  if (impl_->owner.inherited()) RINGD_THROW(kInvalidArgument, impl_->owner.child_message(rank()));
  if (impl_->shut_down) {
    RINGD_THROW(kInvalidArgument, "rank " << rank() << ": the job was shut down");
  }
  if (!impl_->engine) {
    RINGD_THROW(kInvalidArgument,
                "rank " << rank() << ": the job was opened without an engine (start_engine)");
  }
  return *impl_->engine;
}

Context& Job::context() {
  if (impl_->shut_down) {
    RINGD_THROW(kInvalidArgument, "rank " << rank() << ": the job was shut down");
  }
  return *impl_->connection.ctx;
}

void Job::shutdown(const std::string& reason, bool failed) {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  // The parent's in a forked child: the child may end, but must not stop the parent's job.
  if (impl_->owner.inherited()) return;
  if (impl_->engine) {
    impl_->engine->shutdown(reason, failed);
    impl_->engine.reset();
  }
  impl_->connection.ctx.reset();
  impl_->connection.store.reset();
  impl_->connection.server.reset();
}

struct ElasticJob::Impl {
  job::ElasticProcess process;
  EngineOptions engine;
};

ElasticJob::ElasticJob(const ElasticJobOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->process =
      job::open_elastic_process(options.rendezvous, options.min_ranks, options.max_ranks,
                                options.timeout, options.interface, options.tcp_port);
  impl_->engine = options.engine;
}

ElasticJob::~ElasticJob() = default;

std::unique_ptr<Job> ElasticJob::form(int64_t step) {
  job::ElasticGeneration generation = impl_->process.job->form(step);
  std::unique_ptr<Job> formed(new Job(Job::Formed{}));
  Context& ctx = *generation.ctx;
  formed->impl_->connection.ctx = std::move(generation.ctx);
  JobIdentity& identity = formed->impl_->identity;
  identity.rank = ctx.rank();
  identity.size = ctx.size();
  identity.transport = ctx.transport_name();
  identity.source = "elastic generation " + std::to_string(generation.membership.number);
  identity.cross_rank = ctx.rank();
  identity.cross_size = ctx.size();
  formed->impl_->engine = std::make_unique<Engine>(ctx, impl_->engine);
  return formed;
}

std::string ElasticJob::end(const std::string& reason) { return impl_->process.job->end(reason); }

void ElasticJob::finish(const std::string& reason) { impl_->process.job->finish(reason); }

bool ElasticJob::newcomer_waiting() { return impl_->process.job->newcomer_waiting(); }

int64_t ElasticJob::generation() const { return impl_->process.job->generation(); }

}  // namespace ringd
