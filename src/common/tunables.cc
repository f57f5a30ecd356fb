#include "common/tunables.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/files.h"
#include "common/logging.h"
#include "common/suggest.h"
#include "common/text.h"
#include "ringd/error.h"

extern char** environ;

namespace ringd {
namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return (value && *value) ? value : nullptr;
}

// A job secret is a few dozen bytes; a bound keeps a wrong path (a log, /dev/zero) from costing
// memory.
constexpr size_t kMaxSecretBytes = 64 * 1024;

std::string read_secret_file(const char* path) {
  std::string secret;
  if (!read_state_file(path, kMaxSecretBytes, "RINGD_JOB_SECRET_FILE", &secret)) {
    RINGD_THROW(kInvalidArgument, "RINGD_JOB_SECRET_FILE=" << path
                                                           << " does not exist; point it at the "
                                                              "job's secret file");
  }
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) {
    RINGD_THROW(kInvalidArgument, "RINGD_JOB_SECRET_FILE=" << path << " is empty");
  }
  return secret;
}

int parse_small_int(const char* name, const char* text, int low, int high) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || value < low || value > high ||
      !std::isdigit(static_cast<unsigned char>(text[0]))) {
    RINGD_THROW(kInvalidArgument,
                name << "=" << text << " is not a whole number in " << low << ".." << high);
  }
  return static_cast<int>(value);
}

double parse_non_negative(const char* name, const char* text, double high) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value >= 0) || value > high) {
    RINGD_THROW(kInvalidArgument, name << "=" << text << " is not a number in 0.." << high);
  }
  return value;
}

// A kernel congestion control's name (TCP_CA_NAME_MAX is 16 with the terminator) or "system".
// Whether the kernel has it is known only when a socket asks (net::set_congestion_control).
std::string parse_congestion(const char* text) {
  const std::string value = text;
  bool valid = !value.empty() && value.size() <= 15;
  for (const char c : value) {
    valid = valid && (std::islower(static_cast<unsigned char>(c)) ||
                      std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '-');
  }
  RINGD_CHECK_ARG(valid, "RINGD_TCP_CONGESTION="
                             << text
                             << " is not a congestion control name (1-15 of a-z 0-9 _ -, e.g. "
                                "reno, cubic, bbr) or system");
  return value;
}

// The fusion engine's variables (include/ringd/engine.h).
void load_fusion(Tunables& t) {
  if (const char* v = env("RINGD_CYCLE_TIME_MS")) {
    t.cycle_time_ms = parse_non_negative("RINGD_CYCLE_TIME_MS", v, 10000);
  }
  if (const char* v = env("RINGD_FUSION_THRESHOLD_BYTES")) {
    t.fusion_threshold_bytes = parse_bytes("RINGD_FUSION_THRESHOLD_BYTES", v);
  }
  if (const char* v = env("RINGD_FUSION_MAX_TENSOR_BYTES")) {
    t.fusion_max_tensor_bytes = parse_bytes("RINGD_FUSION_MAX_TENSOR_BYTES", v);
  }
  if (const char* v = env("RINGD_CACHE_CAPACITY")) {
    t.cache_capacity = parse_small_int("RINGD_CACHE_CAPACITY", v, 0, 1 << 20);
  }
  if (const char* v = env("RINGD_STALL_WARNING_S")) {
    t.stall_warning_s = parse_non_negative("RINGD_STALL_WARNING_S", v, kMaxSeconds);
  }
  if (const char* v = env("RINGD_ELASTIC_SETTLE_S")) {
    t.elastic_settle_s = parse_non_negative("RINGD_ELASTIC_SETTLE_S", v, kMaxSeconds);
  }
  if (const char* v = env("RINGD_STALL_SHUTDOWN_S")) {
    t.stall_shutdown_s = parse_non_negative("RINGD_STALL_SHUTDOWN_S", v, kMaxSeconds);
  }
  if (const char* v = env("RINGD_TIMELINE")) t.timeline = v;
  if (const char* v = env("RINGD_COMPRESSION")) {
    t.compression = v;
    RINGD_CHECK_ARG(t.compression == "none" || t.compression == "fp16" || t.compression == "bf16" ||
                        t.compression == "dgc",
                    "RINGD_COMPRESSION=" << v << " is not one of none fp16 bf16 dgc");
  }
  if (const char* v = env("RINGD_FUSION_THREADS")) {
    t.fusion_threads = parse_small_int("RINGD_FUSION_THREADS", v, 0, 256);
  }
}

}  // namespace

