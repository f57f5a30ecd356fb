#include "runners/train_step.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>

#include "model/gemm.h"
#include "model/gradient_profile.h"
#include "model/mlp.h"
#include "model/replay_model.h"
#include "ringd/collectives.h"
#include "ringd/error.h"
#include "runners/gpu_group.h"

namespace ringd::runners {
namespace {

// The job's matrix-product backend: rank 0 resolves --blas and broadcasts its choice. Every rank
// applies the same averaged gradient, so mixed backends would not split the replicas; but each
// rank's share of that gradient would round the way its own backend does, and the job's numbers
// would then depend on which nodes have a GPU. One choice for the job keeps a run reproducible.
model::GemmKind agree_on_gemm(Context& ctx, const std::string& blas) {
  int64_t kind = -1;  // -1: rank 0 could not choose
  std::exception_ptr failure;
  if (ctx.rank() == 0) {
    try {
      kind = static_cast<int64_t>(model::choose_gemm(blas));
    } catch (const Error&) {
      failure = std::current_exception();
    }
  }
  broadcast(ctx, &kind, 1, DataType::kInt64, 0);
  if (failure) std::rethrow_exception(failure);
  if (kind < 0) {
    RINGD_THROW(kUnavailable, "rank 0 could not set up --blas " << blas << " (rank 0's error says "
                                                                << "why)");
  }
  return static_cast<model::GemmKind>(kind);
}

// The model of one device; with --gpus, device `device` is GPU `device` and a cuBLAS backend
// multiplies there.
std::unique_ptr<model::Model> make_model(Context& ctx, const TrainConfig& config, int device) {
  switch (config.model) {
    case ModelKind::kReplay: {
      const auto backward = std::chrono::microseconds(std::llround(config.compute_ms * 1000));
      return std::make_unique<model::ReplayModel>(model::load_gradient_profile(config.profile),
                                                  backward / 2, backward, config.spread);
    }
    case ModelKind::kMlp: break;
  }
  const model::GemmKind kind = agree_on_gemm(ctx, config.blas);
  std::unique_ptr<model::Gemm> gemm;
  try {
    gemm = model::make_gemm(kind, config.gpus ? device : -1);
  } catch (const Error& error) {
    RINGD_THROW(kUnavailable, "rank " << ctx.rank() << ": the job multiplies through "
                                      << model::gemm_kind_name(kind) << " (rank 0's --blas "
                                      << config.blas
                                      << "), which this rank cannot use: " << error.what()
                                      << ". Pass --blas openblas to train on the CPU everywhere");
  }
  return std::make_unique<model::Mlp>(model::parse_layer_sizes(config.layers), config.seed,
                                      std::move(gemm));
}

}  // namespace

TrainStep::TrainStep(Context& ctx, const TrainConfig& config, const TrainData& data,
                     Compression compression)
    : config_(config), data_(data), rank_(ctx.rank()) {
  shape_.devices = config.mode == SyncMode::kAllreduce ? config.local_devices : 1;
  shape_.world = ctx.size() * shape_.devices;
  shape_.global_batch = config.batch_size * static_cast<size_t>(shape_.world);
  model_ = make_model(ctx, config, 0);
  for (int d = 1; d < shape_.devices; ++d) replicas_.push_back(make_model(ctx, config, d));
  if (config_.gpus) {
    RINGD_CHECK_ARG(config_.mode == SyncMode::kAllreduce,
                    "--gpus applies to --mode allreduce only");
    group_ = make_gpu_group("train", shape_.devices, compression);
  } else if (shape_.devices > 1) {
    group_ = make_cpu_local_group(shape_.devices);
  }
  RINGD_CHECK_ARG(!config_.group_memory || group_,
                  "group memory needs a local group (local devices > 1, or --gpus)");
  for (int d = 0; group_memory() && d < shape_.devices; ++d) {
    group_stop_votes_.push_back(group_->allocate(d, sizeof(float)));
  }
  switch (config_.model) {
    case ModelKind::kMlp: {
      const model::Dataset& train = data_.train;
      RINGD_CHECK_ARG(train.features == model_->input_size(),
                      "--layers " << config_.layers << " takes " << model_->input_size()
                                  << " inputs, but the images of " << train.source << " have "
                                  << train.features << " pixels; make the first layer "
                                  << train.features);
      RINGD_CHECK_ARG(train.classes <= model_->classes(),
                      train.source << " has labels up to " << train.classes - 1 << ", but --layers "
                                   << config_.layers << " ends in " << model_->classes()
                                   << " classes");
      shape_.steps_per_epoch = static_cast<int64_t>(train.rows / shape_.global_batch);
      RINGD_CHECK_ARG(shape_.steps_per_epoch > 0,
                      "the training set has "
                          << train.rows << " samples, fewer than one global batch of "
                          << shape_.global_batch << " (--batch-size " << config_.batch_size << " x "
                          << shape_.world << (shape_.devices > 1 ? " devices)" : " ranks)"));
      break;
    }
    case ModelKind::kReplay: shape_.steps_per_epoch = config_.steps_per_epoch; break;
  }
  shape_.planned_steps = shape_.steps_per_epoch * config_.epochs;
  shape_.total_steps = shape_.planned_steps;
  if (config_.max_steps > 0) shape_.total_steps = std::min(shape_.total_steps, config_.max_steps);
  inputs_.resize(static_cast<size_t>(shape_.devices));
  labels_.resize(static_cast<size_t>(shape_.devices));
  batches_.resize(static_cast<size_t>(shape_.devices));
}

TrainStep::~TrainStep() = default;

std::vector<std::vector<model::ParameterView>> TrainStep::replica_parameters() const {
  std::vector<std::vector<model::ParameterView>> views;
  for (const auto& replica : replicas_) views.push_back(replica->parameters());
  return views;
}

bool TrainStep::group_memory() const { return group_ && (config_.gpus || config_.group_memory); }

double TrainStep::gradient_bytes_per_step() const {
  double bytes = 0;
  for (const model::ParameterView& view : model_->parameters()) {
    bytes += static_cast<double>(view.count * sizeof(float));
  }
  return bytes;
}

model::ForwardResult TrainStep::run(model::ParameterSync& sync, int64_t step,
                                    const model::StepInfo& info,
                                    const std::function<int(int rank)>& stop_requested) {
  assemble_batches(step);
  if (engine_) engine_->set_epoch(static_cast<int>(step / shape_.steps_per_epoch));  // DGC warm-up
  const model::ForwardResult result = forward_on_every_device();
  bool first_gradient = true;
  model_->backward([&](size_t index) {
    // The stop vote goes in with the step's first gradient (fused with it where it can be).
    if (first_gradient) submit_stop_vote(stop_requested);
    first_gradient = false;
    sync.gradient_ready(index, info);
  });
  sync.finish_step(info);
  stop_ = stop_vote_result(stop_requested);
  return result;
}

void TrainStep::assemble_batches(int64_t step) {
  if (config_.model != ModelKind::kMlp) return;  // the replay model reads no data
  const int64_t epoch = step / shape_.steps_per_epoch;
  if (epoch != order_epoch_) {
    order_ = model::epoch_order(data_.train.rows, config_.seed, epoch);
    order_epoch_ = epoch;
  }
  for (int d = 0; d < shape_.devices; ++d) {
    batches_[d] = model::assemble_batch(data_.train, order_, step % shape_.steps_per_epoch,
                                        shape_.global_batch, rank_ * shape_.devices + d,
                                        shape_.world, &inputs_[d], &labels_[d]);
  }
}

// Forward on every device's batch, and backward on devices 1..L-1, whose gradients are whole
// before device 0's backward starts (run() does that one, handing each gradient to the sync as it
// finishes, so that communication overlaps it). The replay model's replicas model no compute of
// their own: devices run in parallel, so the node's step takes device 0's time.
model::ForwardResult TrainStep::forward_on_every_device() {
  model::ForwardResult total;
  if (config_.model == ModelKind::kMlp) {
    for (size_t d = 1; d < batches_.size(); ++d) {
      const model::ForwardResult result = replicas_[d - 1]->forward(batches_[d]);
      replicas_[d - 1]->backward([](size_t) {});
      total.loss += result.loss;
      total.correct += result.correct;
    }
  }
  const model::ForwardResult result = model_->forward(batches_[0]);
  total.loss = (total.loss + result.loss) / static_cast<double>(shape_.devices);
  total.correct += result.correct;
  return total;
}

// The stop vote (TrainHooks::stop_requested): in allreduce mode an average of every rank's
// signal number through the engine, so that all ranks stop after the same step; in
// parameter-server mode (no engine, and async workers keep no common step) the local request.
void TrainStep::submit_stop_vote(const std::function<int(int rank)>& stop_requested) {
  if (!stop_requested) return;
  local_stop_ = stop_requested(rank_);
  if (!engine_) return;
  stop_votes_.assign(static_cast<size_t>(shape_.devices), static_cast<float>(local_stop_));
  std::vector<void*> votes;  // where the engine sees each device's vote
  for (int d = 0; d < shape_.devices; ++d) {
    if (group_memory()) {
      group_->upload({group_stop_votes_[d].get(), d}, &stop_votes_[d], sizeof(float));
      votes.push_back(group_stop_votes_[d].get());
    } else {
      votes.push_back(&stop_votes_[d]);
    }
  }
  Submission vote;
  vote.name = "ringd.stop";
  vote.tensor = Tensor{votes[0], DataType::kFloat32, {1}};
  vote.other_devices.assign(votes.begin() + 1, votes.end());
  vote.op = ReduceOp::kAvg;
  vote.compression = Compression::kNone;
  stop_handle_ = engine_->submit(std::move(vote));
}

int TrainStep::stop_vote_result(const std::function<int(int rank)>& stop_requested) {
  if (!stop_requested) return 0;
  if (!engine_) return local_stop_;
  stop_handle_.wait();
  stop_handle_ = Handle();
  if (group_memory()) {
    group_->download(&stop_votes_[0], {group_stop_votes_[0].get(), 0}, sizeof(float));
  }
  if (local_stop_ != 0) return local_stop_;
  if (stop_votes_[0] <= 0) return 0;
  // Another rank voted to stop. A signal that reached this rank after its own vote (ranks that
  // share a process, `--transport inproc`, see one signal at different moments) is still this
  // rank's: asked again only now that every rank stops after this step anyway.
  local_stop_ = stop_requested(rank_);
  return local_stop_ != 0 ? local_stop_ : SIGTERM;
}

}  // namespace ringd::runners
