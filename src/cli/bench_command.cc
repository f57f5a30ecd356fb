#include "cli/bench_command.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/tunables.h"
#include "job/job_context.h"
#include "ringd/collectives.h"
#include "ringd/config.h"
#include "ringd/error.h"
#include "ringd/inproc.h"
#include "runners/bench_hierarchy.h"
#include "runners/bench_pattern.h"
#include "runners/bench_report.h"
#include "runners/metrics_file.h"

namespace ringd::cli {
namespace {

class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t bytes)
      : memory_(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes / 64 + 1) * 64)), std::free) {
    if (!memory_) RINGD_THROW(kIo, "cannot allocate " << bytes << " bytes for the bench buffers");
  }
  uint8_t* get() const { return memory_.get(); }

 private:
  std::unique_ptr<uint8_t, void (*)(void*)> memory_;
};

void write_stdout(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// One rank's sweep over the sizes. Rank 0 (`report`) prints the table and writes the JSON.
class BenchRunner {
 public:
  BenchRunner(Context& ctx, const runners::BenchConfig& config, bool report)
      : ctx_(ctx),
        config_(config),
        report_(report),
        dtype_size_(dtype_size(config.dtype)),
        primary_(config.max_bytes),
        secondary_(needs_second_buffer() ? config.max_bytes : 0) {
    options_.algorithm = config.algorithm;
    options_.segment_bytes = config.segment_bytes;
    options_.timeout = config.timeout;
  }

  // Returns the number of wrong values over all sizes and ranks (identical on every rank).
  int64_t run() {
    if (report_) write_stdout(runners::format_header(header()));
    std::vector<runners::BenchRow> rows;
    int64_t wrong_total = 0;
    for (size_t bytes = config_.min_bytes; bytes <= config_.max_bytes;) {
      rows.push_back(measure(bytes));
      if (rows.back().wrong > 0) wrong_total += rows.back().wrong;
      if (report_) {
        write_stdout(runners::format_row(rows.back()));
        if (!config_.json_path.empty()) append_json(rows.back());
        runners::publish_metrics(tunables().metrics_file,
                                 runners::bench_metrics_text(rows, config_.iters));
      }
      const size_t next = bytes == 0 ? 1 : bytes * config_.step_factor;
      if (next <= bytes) break;  // overflow, or a factor of 1
      bytes = next;
    }
    if (report_) write_stdout(runners::format_footer(rows, config_.check));
    return wrong_total;
  }

 private:
  bool needs_second_buffer() const {
    return !config_.in_place && config_.collective != runners::Collective::kBroadcast;
  }

  runners::ReportHeader header() const {
    return runners::report_header(config_, ctx_.size(), ctx_.transport_name());
  }

  // Where the collective reads and writes for `count_per_rank` elements per rank (see
  // collectives.h for the in-place layouts).
  struct Buffers {
    void* in;
    void* out;
  };
  Buffers buffers(size_t count_per_rank) const {
    uint8_t* a = primary_.get();
    uint8_t* b = needs_second_buffer() ? secondary_.get() : a;
    const size_t slot = static_cast<size_t>(ctx_.rank()) * count_per_rank * dtype_size_;
    switch (config_.collective) {
      case runners::Collective::kAllreduce: return {a, b};
      case runners::Collective::kBroadcast: return {a, a};
      case runners::Collective::kAllgather: return {config_.in_place ? a + slot : b, a};
      case runners::Collective::kReduceScatter: return {a, config_.in_place ? a + slot : b};
    }
    return {a, b};
  }

  void run_collective(const Buffers& buffers, size_t count_per_rank) {
    switch (config_.collective) {
      case runners::Collective::kAllreduce:
        allreduce(ctx_, buffers.in, buffers.out, count_per_rank, config_.dtype, config_.op,
                  options_);
        break;
      case runners::Collective::kBroadcast:
        broadcast(ctx_, buffers.out, count_per_rank, config_.dtype, config_.root, options_);
        break;
      case runners::Collective::kAllgather:
        allgather(ctx_, buffers.in, buffers.out, count_per_rank, config_.dtype, options_);
        break;
      case runners::Collective::kReduceScatter:
        reduce_scatter(ctx_, buffers.in, buffers.out, count_per_rank, config_.dtype, config_.op,
                       options_);
        break;
    }
  }

  // Input pattern in, sentinel in the output wherever the output is not the input itself.
  void prepare(const runners::CheckShape& shape, const Buffers& buffers) {
    const bool output_is_input =
        config_.in_place && runners::collective_reduces(config_.collective);
    const bool is_root = ctx_.rank() == config_.root;
    if (config_.collective == runners::Collective::kBroadcast ? !is_root : !output_is_input) {
      const size_t out_elements = config_.collective == runners::Collective::kAllgather
                                      ? shape.count_per_rank * ctx_.size()
                                      : shape.count_per_rank;
      runners::fill_sentinel(buffers.out, out_elements * dtype_size_);
    }
    runners::fill_check_input(shape, ctx_.rank(), buffers.in);
  }

  void sync() {
    int32_t token = 1;
    allreduce(ctx_, &token, &token, 1, DataType::kInt32, ReduceOp::kSum, options_);
  }

  runners::BenchRow measure(size_t bytes) {
    const size_t ranks = static_cast<size_t>(ctx_.size());
    const bool per_rank = config_.collective == runners::Collective::kAllgather ||
                          config_.collective == runners::Collective::kReduceScatter;
    const size_t elements = bytes / dtype_size_;
    const size_t count_per_rank = per_rank ? elements / ranks : elements;
    const size_t count = per_rank ? count_per_rank * ranks : count_per_rank;
    const runners::CheckShape shape{config_.collective, config_.dtype, config_.op,
                                    ctx_.size(),        config_.root,  count_per_rank};
    const Buffers io = buffers(count_per_rank);

    prepare(shape, io);
    for (int i = 0; i < config_.warmup; ++i) run_collective(io, count_per_rank);
    sync();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < config_.iters; ++i) run_collective(io, count_per_rank);
    const std::chrono::duration<double, std::micro> elapsed =
        std::chrono::steady_clock::now() - start;
    double time_us = elapsed.count() / config_.iters;
    allreduce(ctx_, &time_us, &time_us, 1, DataType::kFloat64, ReduceOp::kMax, options_);

    int64_t wrong = -1;
    if (config_.check) {
      // The checked run starts from fresh inputs: in-place runs have overwritten them.
      prepare(shape, io);
      run_collective(io, count_per_rank);
      wrong = runners::count_wrong(shape, ctx_.rank(), io.out);
      if (wrong > 0) {
        RINGD_LOG(kError) << "rank " << ctx_.rank() << ": " << wrong << " wrong values in "
                          << runners::collective_name(config_.collective) << " of " << count
                          << " elements";
      }
      allreduce(ctx_, &wrong, &wrong, 1, DataType::kInt64, ReduceOp::kSum, options_);
    }
    return runners::make_row(config_.collective, count * dtype_size_, count, config_.dtype,
                             config_.op, config_.root, ctx_.size(), ctx_.transport_name(), time_us,
                             wrong);
  }

  void append_json(const runners::BenchRow& row) {
    std::ofstream out(config_.json_path, std::ios::app);
    out << runners::format_json(row) << "\n";
    if (!out) {
      RINGD_THROW(kIo, "cannot append to --json "
                           << config_.json_path << "; check the directory exists and is writable");
    }
  }

  Context& ctx_;
  const runners::BenchConfig& config_;
  bool report_;
  size_t dtype_size_;
  AlignedBuffer primary_;
  AlignedBuffer secondary_;
  CollectiveOptions options_;
};