Tunables load_tunables() {
  Tunables t;
  if (const char* v = env("RINGD_TIMEOUT")) t.timeout = parse_seconds("RINGD_TIMEOUT", v);
  if (const char* v = env("RINGD_SEGMENT_BYTES")) {
    t.segment_bytes = parse_bytes("RINGD_SEGMENT_BYTES", v);
    RINGD_CHECK_ARG(t.segment_bytes >= 64, "RINGD_SEGMENT_BYTES must be at least 64, got " << v);
  }
  if (const char* v = env("RINGD_SEGMENTS_IN_FLIGHT")) {
    t.segments_in_flight = parse_bytes("RINGD_SEGMENTS_IN_FLIGHT", v);
    RINGD_CHECK_ARG(t.segments_in_flight >= 1 && t.segments_in_flight <= 64,
                    "RINGD_SEGMENTS_IN_FLIGHT must be 1..64, got " << v);
  }
  if (const char* v = env("RINGD_SMALL_ALLREDUCE_BYTES")) {
    t.small_allreduce_bytes = parse_bytes("RINGD_SMALL_ALLREDUCE_BYTES", v);
  }
  if (const char* v = env("RINGD_TUNE_ALLREDUCE")) {
    t.tune_allreduce = parse_small_int("RINGD_TUNE_ALLREDUCE", v, 0, 1) == 1;
  } else if (env("RINGD_SMALL_ALLREDUCE_BYTES")) {
    t.tune_allreduce = false;  // a threshold the user chose is kept as it is
  }
  if (const char* v = env("RINGD_RING_ALLREDUCE_BYTES")) {
    t.ring_allreduce_bytes = parse_bytes("RINGD_RING_ALLREDUCE_BYTES", v);
  }
  if (const char* v = env("RINGD_HIERARCHY_CHUNK_BYTES")) {
    t.hierarchy_chunk_bytes = parse_bytes("RINGD_HIERARCHY_CHUNK_BYTES", v);
  }
  if (const char* v = env("RINGD_SOCKET_BUFFER_BYTES")) {
    t.socket_buffer_bytes = parse_bytes("RINGD_SOCKET_BUFFER_BYTES", v);
  }
  if (const char* v = env("RINGD_TCP_CONGESTION")) {
    t.tcp_congestion = parse_congestion(v);
    t.tcp_congestion_chosen = true;
  }
  if (const char* v = env("RINGD_SPIN_US"))
    t.spin_us = parse_small_int("RINGD_SPIN_US", v, 0, 10000);
  if (const char* v = env("RINGD_IFACE")) t.interface = v;
  if (const char* v = env("RINGD_JOB_SECRET")) t.job_secret = v;
  if (const char* v = env("RINGD_JOB_SECRET_FILE")) {
    RINGD_CHECK_ARG(t.job_secret.empty(),
                    "set only one of RINGD_JOB_SECRET and RINGD_JOB_SECRET_FILE");
    t.job_secret = read_secret_file(v);
  }
  if (const char* v = env("RINGD_LOG_LEVEL")) t.log_level = parse_log_level(v);
  if (const char* v = env("RINGD_LOG_FORMAT")) {
    const std::string format = lower_case(v);
    RINGD_CHECK_ARG(format == "text" || format == "json",
                    "RINGD_LOG_FORMAT=" << v << " is not one of text json");
    t.log_json = format == "json";
  }
  if (const char* v = env("RINGD_IB_DEVICE")) t.ib_device = v;
  if (const char* v = env("RINGD_IB_PORT")) {
    t.ib_port = parse_small_int("RINGD_IB_PORT", v, 1, 255);
  }
  if (const char* v = env("RINGD_IB_GID_INDEX")) {
    t.ib_gid_index =
        std::string(v) == "auto" ? -1 : parse_small_int("RINGD_IB_GID_INDEX", v, 0, 255);
  }
  load_fusion(t);
  if (const char* v = env("RINGD_AGENT_PORT")) {
    t.agent_port = parse_small_int("RINGD_AGENT_PORT", v, 1, 65535);
  }
  if (const char* v = env("RINGD_HTTP_PORT")) {
    t.http_port = parse_small_int("RINGD_HTTP_PORT", v, 1, 65535);
  }
  if (const char* v = env("RINGD_METRICS_FILE")) t.metrics_file = v;
  return t;
}

