// Uses libringd through its installed headers only: two ranks as threads (inproc) run a ring
// allreduce and the fusion engine, and an error thrown inside the library is caught here as a
// ringd::Error with its code. Prints "consumer: ok ..." and exits 0, or says what was wrong.
#include <ringd/collectives.h>
#include <ringd/engine.h>
#include <ringd/error.h>
#include <ringd/inproc.h>

#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

int main() {
  constexpr int kRanks = 2;
  ringd::InprocHub hub(kRanks);
  std::vector<std::string> failures(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        std::unique_ptr<ringd::Context> ctx = hub.connect(rank);
        std::vector<float> values(100000, static_cast<float>(rank + 1));
        ringd::allreduce(*ctx, values.data(), values.data(), values.size(),
                         ringd::DataType::kFloat32, ringd::ReduceOp::kSum);
        if (values.front() != 3.0f || values.back() != 3.0f) {
          failures[rank] = "allreduce gave " + std::to_string(values.front());
          return;
        }
        try {
          ringd::broadcast(*ctx, values.data(), values.size(), ringd::DataType::kFloat32, 7);
          failures[rank] = "a broadcast from rank 7 of 2 did not throw";
          return;
        } catch (const ringd::Error& error) {
          if (error.code() != ringd::ErrorCode::kInvalidArgument) {
            failures[rank] = std::string("wrong error code: ") + error.what();
            return;
          }
        }
        ringd::Engine engine(*ctx);
        std::vector<float> gradient(1000, static_cast<float>(rank));
        engine
            .allreduce_async("w", {gradient.data(), ringd::DataType::kFloat32, {1000}},
                             ringd::ReduceOp::kAvg)
            .wait();
        if (gradient[0] != 0.5f) failures[rank] = "engine average " + std::to_string(gradient[0]);
      } catch (const std::exception& error) {
        failures[rank] = error.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    if (!failures[rank].empty()) {
      std::fprintf(stderr, "consumer: rank %d: %s\n", rank, failures[rank].c_str());
      return 1;
    }
  }
  std::printf("consumer: ok (allreduce, a ringd::Error across the library boundary, the engine)\n");
  return 0;
}