// The flat sweep, or the hierarchical one (bench_hierarchy.h) for --local-devices/--hierarchy.
int64_t run_sweep(Context& ctx, const runners::BenchConfig& config, bool report) {
  if (runners::bench_is_hierarchical(config))
    return runners::run_hierarchy_sweep(ctx, config, report);
  return BenchRunner(ctx, config, report).run();
}

std::chrono::milliseconds timeout_of(const runners::BenchConfig& config) {
  return config.timeout.count() > 0 ? config.timeout : tunables().timeout;
}

int finish(int64_t wrong, bool report) {
  if (wrong == 0) return 0;
  if (report)
    std::fprintf(stderr, "ringd: error: --check found %lld wrong values\n",
                 static_cast<long long>(wrong));
  return 1;
}

// --transport inproc: one thread per rank.
int run_inproc(const runners::BenchConfig& config, int ranks) {
  int64_t wrong = 0;
  job::run_inproc_ranks(ranks, timeout_of(config), [&](Context& ctx, int rank) {
    const int64_t rank_wrong = run_sweep(ctx, config, rank == 0);
    if (rank == 0) wrong = rank_wrong;
  });
  return finish(wrong, true);
}

}  // namespace

job::Topology plan_bench(const runners::BenchConfig& config) {
  job::Topology topology =
      job::resolve_topology(config.topology, job::process_environment(), RINGD_HAVE_MPI);
  const int ranks = topology.size * config.local_devices;  // every device is a rank
  RINGD_CHECK_ARG(config.collective != runners::Collective::kBroadcast ||
                      (config.root >= 0 && config.root < ranks),
                  "--root " << config.root << " is outside 0.." << ranks - 1
                            << (config.local_devices > 1 ? " (nodes x --local-devices)" : ""));
  return topology;
}

int run_bench(const runners::BenchConfig& config, const job::Topology& topology) {
  if (topology.transport == "inproc") return run_inproc(config, topology.size);
  job::JobConnectOptions options;
  options.timeout = timeout_of(config);
  options.interface = config.interface;
  options.tcp_port = config.tcp_port;
  const job::JobContext job = job::connect_job(topology, options);
  const int64_t wrong = run_sweep(*job.ctx, config, topology.rank == 0);
  return finish(wrong, topology.rank == 0);
}

}  // namespace ringd::cli