// RINGD_* variables that ringd's scripts read (scripts/, bench/, tests/): set in a shell that also
// runs ringd, they are not a misspelling of the binary's own. tests/common/tunables_test.cc checks
// this list against the scripts.
const std::vector<std::string>& script_variables() {
  static const std::vector<std::string> names = {
      "RINGD_BINARY",
      "RINGD_BUILD_DIR",
      "RINGD_BUILD_JOBS",
      "RINGD_BUILD_TARGETS",
      "RINGD_CLUSTER_BRIDGE",
      "RINGD_CLUSTER_CONGESTION",
      "RINGD_CLUSTER_NODE_PREFIX",
      "RINGD_CLUSTER_PORT_PREFIX",
      "RINGD_CLUSTER_SUBNET",
      "RINGD_CLUSTER_TBF_BURST",
      "RINGD_COMPARE_NEW_FIRST",
      "RINGD_CUDA_BUILD_DIR",
      "RINGD_DEMO_DIR",
      "RINGD_DEMO_RANKS",
      "RINGD_E2E_CACHE",
      "RINGD_E2E_DOCKER",
      "RINGD_E2E_KEEP",
      "RINGD_E2E_PYTORCH",
      "RINGD_E2E_TENSORFLOW",
      "RINGD_ELASTIC_MAX_RANKS",
      "RINGD_ELASTIC_MIN_RANKS",
      "RINGD_ELASTIC_RENDEZVOUS",
      "RINGD_E2E_STATE",
      "RINGD_K8S_VERSION",
      "RINGD_NETNS_TMPDIR",
      "RINGD_SKIP_CUDA_BUILD",
      "RINGD_TEST_JOBS",
      "RINGD_TOOLS_DIR",
      "RINGD_VALIDATE_ROOT",
      "RINGD_GPU_REPORT",
      "RINGD_GPU_CHECK_LOGS",
      "RINGD_GPU_CHECK_BUILD_TIMEOUT",
      "RINGD_GPU_CHECK_RUN_TIMEOUT",
      "RINGD_GPU_CHECK_MAXBYTES",
      "RINGD_GPU_CHECK_TRAIN_STEPS",
      "RINGD_GPU_CHECK_DATA",
      "RINGD_GPU_CHECK_COMMIT",
      "RINGD_GPU_BUNDLE_DATA",
      "RINGD_PYTHON_VENV",
      "RINGD_SKIP_PYTHON",
      "RINGD_HOROVOD_VENV",
      "RINGD_FUZZ_BUILD_DIR",
      "RINGD_FUZZ_SECONDS",
      "RINGD_SKIP_FUZZ",
      "RINGD_SANITIZE_BUILD_DIR",
      // Read by the Python package's ringd.tensorflow (python/ringd/tensorflow/_build.py).
      "RINGD_CACHE_DIR",
      "RINGD_TF_OPS",
  };
  return names;
}

// The usual spellings, in any case: error/err, warn/warning, info, debug, or 0..3.
int parse_log_level(const std::string& text) {
  const std::string level = lower_case(text);
  if (level == "error" || level == "err" || level == "0") return 0;
  if (level == "warn" || level == "warning" || level == "1") return 1;
  if (level == "info" || level == "2") return 2;
  if (level == "debug" || level == "3") return 3;
  RINGD_THROW(kInvalidArgument, "RINGD_LOG_LEVEL=" << text
                                                   << " is not one of error, warn (or warning), "
                                                      "info, debug or 0..3");
}

