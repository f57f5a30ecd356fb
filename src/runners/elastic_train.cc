#include "runners/elastic_train.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>

#include "common/logging.h"
#include "model/allreduce_sync.h"
#include "model/dataset.h"
#include "model/gemm.h"
#include "model/mlp.h"
#include "ringd/collectives.h"
#include "ringd/engine.h"
#include "ringd/error.h"
#include "runners/train_evaluation.h"
#include "runners/train_report.h"

namespace ringd::runners {
namespace {

using Clock = std::chrono::steady_clock;

// What a lost rank looks like on a survivor: its sockets closed, or a cut link's silence.
bool lost_rank(const Error& error) {
  return error.code() == ErrorCode::kPeerLost || error.code() == ErrorCode::kTimeout;
}

std::string members_text(const rendezvous::Generation& g) {
  std::string text;
  for (size_t r = 0; r < g.members.size(); ++r) {
    if (!text.empty()) text += ", ";
    text += std::to_string(r) + ": " + g.members[r].who;
  }
  return text;
}

// The state a generation starts from: rank 0's step and update counts, parameters and momentum,
// received into copies first so that a broadcast cut short by another loss leaves this process's
// own state whole.
void take_state_from_rank_zero(Context& ctx, int64_t* applied, int64_t* updates,
                               const std::vector<model::ParameterView>& params,
                               std::vector<std::vector<float>>* momentum) {
  int64_t counts[2] = {*applied, *updates};
  broadcast(ctx, counts, 2, DataType::kInt64, 0);
  if (ctx.rank() == 0) {
    for (size_t i = 0; i < params.size(); ++i) {
      broadcast(ctx, params[i].value, params[i].count, DataType::kFloat32, 0);
      broadcast(ctx, (*momentum)[i].data(), (*momentum)[i].size(), DataType::kFloat32, 0);
    }
    return;
  }
  std::vector<std::vector<float>> values(params.size()), velocities(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    values[i].resize(params[i].count);
    velocities[i].resize(params[i].count);
    broadcast(ctx, values[i].data(), values[i].size(), DataType::kFloat32, 0);
    broadcast(ctx, velocities[i].data(), velocities[i].size(), DataType::kFloat32, 0);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    std::memcpy(params[i].value, values[i].data(), values[i].size() * sizeof(float));
  }
  *momentum = std::move(velocities);
  *applied = counts[0];
  *updates = counts[1];
}

}  // namespace

void check_elastic_config(const TrainConfig& config, const rendezvous::ElasticBounds& bounds) {
  RINGD_CHECK_ARG(config.mode == SyncMode::kAllreduce,
                  "--elastic trains in --mode allreduce only (parameter servers are not elastic)");
  RINGD_CHECK_ARG(config.model == ModelKind::kMlp, "--elastic trains the MLP only (--model mlp)");
  RINGD_CHECK_ARG(config.local_devices == 1 && !config.gpus,
                  "--elastic runs one device per process (no --local-devices, no --gpus) yet");
  RINGD_CHECK_ARG(!config.compression || *config.compression == Compression::kNone,
                  "--elastic runs without gradient compression yet (--compression none)");
  RINGD_CHECK_ARG(config.checkpoint_dir.empty() && !config.resume,
                  "--elastic moves the state between processes in memory: no --checkpoint-dir or "
                  "--resume yet");
  RINGD_CHECK_ARG(config.elastic_check_every > 0,
                  "--elastic-check-every " << config.elastic_check_every << " must be positive");
  const size_t global_batch = config.batch_size * static_cast<size_t>(bounds.max_ranks);
  for (int ranks = bounds.min_ranks; ranks <= bounds.max_ranks; ++ranks) {
    if (global_batch % static_cast<size_t>(ranks) != 0) {
      size_t lcm = 1;
      for (int r = bounds.min_ranks; r <= bounds.max_ranks; ++r) {
        lcm = std::lcm(lcm, static_cast<size_t>(r));
      }
      size_t suggestion = config.batch_size;
      while ((suggestion * static_cast<size_t>(bounds.max_ranks)) % lcm != 0) ++suggestion;
      RINGD_THROW(kInvalidArgument,
                  "--elastic: the global batch (--batch-size "
                      << config.batch_size << " x --max-ranks " << bounds.max_ranks << " = "
                      << global_batch
                      << ") must split evenly over every rank count from --min-ranks "
                      << bounds.min_ranks << " to --max-ranks " << bounds.max_ranks << ", and "
                      << ranks << " ranks would not; --batch-size " << suggestion << " would");
    }
  }
}

TrainSummary run_elastic_train(job::ElasticJob& job, const TrainConfig& config,
                               const TrainData& data, const TrainHooks& hooks) {
  const rendezvous::ElasticBounds& bounds = job.bounds();
  check_elastic_config(config, bounds);
  model::Mlp mlp(model::parse_layer_sizes(config.layers), config.seed,
                 model::make_gemm(model::choose_gemm(config.blas)));
  const std::vector<model::ParameterView>& params = mlp.parameters();
  const model::Dataset& train = data.train;
  RINGD_CHECK_ARG(train.features == mlp.input_size(),
                  "--layers " << config.layers << " takes " << mlp.input_size()
                              << " inputs, but the images of " << train.source << " have "
                              << train.features << " pixels");
  const int nominal_world = bounds.max_ranks;
  const size_t global_batch = config.batch_size * static_cast<size_t>(nominal_world);
  const int64_t steps_per_epoch = static_cast<int64_t>(train.rows / global_batch);
  RINGD_CHECK_ARG(steps_per_epoch > 0, "the training set has " << train.rows
                                                               << " samples, fewer than one "
                                                                  "global batch of "
                                                               << global_batch);
  const int64_t planned_steps = steps_per_epoch * config.epochs;
  const int64_t total_steps =
      config.max_steps > 0 ? std::min(planned_steps, config.max_steps) : planned_steps;

  TrainSummary summary;
  summary.mode = "allreduce";
  summary.model = mlp.describe();
  summary.blas = mlp.backend();
  summary.transport = "tcp";
  summary.global_batch = global_batch;
  summary.learning_rate =
      learning_rate_at(config, nominal_world, config.warmup_steps, planned_steps);  // the peak
  summary.lr_schedule = lr_schedule_name(config.lr_schedule);
  summary.steps_per_epoch = steps_per_epoch;

  std::vector<std::vector<float>> momentum(params.size());
  for (size_t i = 0; i < params.size(); ++i) momentum[i].assign(params[i].count, 0.0f);
  bool holds_state = false;  // a newcomer holds none until its first generation's broadcast
  int64_t applied = 0;       // the steps whose update these parameters hold: the next one to run
  // The updates these parameters went through, counted one by one and moved with them: every
  // step's exactly once when it ends equal to `applied` (TrainSummary::steps_applied).
  int64_t updates = 0;
  std::vector<uint32_t> order;
  int64_t order_epoch = -1;
  std::vector<float> inputs;
  std::vector<int32_t> labels;
  float waiting = 0;  // the join vote's buffer: outlives every engine that may write it
  const auto started = Clock::now();
  std::optional<Clock::time_point> ended_at;  // when the last generation ended here
  double blocked_seconds = 0;

  for (;;) {
    job::ElasticGeneration generation = job.form(holds_state ? applied : -1);
    Context& ctx = *generation.ctx;
    const int rank = generation.rank();
    const int size = generation.size();
    ++summary.generations;
    std::unique_ptr<Engine> engine;
    std::unique_ptr<model::AllreduceSync> sync;
    std::string end_reason;  // "" once every step is done
    try {
      take_state_from_rank_zero(ctx, &applied, &updates, params, &momentum);
      holds_state = true;
      if (rank == 0) {
        char since[96] = "";
        if (ended_at) {
          std::snprintf(since, sizeof(since), ", %.2f s after the last one ended here",
                        std::chrono::duration<double>(Clock::now() - *ended_at).count());
        }
        std::printf("generation %lld: %d rank%s from step %lld of %lld (%s)%s\n",
                    static_cast<long long>(generation.membership.number), size,
                    size == 1 ? "" : "s", static_cast<long long>(applied),
                    static_cast<long long>(total_steps),
                    members_text(generation.membership).c_str(), since);
        std::fflush(stdout);
      }
      EngineOptions options;
      options.cycle_time_ms = config.cycle_time_ms;
      options.fusion_threshold_bytes = config.fusion_threshold_bytes;
      options.compression = Compression::kNone;
      engine = std::make_unique<Engine>(ctx, options);
      sync = std::make_unique<model::AllreduceSync>(
          *engine, model::SgdOptions{config.momentum, config.weight_decay});
      sync->initialize(params);
      for (size_t i = 0; i < params.size(); ++i) {
        sync->local_optimizer()->restore_state(i, momentum[i]);
      }
      while (applied < total_steps) {
        const int64_t step = applied;
        const int64_t epoch = step / steps_per_epoch;
        if (epoch != order_epoch) {
          order = model::epoch_order(train.rows, config.seed, epoch);
          order_epoch = epoch;
        }
        const model::Batch batch = model::assemble_batch(
            train, order, step % steps_per_epoch, global_batch, rank, size, &inputs, &labels);
        const model::StepInfo info{step,
                                   learning_rate_at(config, nominal_world, step, planned_steps)};
        // Every --elastic-check-every steps (the same steps on every rank): does a process wait
        // to join? The vote travels with the step's gradients.
        const bool check = (step + 1) % config.elastic_check_every == 0 && step + 1 < total_steps;
        Handle vote;
        if (check) {
          waiting = job.newcomer_waiting() ? 1.0f : 0.0f;
          vote = engine->allreduce_async("ringd.elastic.join",
                                         Tensor{&waiting, DataType::kFloat32, {1}}, ReduceOp::kMax);
        }
        const model::ForwardResult result = mlp.forward(batch);
        mlp.backward([&](size_t index) { sync->gradient_ready(index, info); });
        sync->finish_step(info);
        applied = step + 1;
        ++updates;
        summary.last_loss = result.loss;
        if (hooks.after_step) hooks.after_step(rank, step, params);
        if (config.throttle_ms > 0) {
          std::this_thread::sleep_for(
              std::chrono::duration<double, std::milli>(config.throttle_ms));
        }
        if (rank == 0 && config.log_every > 0 && applied % config.log_every == 0) {
          std::printf("step %lld/%lld  loss %.4f  ranks %d  generation %lld\n",
                      static_cast<long long>(applied), static_cast<long long>(total_steps),
                      result.loss, size, static_cast<long long>(generation.membership.number));
          std::fflush(stdout);
        }
        if (check) {
          vote.wait();
          if (waiting > 0) {
            end_reason = "a process waits to join (after step " + std::to_string(applied) + ")";
            break;
          }
        }
      }
    } catch (const Error& error) {
      if (engine) engine->shutdown(error.what(), /*failed=*/true);
      if (!lost_rank(error)) throw;
      end_reason = "a rank was lost at step " + std::to_string(applied) + " (seen by rank " +
                   std::to_string(rank) + ": " + error.what() + ")";
      RINGD_LOG(kWarn) << "generation " << generation.membership.number << ", rank " << rank << ": "
                       << error.what() << "; forming the next generation from step " << applied;
    }
    ended_at = Clock::now();
    if (sync) {
      for (size_t i = 0; i < params.size(); ++i) momentum[i] = sync->local_optimizer()->state(i);
      blocked_seconds += sync->blocked_seconds();
    }
    sync.reset();
    if (engine) {
      engine->shutdown(end_reason.empty() ? "it finished training" : end_reason);
      engine.reset();
    }
    if (end_reason.empty()) {
      summary.ranks = size;
      summary.steps = applied;
      summary.steps_applied = updates;
      summary.train_seconds = std::chrono::duration<double>(Clock::now() - started).count();
      summary.blocked_seconds = blocked_seconds;
      summary.comm_share = summary.train_seconds > 0 ? blocked_seconds / summary.train_seconds : 0;
      summary.samples_per_second = summary.train_seconds > 0
                                       ? static_cast<double>(global_batch) *
                                             static_cast<double>(applied) / summary.train_seconds
                                       : 0;
      if (rank == 0 && evaluates(config, data)) {
        summary.epochs.push_back(evaluate_epoch(
            mlp, data.test, (applied + steps_per_epoch - 1) / steps_per_epoch, applied));
        summary.test_accuracy = summary.epochs.back().test_accuracy;
      }
      summary.params_sha256 = params_digest(params);
      if (hooks.at_end) hooks.at_end(rank, params);
      generation.ctx.reset();
      try {
        // For the record only: the process serving the store may be gone already.
        job.finish("finished training after step " + std::to_string(applied));
      } catch (const Error&) {
      }
      summary.final_rank = rank;
      return summary;
    }
    generation.ctx.reset();
    job.end(end_reason);
  }
}

}  // namespace ringd::runners
