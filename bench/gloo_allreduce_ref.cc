// The second reference ringd is measured against: Gloo's allreduce (float sum) over Gloo's own TCP
// transport, swept over sizes exactly as `ringd bench allreduce` does it, with the same table and
// the same JSON keys (transport "gloo").
//
//   gloo_allreduce_ref --store DIR [--rank R --size N] [--iface eth0] [--algorithm ring]
//                      [-b 4K] [-e 64M] [-f 4] [--iters 20] [--warmup 5] [--check] [--json FILE]
//
// Finding the others: a gloo::rendezvous::FileStore in DIR (every rank must see the same DIR: the
// namespaces of bench/cluster.sh share the file system; use a fresh directory per run), then
// connectFullMesh over a TCP device bound to --iface. Rank and size come from --rank/--size or,
// under mpirun, from OMPI_COMM_WORLD_RANK/SIZE (the program does not use MPI itself).
//
// --algorithm: ring (default; gloo::allreduce with Algorithm::RING: segments of up to 1 MiB, two in
// flight, what PyTorch's Gloo backend calls), bcube (gloo::allreduce, Algorithm::BCUBE), and the
// older in-place classes ring_chunked (gloo::AllreduceRingChunked) and halving_doubling
// (gloo::AllreduceHalvingDoubling). Any algorithm but ring reports transport "gloo_<algorithm>".
//
// Timing and checking follow ringd bench: `warmup` untimed calls, a barrier, `iters` timed calls;
// time = mean per call of the slowest rank; algbw = bytes / time, busbw = algbw x 2(n-1)/n in GB/s
// (1e9 B/s). --check verifies one more call against out[i] = n(n+1)/2 + n (i % 8) (rank r holds
// r + 1 + i % 8); any wrong element makes the exit status 1.
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Config {
  std::string store_dir;
  std::string iface = "eth0";
  std::string algorithm = "ring";
  std::string json_path;
  int rank = -1;
  int size = -1;
  size_t min_bytes = 4096;
  size_t max_bytes = size_t{64} << 20;
  size_t step_factor = 4;
  int iters = 20;
  int warmup = 5;
  bool check = false;
};

size_t parse_bytes(const std::string& text) {
  size_t used = 0;
  const unsigned long long value = std::stoull(text, &used);
  const std::string suffix = text.substr(used);
  if (suffix.empty()) return value;
  if (suffix == "K" || suffix == "k") return value << 10;
  if (suffix == "M" || suffix == "m") return value << 20;
  if (suffix == "G" || suffix == "g") return value << 30;
  throw std::invalid_argument("bad size '" + text + "'");
}

int env_int(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? -1 : std::atoi(value);
}

Config parse_args(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--check") {
      c.check = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--store")
      c.store_dir = value;
    else if (flag == "--iface")
      c.iface = value;
    else if (flag == "--algorithm")
      c.algorithm = value;
    else if (flag == "--json")
      c.json_path = value;
    else if (flag == "--rank")
      c.rank = std::stoi(value);
    else if (flag == "--size")
      c.size = std::stoi(value);
    else if (flag == "-b" || flag == "--minbytes")
      c.min_bytes = parse_bytes(value);
    else if (flag == "-e" || flag == "--maxbytes")
      c.max_bytes = parse_bytes(value);
    else if (flag == "-f" || flag == "--stepfactor")
      c.step_factor = parse_bytes(value);
    else if (flag == "--iters")
      c.iters = std::stoi(value);
    else if (flag == "--warmup")
      c.warmup = std::stoi(value);
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  if (c.rank < 0) c.rank = env_int("OMPI_COMM_WORLD_RANK");
  if (c.size < 0) c.size = env_int("OMPI_COMM_WORLD_SIZE");
  if (c.store_dir.empty()) throw std::invalid_argument("--store DIR is required");
  if (c.rank < 0 || c.size < 1 || c.rank >= c.size) {
    throw std::invalid_argument("need --rank/--size (or OMPI_COMM_WORLD_RANK/SIZE under mpirun)");
  }
  if (c.min_bytes < 4 || c.max_bytes < c.min_bytes || c.step_factor < 2 || c.iters < 1 ||
      c.warmup < 0) {
    throw std::invalid_argument("need 4 <= -b <= -e, -f >= 2, --iters >= 1, --warmup >= 0");
  }
  if (c.algorithm != "ring" && c.algorithm != "bcube" && c.algorithm != "ring_chunked" &&
      c.algorithm != "halving_doubling") {
    throw std::invalid_argument("--algorithm: ring, bcube, ring_chunked or halving_doubling");
  }
  return c;
}

// One allreduce of `count` floats from `in` into `out` with the chosen algorithm. The older
// classes work in place and are built once per size (their constructor sets up pair buffers).
class Allreduce {
 public:
  Allreduce(std::shared_ptr<gloo::Context> context, const std::string& algorithm, float* in,
            float* out, size_t count)
      : context_(std::move(context)), algorithm_(algorithm), in_(in), out_(out), count_(count) {
    const std::vector<float*> ptrs{out_};
    if (algorithm_ == "ring_chunked") {
      legacy_ = std::make_unique<gloo::AllreduceRingChunked<float>>(context_, ptrs,
                                                                    static_cast<int>(count_));
    } else if (algorithm_ == "halving_doubling") {
      legacy_ = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context_, ptrs,
                                                                        static_cast<int>(count_));
    }
  }

  void run() {
    if (legacy_) {
      legacy_->run();  // in place on out: each call reduces the previous result
      return;
    }
    gloo::AllreduceOptions opts(context_);
    opts.setAlgorithm(algorithm_ == "bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                            : gloo::AllreduceOptions::Algorithm::RING);
    opts.setInput(in_, count_);
    opts.setOutput(out_, count_);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(opts);
  }

  // The checked call: legacy algorithms need their input copied into the in-place buffer.
  void run_checked() {
    if (legacy_)
      std::memcpy(out_, in_, count_ * sizeof(float));
    else
      std::memset(out_, 0xff, count_ * sizeof(float));  // NaN sentinel
    run();
  }

 private:
  std::shared_ptr<gloo::Context> context_;
  std::string algorithm_;
  float* in_;
  float* out_;
  size_t count_;
  std::unique_ptr<gloo::Algorithm> legacy_;
};