std::vector<std::string> unknown_variable_warnings(const std::vector<std::string>& environment) {
  std::vector<std::string> known;
  for (const TunableInfo& info : tunable_table()) known.emplace_back(info.name);
  std::vector<std::string> warnings;
  for (const std::string& entry : environment) {
    const std::string name = entry.substr(0, entry.find('='));
    if (name.rfind("RINGD_", 0) != 0) continue;
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::vector<std::string>& scripts = script_variables();
    if (std::find(scripts.begin(), scripts.end(), name) != scripts.end()) continue;
    std::string warning = name + " is not a ringd variable and is ignored";
    const std::string closest = closest_name(name, known);
    if (!closest.empty()) warning += "; did you mean " + closest + "?";
    warnings.push_back(warning + " (ringd --help-env lists them)");
  }
  return warnings;
}

const Tunables& tunables() {
  static const Tunables instance = load_tunables();
  // Once `instance` exists, and not inside a static's initialisation: logging calls tunables().
  // tunables() is on hot paths (each small receive, each collective): read the flag first, so
  // the calls after the first only load it instead of writing a shared cache line.
  static std::atomic<bool> warned{false};
  if (!warned.load(std::memory_order_acquire) && !warned.exchange(true)) {
    std::vector<std::string> environment;
    for (char** entry = environ; entry && *entry; ++entry) environment.emplace_back(*entry);
    for (const std::string& warning : unknown_variable_warnings(environment)) {
      RINGD_LOG(kWarn) << warning;
    }
  }
  return instance;
}

