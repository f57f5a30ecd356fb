#include "runners/bench_hierarchy.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <vector>

#include "common/logging.h"
#include "ringd/collectives.h"
#include "ringd/error.h"
#include "ringd/hierarchy.h"
#include "ringd/local_group.h"
#include "ringd/nccl_local_group.h"
#include "runners/bench_pattern.h"
#include "runners/bench_report.h"

namespace ringd::runners {
namespace {

// GPUs when this build has NCCL and the host has enough of them, CPU devices otherwise.
std::unique_ptr<LocalGroup> make_bench_local_group(int devices) {
#if RINGD_HAVE_NCCL
  const int gpus = cuda_device_count();
  if (gpus >= devices) {
    std::vector<int> cuda_devices(static_cast<size_t>(devices));
    std::iota(cuda_devices.begin(), cuda_devices.end(), 0);
    return make_nccl_local_group(cuda_devices);
  }
  if (gpus > 0) {
    RINGD_LOG(kWarn) << "--local-devices " << devices << ": this host has only " << gpus
                     << " GPUs; using " << devices << " CPU devices";
  }
#endif
  return make_cpu_local_group(devices);
}

void write_stdout(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

class HierarchyBenchRunner {
 public:
  HierarchyBenchRunner(Context& ctx, const BenchConfig& config, bool report)
      : ctx_(ctx),
        config_(config),
        report_(report),
        elem_(dtype_size(config.dtype)),
        group_(make_bench_local_group(config.local_devices)),
        devices_(group_->size()),
        world_(ctx.size() * devices_) {
    RINGD_CHECK_ARG(config.collective != Collective::kReduceScatter,
                    "reducescatter has no hierarchical form; use --local-devices 1");
    for (int d = 0; d < devices_; ++d) {
      memory_.push_back(group_->allocate(d, config.max_bytes));
      buffers_.push_back({memory_.back().get(), d});
    }
    host_.resize(config.max_bytes + 1);
    options_.strategy = config.hierarchy;
    options_.inter_node.algorithm = config.algorithm;
    options_.inter_node.segment_bytes = config.segment_bytes;
    options_.inter_node.timeout = config.timeout;
  }

  int64_t run() {
    if (report_) write_stdout(format_header(header()));
    std::vector<BenchRow> rows;
    int64_t wrong_total = 0;
    for (size_t bytes = config_.min_bytes; bytes <= config_.max_bytes;) {
      rows.push_back(measure(bytes));
      if (rows.back().wrong > 0) wrong_total += rows.back().wrong;
      if (report_) {
        write_stdout(format_row(rows.back()));
        if (!config_.json_path.empty()) append_json(rows.back());
      }
      const size_t next = bytes == 0 ? 1 : bytes * config_.step_factor;
      if (next <= bytes) break;
      bytes = next;
    }
    if (report_) write_stdout(format_footer(rows, config_.check));
    return wrong_total;
  }

 private:
  ReportHeader header() const {
    ReportHeader h = report_header(config_, world_, ctx_.transport_name());
    h.in_place = true;  // the hierarchical collectives work in place on the device buffers
    h.root = config_.root;
    h.nodes = ctx_.size();
    h.local_devices = devices_;
    h.device_kind = group_->kind();
    h.hierarchy = hierarchy_name(config_.hierarchy);
    return h;
  }

  int global_rank(int device) const { return ctx_.rank() * devices_ + device; }

  void run_collective(size_t count_per_device) {
    switch (config_.collective) {
      case Collective::kAllreduce:
        hierarchical_allreduce(ctx_, *group_, buffers_, count_per_device, config_.dtype, config_.op,
                               options_);
        break;
      case Collective::kBroadcast:
        hierarchical_broadcast(ctx_, *group_, buffers_, count_per_device, config_.dtype,
                               config_.root / devices_, config_.root % devices_, options_);
        break;
      case Collective::kAllgather:
        hierarchical_allgather(ctx_, *group_, buffers_, count_per_device, config_.dtype, options_);
        break;
      case Collective::kReduceScatter: break;  // rejected in the constructor
    }
  }

  // The flat bench's inputs for rank r * L + d, uploaded to device d; sentinels where the
  // collective must write.
  void prepare(const CheckShape& shape) {
    const bool gather = config_.collective == Collective::kAllgather;
    const size_t count = shape.count_per_rank;
    for (int d = 0; d < devices_; ++d) {
      const int rank = global_rank(d);
      const size_t bytes = (gather ? count * world_ : count) * elem_;
      fill_sentinel(host_.data(), bytes);
      if (config_.collective != Collective::kBroadcast || rank == config_.root) {
        fill_check_input(shape, rank, host_.data() + (gather ? rank * count * elem_ : 0));
      }
      group_->upload(buffers_[d], host_.data(), bytes);
    }
  }

  int64_t count_wrong_values(const CheckShape& shape) {
    const bool gather = config_.collective == Collective::kAllgather;
    int64_t wrong = 0;
    for (int d = 0; d < devices_; ++d) {
      const size_t count = gather ? shape.count_per_rank * world_ : shape.count_per_rank;
      group_->download(host_.data(), buffers_[d], count * elem_);
      wrong += count_wrong(shape, global_rank(d), host_.data());
    }
    return wrong;
  }

  BenchRow measure(size_t bytes) {
    const bool gather = config_.collective == Collective::kAllgather;
    const size_t elements = bytes / elem_;
    const size_t count_per_device = gather ? elements / world_ : elements;
    const size_t count = gather ? count_per_device * world_ : count_per_device;
    const CheckShape shape{config_.collective, config_.dtype,   config_.op, world_,
                           config_.root,       count_per_device};
    prepare(shape);
    for (int i = 0; i < config_.warmup; ++i) run_collective(count_per_device);
    int32_t token = 1;
    allreduce(ctx_, &token, &token, 1, DataType::kInt32, ReduceOp::kSum, options_.inter_node);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < config_.iters; ++i) run_collective(count_per_device);
    const std::chrono::duration<double, std::micro> elapsed =
        std::chrono::steady_clock::now() - start;
    double time_us = elapsed.count() / config_.iters;
    allreduce(ctx_, &time_us, &time_us, 1, DataType::kFloat64, ReduceOp::kMax, options_.inter_node);

    int64_t wrong = -1;
    if (config_.check) {
      prepare(shape);
      run_collective(count_per_device);
      wrong = count_wrong_values(shape);
      if (wrong > 0) {
        RINGD_LOG(kError) << "node " << ctx_.rank() << ": " << wrong << " wrong values in "
                          << hierarchy_name(config_.hierarchy) << " "
                          << collective_name(config_.collective) << " of " << count << " elements";
      }
      allreduce(ctx_, &wrong, &wrong, 1, DataType::kInt64, ReduceOp::kSum, options_.inter_node);
    }
    BenchRow row = make_row(config_.collective, count * elem_, count, config_.dtype, config_.op,
                            config_.root, world_, ctx_.transport_name(), time_us, wrong);
    add_hierarchy(&row, ctx_.size(), devices_, hierarchy_name(config_.hierarchy));
    return row;
  }

  void append_json(const BenchRow& row) {
    std::ofstream out(config_.json_path, std::ios::app);
    out << format_json(row) << "\n";
    if (!out) {
      RINGD_THROW(kIo, "cannot append to --json "
                           << config_.json_path << "; check the directory exists and is writable");
    }
  }

  Context& ctx_;
  const BenchConfig& config_;
  bool report_;
  size_t elem_;
  std::unique_ptr<LocalGroup> group_;
  int devices_;
  int world_;
  std::vector<std::shared_ptr<void>> memory_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<unsigned char> host_;  // inputs and --check results pass through here
  HierarchyOptions options_;
};

}  // namespace

int64_t run_hierarchy_sweep(Context& ctx, const BenchConfig& config, bool report) {
  return HierarchyBenchRunner(ctx, config, report).run();
}

}  // namespace ringd::runners