template <typename T>
T allreduce_scalar(const std::shared_ptr<gloo::Context>& context, T value, bool take_max) {
  T result = 0;
  gloo::AllreduceOptions opts(context);
  opts.setInput(&value, 1);
  opts.setOutput(&result, 1);
  using Reduce = void (*)(void*, const void*, const void*, size_t);
  const Reduce max = &gloo::max<T>;
  const Reduce sum = &gloo::sum<T>;
  opts.setReduceFunction(take_max ? max : sum);
  gloo::allreduce(opts);
  return result;
}

void print_row(size_t bytes, size_t count, double time_us, double algbw, double busbw,
               const std::string& wrong) {
  std::printf("  %10zu  %12zu  %8s  %6s  %6d  %9.1f  %7.3f  %7.3f  %6s\n", bytes, count, "float",
              "sum", -1, time_us, algbw, busbw, wrong.c_str());
  std::fflush(stdout);
}

int run(const Config& config) {
  gloo::transport::tcp::attr attr;
  attr.iface = config.iface;
  attr.ai_family = AF_INET;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(config.store_dir);
  auto context = std::make_shared<gloo::rendezvous::Context>(config.rank, config.size);
  context->setTimeout(std::chrono::seconds(120));
  context->connectFullMesh(store, device);

  const std::string transport = config.algorithm == "ring" ? "gloo" : "gloo_" + config.algorithm;
  const bool report = config.rank == 0;
  std::ofstream json;
  if (report) {
    if (!config.json_path.empty()) {
      json.open(config.json_path, std::ios::app);
      if (!json) throw std::runtime_error("cannot open --json " + config.json_path);
    }
    std::printf("# gloo_allreduce_ref allreduce (algorithm %s)\n", config.algorithm.c_str());
    std::printf("# ranks: %d  transport: %s  dtype: float  op: sum  iface: %s\n", config.size,
                transport.c_str(), config.iface.c_str());
    std::printf(
        "# minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d iters: %d "
        "validation: %d\n#\n",
        config.min_bytes, config.max_bytes, config.step_factor, config.warmup, config.iters,
        config.check ? 1 : 0);
    std::printf("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "(B)", "(elements)", "", "",
                "", "(us)", "(GB/s)", "(GB/s)", "");
  }

  std::vector<float> in(config.max_bytes / sizeof(float));
  std::vector<float> out(in.size());
  int64_t wrong_total = 0;
  for (size_t bytes = config.min_bytes; bytes <= config.max_bytes; bytes *= config.step_factor) {
    const size_t count = bytes / sizeof(float);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(config.rank + 1 + i % 8);
    std::memcpy(out.data(), in.data(), count * sizeof(float));
    Allreduce op(context, config.algorithm, in.data(), out.data(), count);
    for (int i = 0; i < config.warmup; ++i) op.run();
    gloo::BarrierOptions barrier(context);
    gloo::barrier(barrier);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < config.iters; ++i) op.run();
    const std::chrono::duration<double, std::micro> elapsed =
        std::chrono::steady_clock::now() - start;
    const double time_us = allreduce_scalar(context, elapsed.count() / config.iters, true);

    int64_t wrong = -1;
    if (config.check) {
      op.run_checked();
      const float n = static_cast<float>(config.size);
      int64_t local = 0;
      for (size_t i = 0; i < count; ++i) {
        if (out[i] != n * (n + 1) / 2 + n * static_cast<float>(i % 8)) ++local;
      }
      wrong = allreduce_scalar<int64_t>(context, local, false);
      wrong_total += wrong;
    }
    if (report) {
      const size_t real_bytes = count * sizeof(float);
      const double algbw = static_cast<double>(real_bytes) / time_us / 1e3;
      const double busbw = algbw * 2.0 * (config.size - 1) / config.size;
      const std::string wrong_text = wrong < 0 ? "N/A" : std::to_string(wrong);
      print_row(real_bytes, count, time_us, algbw, busbw, wrong_text);
      if (json.is_open()) {
        char line[512];
        std::snprintf(line, sizeof line,
                      "{\"op\":\"allreduce\",\"bytes\":%zu,\"count\":%zu,\"dtype\":\"float\","
                      "\"redop\":\"sum\",\"ranks\":%d,\"transport\":\"%s\",\"time_us\":%.3f,"
                      "\"algbw_GBps\":%.6g,\"busbw_GBps\":%.6g,\"wrong\":%s}",
                      real_bytes, count, config.size, transport.c_str(), time_us, algbw, busbw,
                      wrong < 0 ? "null" : wrong_text.c_str());
        json << line << "\n" << std::flush;
      }
    }
    if (bytes > config.max_bytes / config.step_factor) break;  // the next step would overflow
  }
  if (report) {
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_total),
                wrong_total > 0 ? "FAILED" : "OK");
  }
  return wrong_total > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce_ref: %s\n", e.what());
    return 2;
  }
}