const std::vector<TunableInfo>& tunable_table() {
  static const std::vector<TunableInfo> table = {
      {"RINGD_TIMEOUT", "30",
       "seconds any blocking wait (receive, send, rendezvous, MPI_Init under mpirun) may take; at "
       "most 1000000 (11.6 days), as for every duration flag"},
      {"RINGD_SEGMENT_BYTES", "1M", "ring pipeline segment size (bytes; K/M/G suffixes)"},
      {"RINGD_SEGMENTS_IN_FLIGHT", "4", "receive segments posted ahead in the ring pipeline"},
      {"RINGD_SMALL_ALLREDUCE_BYTES", "32K",
       "allreduce payloads up to this size use recursive doubling (latency-optimal), above it "
       "halving-doubling; with RINGD_TUNE_ALLREDUCE=1 (the default unless this is set), only "
       "outside the measured range around it"},
      {"RINGD_TUNE_ALLREDUCE", "1",
       "1: allreduce measures recursive doubling against halving-doubling on the job's links, "
       "per power-of-two size class from RINGD_SMALL_ALLREDUCE_BYTES / 16 to x 16 (its first 50 "
       "calls: 30 with the fixed rule's algorithm, 20 with the other, then one small allreduce to "
       "agree), instead of the fixed threshold; 0 = fixed. "
       "Off by default when RINGD_SMALL_ALLREDUCE_BYTES is set. Results are the same bits either "
       "way"},
      {"RINGD_RING_ALLREDUCE_BYTES", "2M",
       "allreduce payloads above this size use the pipelined ring; between the two, halving-"
       "doubling (Rabenseifner)"},
      {"RINGD_HIERARCHY_CHUNK_BYTES", "4M",
       "hierarchical allreduce/broadcast: larger buffers are pipelined in chunks of this size, the "
       "local steps of one chunk overlapping the step across nodes of the next; 0 = no pipeline"},
      {"RINGD_SOCKET_BUFFER_BYTES", "0",
       "SO_SNDBUF/SO_RCVBUF for TCP pairs; 0 = kernel autotuning"},
      {"RINGD_TCP_CONGESTION", "reno",
       "TCP congestion control of the job's data connections (tcp pairs, parameter-server "
       "links): a name in the kernel's net.ipv4.tcp_available_congestion_control (one outside "
       "tcp_allowed_congestion_control needs CAP_NET_ADMIN), or system = the kernel's "
       "default. reno because a collective's bursts are what the job's links carry: "
       "bbr paces every burst with kernel timers and cubic's slow start ends early on the "
       "queueing the burst itself causes, leaving 1-4 MB allreduces 1.4-1.7x slower at "
       "10 Gbit/s (docs/performance.md, \"Congestion control\"). A name set here that the kernel "
       "refuses fails the job at connection set-up, naming what it offers; unset, a kernel that "
       "refuses reno draws one warning and keeps its own"},
      {"RINGD_SPIN_US", "200",
       "tcp: before sleeping on a receive of up to 4 MiB (one its waiting thread reads), poll "
       "the socket without blocking, yielding the CPU between polls, for up to this many "
       "microseconds (0..10000; 0 = sleep at once); a payload under way with more than 64 KiB "
       "still to come does not spin but sleeps until half of that has arrived. GPUs: likewise, a "
       "thread waiting for a staged copy or an NCCL local collective queries its CUDA event this "
       "long before it sleeps on it"},
      {"RINGD_IFACE", "(unset)",
       "network interface whose IPv4 address tcp listens on and advertises (e.g. eth0); unset = "
       "the address of this host's name, else 127.0.0.1"},
      {"RINGD_JOB_ID", "(unset)",
       "which job this rank belongs to, the same on every rank (any text): the rendezvous store "
       "and every peer refuse a process of another job, naming both. Unset: torchrun's run id, "
       "mpirun's job, the StatefulSet or the job secret identify the job; with none of them rank "
       "0 warns that a stranger could join"},
      {"RINGD_JOB_SECRET", "(unset)",
       "per-job secret for the TCP challenge-response handshake; never sent on the wire. Unset "
       "under mpirun (tcp/ibverbs without --rendezvous): rank 0 makes a random one and shares it "
       "through MPI"},
      {"RINGD_JOB_SECRET_FILE", "(unset)", "file holding the job secret (e.g. a mounted Secret)"},
      {"RINGD_LOG_LEVEL", "warn", "error, warn (or warning), info or debug, in any case; or 0..3"},
      {"RINGD_LOG_FORMAT", "text",
       "text: one line per message, \"[ringd r<rank> <level> <UTC date and time> <host> <pid>] "
       "message\"; json: one JSON object per line with the same fields (time, level, host, pid, "
       "rank, message)"},
      {"RINGD_IB_DEVICE", "(unset)",
       "RDMA device for --transport ibverbs (e.g. mlx5_0); unset = the first whose port is "
       "active"},
      {"RINGD_IB_PORT", "1", "port of the RDMA device (1-based)"},
      {"RINGD_IB_GID_INDEX", "auto",
       "GID table index: auto = on RoCE the first RoCE v2 GID with an IPv4 address, on "
       "InfiniBand none (LID routing); a number forces that GID (and a GRH)"},
      {"RINGD_CYCLE_TIME_MS", "1",
       "fusion engine: while tensors wait, a negotiation cycle starts at most this often (ms); "
       "the first submission after an idle spell starts one at once"},
      {"RINGD_FUSION_THRESHOLD_BYTES", "64M",
       "fusion engine: ready tensors of one dtype/op are fused into buffers of up to this size; "
       "0 = every tensor on its own"},
      {"RINGD_FUSION_MAX_TENSOR_BYTES", "1M",
       "fusion engine: larger tensors are not fused into a copied bucket (compressed allreduces, "
       "broadcasts, engines over GPUs) but run alone, in place; uncompressed allreduces (flat, "
       "or over CPU devices) copy nothing and fuse at any size; 0 = fuse any size"},
      {"RINGD_CACHE_CAPACITY", "1024",
       "fusion engine: response-cache entries (tensors negotiated by one byte per cycle instead "
       "of a request to rank 0); 0 = no cache"},
      {"RINGD_STALL_WARNING_S", "60",
       "fusion engine: rank 0 warns (naming tensors and the ranks they wait on) when a tensor "
       "waits longer than this; 0 = off"},
      {"RINGD_ELASTIC_SETTLE_S", "0.5",
       "ringd train --elastic: once --min-ranks processes have claimed a place in the next "
       "generation of the job, how long it waits for one more before it starts (at once with "
       "--max-ranks): what a lost rank costs beyond noticing it"},
      {"RINGD_STALL_SHUTDOWN_S", "1800",
       "fusion engine: a tensor stalled this long fails on every rank and the engines stop "
       "(certain deadlocks fail within about a second without it); 30 min as torch.distributed's "
       "default timeout, so a rank stuck outside ringd ends the job instead of holding every "
       "rank's devices; 0 = never"},
      {"RINGD_TIMELINE", "(unset)",
       "fusion engine: write a Chrome-trace JSON timeline to this file (rank 0; a %r in the path "
       "is replaced by the rank and then every rank writes one)"},
      {"RINGD_COMPRESSION", "none",
       "fusion engine: float32 allreduces travel as none, fp16 or bf16 (each combine in f32), or "
       "dgc: deep gradient compression of sum/avg allreduces (train moves the momentum into it)"},
      {"RINGD_FUSION_THREADS", "0",
       "fusion engine: threads copying tensors in and out of the fusion buffer; 0 = min(4, cores)"},
      {"RINGD_AGENT_PORT", "29400",
       "ringd agent's exec service port (ringd exec, ringd launch's readiness ping use it too)"},
      {"RINGD_HTTP_PORT", "29401", "ringd agent's HTTP port: /healthz, /readyz, /metrics"},
      {"RINGD_METRICS_FILE", "(unset)",
       "rank 0 writes its figures here as Prometheus text: ringd bench after every size "
       "(ringd_bench_*), ringd train at most once a second and after the last step "
       "(ringd_train_*); ringd agent serves this file under /metrics"},
      {"RINGD_REPLICAS", "(unset)",
       "the StatefulSet's replicas; set, it makes this process a StatefulSet pod (rank = "
       "ordinal of its pod name, size = replicas)"},
      {"RINGD_SERVICE", "(set name)", "the headless Service that gives the pods DNS names"},
      {"RINGD_CLUSTER_DOMAIN", "cluster.local", "the cluster's DNS domain"},
      {"RINGD_TRANSPORT", "(unset)",
       "the transport of a job that does not name one (--transport; ringd.Job): tcp, mpi or "
       "ibverbs; unset = mpi under mpirun where built in, else tcp"},
      {"RINGD_RENDEZVOUS_PORT", "(MASTER_PORT + 1)",
       "under torchrun: the port at MASTER_ADDR where rank 0 serves ringd's rendezvous store "
       "(torchrun's own store holds MASTER_PORT)"},
  };
  return table;
}

