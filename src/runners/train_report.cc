#include "runners/train_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "common/text.h"

namespace ringd::runners {

std::string format_duration(double seconds) {
  const long long total = std::llround(std::max(0.0, seconds));
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", total / 3600, total / 60 % 60,
                  total % 60);
  } else {
    std::snprintf(text, sizeof(text), "%lld:%02lld", total / 60, total % 60);
  }
  return text;
}

std::string format_progress(const ProgressLine& line, const ProgressInterval& interval) {
  const double samples_per_second =
      interval.samples_per_second(static_cast<size_t>(line.global_batch));
  char text[256];
  if (line.replay) {
    const double step_seconds =
        interval.steps() > 0 ? interval.seconds() / static_cast<double>(interval.steps()) : 0;
    std::snprintf(
        text, sizeof(text),
        "epoch %lld/%lld  step %lld/%lld  step time %.1f ms  gradients %.1f MiB/step  %.3f GB/s  "
        "samples/s %.0f  comm %.0f%%  ETA %s",
        static_cast<long long>(line.epoch), static_cast<long long>(line.epochs),
        static_cast<long long>(line.step), static_cast<long long>(line.steps), 1e3 * step_seconds,
        line.gradient_bytes_per_step / (1 << 20),
        step_seconds > 0 ? line.gradient_bytes_per_step / step_seconds / 1e9 : 0.0,
        samples_per_second, 100 * interval.comm_share(), format_duration(line.eta_seconds).c_str());
    return text;
  }
  std::snprintf(
      text, sizeof(text),
      "epoch %lld/%lld  step %lld/%lld  loss %.4f  acc %.3f  samples/s %.0f  comm %.0f%%  "
      "ETA %s",
      static_cast<long long>(line.epoch), static_cast<long long>(line.epochs),
      static_cast<long long>(line.step), static_cast<long long>(line.steps), interval.mean_loss(),
      interval.accuracy(), samples_per_second, 100 * interval.comm_share(),
      format_duration(line.eta_seconds).c_str());
  return text;
}

void print_progress(const ProgressLine& line, const ProgressInterval& interval) {
  std::printf("%s\n", format_progress(line, interval).c_str());
  std::fflush(stdout);
}

std::string format_train_summary(const TrainSummary& s) {
  std::string text;
  std::string devices;
  if (s.local_group == "nccl") {
    devices = " x " + std::to_string(s.local_devices) + (s.local_devices > 1 ? " GPUs" : " GPU") +
              " (NCCL)";
  } else if (s.local_devices > 1) {
    devices = " x " + std::to_string(s.local_devices) + " CPU devices";
  }
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "trained %s (%s mode%s%s, %d ranks%s over %s, global batch %zu, lr %g%s%s%s): steps "
      "%lld..%lld in %.1f s, %.0f samples/s, communication %.0f%% of step time\n",
      s.model.c_str(), s.mode.c_str(), s.compression == "none" ? "" : ", compression ",
      s.compression == "none" ? "" : s.compression.c_str(), s.ranks, devices.c_str(),
      s.transport.c_str(), s.global_batch, s.learning_rate,
      s.lr_schedule == "cosine" ? " cosine-decayed" : "",
      s.blas.empty() ? "" : ", matrix products on ", s.blas.c_str(),
      static_cast<long long>(s.start_step), static_cast<long long>(s.steps), s.train_seconds,
      s.samples_per_second, 100 * s.comm_share);
  text += line;
  if (s.test_accuracy >= 0) {
    std::snprintf(line, sizeof(line), "test accuracy: %.4f\n", s.test_accuracy);
    text += line;
  }
  if (!s.checkpoint.empty()) text += "checkpoint: " + s.checkpoint + "\n";
  if (s.checkpoint_failures > 0) {
    text += std::to_string(s.checkpoint_failures) +
            " periodic checkpoint(s) could not be written (the warnings say why)\n";
  }
  if (s.generations > 0) {
    std::snprintf(line, sizeof(line),
                  "elastic: %lld generation%s, %d ranks at the end, %lld updates applied\n",
                  static_cast<long long>(s.generations), s.generations == 1 ? "" : "s", s.ranks,
                  static_cast<long long>(s.steps_applied));
    text += line;
  }
  if (s.stopped_by_signal != 0) {
    std::snprintf(line, sizeof(line),
                  "stopped early on request (signal %d) after step %lld; --resume continues from "
                  "the checkpoint\n",
                  s.stopped_by_signal, static_cast<long long>(s.steps));
    text += line;
  }
  return text;
}

std::string params_digest(const std::vector<model::ParameterView>& params) {
  Sha256 sha;
  for (const model::ParameterView& p : params) sha.update(p.value, p.count * sizeof(float));
  const Sha256Digest digest = sha.finish();
  return hex(digest.data(), digest.size());
}

std::string format_train_json(const TrainSummary& s) {
  nlohmann::json epochs = nlohmann::json::array();
  for (const EpochResult& e : s.epochs) {
    epochs.push_back({{"epoch", e.epoch}, {"step", e.step}, {"test_accuracy", e.test_accuracy}});
  }
  nlohmann::json json = {
      {"mode", s.mode},
      {"model", s.model},
      {"blas", s.blas.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.blas)},
      {"transport", s.transport},
      {"compression", s.compression},
      {"ranks", s.ranks},
      {"local_devices", s.local_devices},
      {"local_group",
       s.local_group.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.local_group)},
      {"global_batch", s.global_batch},
      {"learning_rate", s.learning_rate},
      {"lr_schedule", s.lr_schedule},
      {"start_step", s.start_step},
      {"steps", s.steps},
      {"steps_per_epoch", s.steps_per_epoch},
      {"train_seconds", s.train_seconds},
      {"blocked_seconds", s.blocked_seconds},
      {"samples_per_second", s.samples_per_second},
      {"comm_share", s.comm_share},
      {"last_loss", s.last_loss},
      {"last_accuracy", s.last_accuracy},
      {"test_accuracy",
       s.test_accuracy < 0 ? nlohmann::json(nullptr) : nlohmann::json(s.test_accuracy)},
      {"epochs", epochs},
      {"checkpoint", s.checkpoint},
      {"checkpoint_failures", s.checkpoint_failures},
      {"resumed_from", s.resumed_from},
      {"params_sha256", s.params_sha256},
      {"stopped_by_signal",
       s.stopped_by_signal == 0 ? nlohmann::json(nullptr) : nlohmann::json(s.stopped_by_signal)},
  };
  if (s.generations > 0) {
    json["generations"] = s.generations;
    json["ranks_at_end"] = s.ranks;
    json["steps_applied"] = s.steps_applied;
  }
  return json.dump();
}

}  // namespace ringd::runners
