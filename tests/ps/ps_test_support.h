// Shared by the parameter-server tests: k servers in this process on loopback, a toy model whose
// gradients depend on its current values (so a stale or wrong pull changes the result), workers
// as threads, and the serial computation a synchronous run must reproduce bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/optimizer.h"
#include "model/parameter_sync.h"
#include "net/handshake.h"
#include "ps/ps_sync.h"
#include "ps/server.h"

namespace ringd::ps::testing {

inline std::chrono::milliseconds test_timeout() { return std::chrono::milliseconds(20000); }

struct Servers {
  Servers(int count, const std::string& secret,
          std::chrono::milliseconds timeout = test_timeout()) {
    for (int s = 0; s < count; ++s) {
      ServerOptions options;
      options.host = "127.0.0.1";
      options.secret = secret;
      options.timeout = timeout;
      servers.push_back(std::make_unique<ParameterServer>(options));
      addresses.push_back(servers.back()->address());
    }
  }
  std::vector<std::unique_ptr<ParameterServer>> servers;
  std::vector<std::string> addresses;
};

// Values and gradients of named tensors. Worker r starts from its own values (only worker 0's
// should survive initialize()).
struct ToyModel {
  ToyModel(const std::vector<size_t>& counts, int rank) {
    for (size_t t = 0; t < counts.size(); ++t) {
      values.emplace_back(counts[t]);
      grads.emplace_back(counts[t]);
      for (size_t j = 0; j < counts[t]; ++j) {
        values[t][j] =
            0.5f -
            static_cast<float>((j * 37 + t * 11 + static_cast<size_t>(rank) * 5) % 97) / 97.0f;
      }
    }
    for (size_t t = 0; t < counts.size(); ++t) {
      model::ParameterView view;
      view.name = "layer" + std::to_string(t) + "/w";
      view.shape = {static_cast<int64_t>(counts[t])};
      view.value = values[t].data();
      view.grad = grads[t].data();
      view.count = counts[t];
      views.push_back(view);
    }
  }
  // Worker `rank`'s gradient of tensor t at `step`, a function of the current values.
  static void gradient(const std::vector<float>& value, std::vector<float>* grad, size_t t,
                       int rank, int64_t step) {
    for (size_t j = 0; j < value.size(); ++j) {
      const size_t k =
          (j + 7 * t + 13 * static_cast<size_t>(step) + static_cast<size_t>(rank)) % 11;
      (*grad)[j] =
          0.05f * value[j] * static_cast<float>(rank + 1) + 0.01f * static_cast<float>(k) - 0.05f;
    }
  }
  std::vector<std::vector<float>> values;
  std::vector<std::vector<float>> grads;
  std::vector<model::ParameterView> views;
};

inline double learning_rate_at(int64_t step) { return 0.05 * static_cast<double>(1 + step % 3); }

// One worker's training loop: backward hands gradients last tensor first.
inline void train(model::ParameterSync& sync, ToyModel& model, int rank, int64_t first_step,
                  int64_t steps) {
  for (int64_t step = first_step; step < first_step + steps; ++step) {
    const model::StepInfo info{step, learning_rate_at(step)};
    for (size_t t = model.views.size(); t-- > 0;) {
      ToyModel::gradient(model.values[t], &model.grads[t], t, rank, step);
      sync.gradient_ready(t, info);
    }
    sync.finish_step(info);
  }
}

// What synchronous PS training must produce: worker 0's initial values, every step the mean of
// all workers' gradients (summed in rank order, then scaled by 1/W, in float) through one Sgd.
inline std::vector<std::vector<float>> serial_reference(const std::vector<size_t>& counts,
                                                        int workers, int64_t steps,
                                                        model::SgdOptions sgd_options) {
  ToyModel model(counts, 0);
  model::Sgd sgd(sgd_options);
  for (size_t t = 0; t < counts.size(); ++t) sgd.add_parameter(t, counts[t]);
  std::vector<float> grad;
  for (int64_t step = 0; step < steps; ++step) {
    for (size_t t = 0; t < counts.size(); ++t) {
      std::vector<float> sum(counts[t]);
      grad.assign(counts[t], 0);
      for (int w = 0; w < workers; ++w) {
        ToyModel::gradient(model.values[t], &grad, t, w, step);
        for (size_t j = 0; j < counts[t]; ++j) sum[j] = w == 0 ? grad[j] : sum[j] + grad[j];
      }
      const float inverse = 1.0f / static_cast<float>(workers);
      for (float& x : sum) x *= inverse;
      sgd.apply(t, model.values[t].data(), sum.data(), counts[t], learning_rate_at(step));
    }
  }
  return model.values;
}

// Runs `body(rank)` on one thread per worker; rethrows the first exception.
inline void run_workers(int workers, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  std::exception_ptr first;
  std::mutex mutex;
  for (int rank = 0; rank < workers; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (first) std::rethrow_exception(first);
}

// A connection to a server as parameter-server worker 0 after the job-secret handshake, nothing
// sent yet; throws what the handshake throws (kAuth: wrong secret, kMismatch: refused).
inline net::Fd raw_client(const std::string& address, const std::string& secret) {
  net::HelloInfo hello;
  hello.kind = net::PeerKind::kPsWorker;
  hello.rank = 0;
  hello.world_size = 1;
  std::string last_error;
  int attempts = 0;
  net::Fd socket = net::dial_with_retry(
      net::parse_endpoint(address, "test"), {}, secret, hello, -1, "test client", address,
      net::Clock::now() + std::chrono::seconds(10), &last_error, &attempts);
  EXPECT_TRUE(socket.valid()) << last_error;
  return socket;
}

inline PsSyncOptions worker_options(const Servers& servers, int rank, int workers,
                                    ShardPolicy policy, bool asynchronous,
                                    const std::string& secret) {
  PsSyncOptions options;
  options.servers = servers.addresses;
  options.rank = rank;
  options.workers = workers;
  options.sharding = policy;
  options.asynchronous = asynchronous;
  options.sgd.momentum = 0.9;
  options.sgd.weight_decay = 0.01;
  options.secret = secret;
  options.timeout = test_timeout();
  return options;
}

}  // namespace ringd::ps::testing