std::chrono::milliseconds parse_seconds(const std::string& name, const std::string& text) {
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds)) {
    RINGD_THROW(kInvalidArgument, name << "=" << text << " is not a positive number of seconds");
  }
  if (seconds > kMaxSeconds) {
    RINGD_THROW(kInvalidArgument, name << "=" << text << " is longer than the longest wait ringd "
                                       << "allows, " << static_cast<int64_t>(kMaxSeconds)
                                       << " s (11.6 days)");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

size_t parse_bytes(const std::string& name, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || end == text.c_str() ||
      errno == ERANGE) {
    RINGD_THROW(kInvalidArgument,
                name << "=" << text << " is not a byte count (e.g. 4096, 64K, 1M)");
  }
  unsigned long long scale = 1;
  const std::string suffix(end);
  if (suffix.empty() || suffix == "B")
    scale = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KB" || suffix == "KiB")
    scale = 1ULL << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MB" || suffix == "MiB")
    scale = 1ULL << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GB" || suffix == "GiB")
    scale = 1ULL << 30;
  else
    RINGD_THROW(kInvalidArgument,
                name << "=" << text << " has an unknown unit '" << suffix << "' (use K, M or G)");
  if (value > std::numeric_limits<size_t>::max() / scale) {
    RINGD_THROW(kInvalidArgument, name << "=" << text << " is too large");
  }
  return static_cast<size_t>(value * scale);
}

}  // namespace ringd
