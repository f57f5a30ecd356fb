// The tensor-fusion engine: asynchronous, named collectives that every rank may submit in its own
// order. One background thread per engine negotiates which tensors all ranks have submitted, fuses
// the ready ones into one buffer per (dtype, op) up to a threshold, runs the collectives over the
// Context and completes the handles. docs/architecture.md ("The fusion engine") has the picture.
//
//   Engine engine(ctx);                       // ctx now belongs to the engine's thread
//   Handle a = engine.allreduce_async("layer3.weight", {w.data(), DataType::kFloat32, {64, 64}},
//                                     ReduceOp::kAvg);
//   Handle b = engine.allreduce_async("layer3.bias", {...}, ReduceOp::kAvg);
//   a.wait(); b.wait();                        // results are in place in the caller's buffers
//
// Rules:
//  * Every rank submits every name once per round, with the same parameters (kind, dtype, shape,
//    op, root, compression, group); the order may differ. The execution order is the same on
//    every rank. Ranks that disagree get kMismatch on that tensor's handle, on every rank, naming
//    the ranks and both shapes; the engine stays usable.
//  * A name may be submitted again once its handle is done; submitting it while it is in flight
//    throws kInvalidArgument on that rank.
//  * The tensor's memory must stay valid and untouched until its handle is done.
//  * While an engine runs, nothing else may use its Context (one thread at a time).
//  * Errors on the background thread (a peer lost, a timeout) fail every pending handle with that
//    error and make later submissions throw it.
//  * shutdown() (and the destructor) is collective in effect: it stops the engines of all ranks
//    at the end of the cycle that carries it; their pending handles fail with kPeerLost, naming
//    the rank that shut down, how often it completed the tensor, and its reason.
//  * Deadlocks are detected: a rank is blocked while every thread that has submitted to its
//    engine waits in Handle::wait() (or wait_unless()); when every rank is blocked and no tensor
//    is pending on all of them, nothing can ever run, so every rank's pending handles fail at
//    once with kDeadlock naming what each rank waits on (within about a second of the last rank
//    blocking; src/fusion/controller.h). The engine stays usable.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ringd/collectives.h"
#include "ringd/dgc.h"
#include "ringd/hierarchy.h"
#include "ringd/local_group.h"
#include "ringd/transport.h"
#include "ringd/types.h"

namespace ringd {

// A caller-owned buffer: shape.size() dimensions (none = a scalar) of dtype, densely packed.
struct Tensor {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;

  size_t count() const;  // product of the dimensions
  size_t bytes() const { return count() * dtype_size(dtype); }
};

// On-the-wire compression of float32 allreduces. kFp16/kBf16: the fused buffer travels as 16-bit
// floats; every combining step widens to f32, combines and rounds once (src/common/reduce.h).
// kDgc: deep gradient compression (include/ringd/dgc.h): each rank sends its tensor's largest
// entries as (index, value) pairs and keeps the rest, with the momentum, for later steps; only
// for sum and avg, and what it returns is the average of the velocities sent, to be applied by
// plain SGD. Other dtypes ignore compression.
enum class Compression : uint8_t { kNone, kFp16, kBf16, kDgc };
const char* compression_name(Compression compression);   // "none", "fp16", "bf16", "dgc"
Compression parse_compression(const std::string& text);  // throws kInvalidArgument

// What the stall inspector found (rank 0 reports; see RINGD_STALL_WARNING_S).
struct StalledTensor {
  std::string name;
  double waited_s = 0;
  std::vector<int> submitted_by;  // ranks that have submitted it
  std::vector<int> missing_on;    // ranks that have not
};
struct StallReport {
  std::vector<StalledTensor> tensors;
  bool shutting_down = false;  // RINGD_STALL_SHUTDOWN_S passed: every rank fails them now
  std::string message;         // what the log line says
};

// Unset fields take the RINGD_* tunables (docs/tunables.md).
struct EngineOptions {
  std::optional<double> cycle_time_ms;            // RINGD_CYCLE_TIME_MS
  std::optional<size_t> fusion_threshold_bytes;   // RINGD_FUSION_THRESHOLD_BYTES; 0 = no fusion
  std::optional<size_t> fusion_max_tensor_bytes;  // RINGD_FUSION_MAX_TENSOR_BYTES; 0 = any
  std::optional<size_t> cache_capacity;           // RINGD_CACHE_CAPACITY; 0 = no response cache
  std::optional<double> stall_warning_s;          // RINGD_STALL_WARNING_S; 0 = no inspector
  std::optional<double> stall_shutdown_s;         // RINGD_STALL_SHUTDOWN_S; 0 = never
  std::optional<std::string> timeline_path;       // RINGD_TIMELINE; "" = no timeline
  std::optional<Compression> compression;         // RINGD_COMPRESSION: default for allreduces
  std::optional<int> copy_threads;                // RINGD_FUSION_THREADS
  DgcOptions dgc;                                 // for Compression::kDgc tensors
  CollectiveOptions collective;                   // for the data collectives
  // Called on rank 0's background thread with every stall report (also logged as a warning).
  std::function<void(const StallReport&)> on_stall;
  bool record_cycles = false;  // keep per-cycle timings (EngineStats::cycle_log), for benchmarks
  // The node's devices: with a group of L devices, this engine is the node's and every tensor is
  // submitted once per node with one buffer per device (Submission::other_devices); each fused
  // bucket runs as one hierarchical collective (ringd/hierarchy.h): reduce inside the node, the
  // collective across nodes, broadcast inside the node. Negotiation stays per node. Every node
  // must pass a group of the same size (checked when the engine starts). Not owned: it must
  // outlive the engine, and nothing else may use it meanwhile. Allgather and DGC do not run over
  // a group yet (kInvalidArgument); with a group whose buffers are not host memory (GPUs), a
  // bucket's members run one by one on their own buffers and fp16/bf16 do not apply.
  LocalGroup* local_group = nullptr;
  // With local_group: the strategy and the pipeline chunk (HierarchyOptions::inter_node is
  // `collective`; the per-call agreement check is off, the negotiation has agreed already).
  HierarchyOptions hierarchy;
};

// Counters since the engine started (identical on every rank where marked *).
struct EngineStats {
  uint64_t cycles = 0;              // * negotiation cycles run
  uint64_t coordinator_rounds = 0;  // * cycles that needed the rank-0 request/response round
  uint64_t cache_hits = 0;          // * tensors that ran from the response cache
  uint64_t cache_misses = 0;        // * tensors that ran from a coordinator response
  uint64_t tensors_done = 0;        // * handles completed successfully
  uint64_t tensors_failed = 0;      // handles failed
  uint64_t buckets = 0;             // * collectives run (a fused bucket counts once)
  uint64_t fused_tensors = 0;       // * tensors that went through the fusion buffer
  uint64_t bytes = 0;               // * payload bytes of completed tensors
  // Bytes this rank contributed to the network after compression: DGC's 8 per pair sent plus 4
  // per element of tensors kept dense, 2 per element with fp16/bf16, the payload without.
  uint64_t compressed_bytes = 0;
  uint64_t dgc_sparse_tensors = 0;  // * DGC tensors exchanged as pairs (the others went dense)
  // * Each rank's lag behind the median rank (seconds, index = rank), averaged over the last 20
  // cycles that ran something; empty before the first such window. Rank 0 logs "rank 2 is the
  // straggler: ready 310 ms after the median rank ..." when one lags 20 ms or more and at least
  // a tenth of the mean interval between those cycles (src/fusion/controller.h).
  std::vector<double> rank_lag_s;
  double negotiation_s = 0;  // time in negotiation (including waiting for other ranks)
  double execution_s = 0;    // time running collectives and copies
  struct Cycle {
    double negotiation_us;
    double execution_us;
  };
  std::vector<Cycle> cycle_log;  // with EngineOptions::record_cycles
};

namespace detail {
struct HandleState;
}

// A submitted tensor. Copyable; all copies refer to the same operation.
class Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<detail::HandleState> state) : state_(std::move(state)) {}

  bool valid() const { return state_ != nullptr; }
  const std::string& name() const;
  bool done() const;
  // Blocks until done; throws the ringd::Error the operation failed with. While a thread waits
  // here the engine counts it as blocked (the deadlock detector, "Rules" above).
  void wait() const;
  // Like wait(), but returns false if not done within `timeout`. Not counted as blocked: a
  // bounded wait is often a poll between other work.
  bool wait_for(std::chrono::milliseconds timeout) const;
  // Like wait(), but calls `interrupted` every `every` (on this thread) and returns false as soon
  // as it returns true (for bindings that must look at signals: Ctrl-C). Counted as blocked for
  // the whole call. `for_thread` (a pthread_self() value; 0 = none): a completion thread that
  // waits for what that thread submitted, while it waits where ringd cannot see (a torch
  // Future); that thread then counts as blocked too once it has not submitted for a second
  // (src/fusion/wait_tracker.h).
  bool wait_unless(const std::function<bool()>& interrupted,
                   std::chrono::milliseconds every = std::chrono::milliseconds(100),
                   uint64_t for_thread = 0) const;
  // allgather: the gathered tensor (rank 0's rows first) and its shape, valid after wait().
  const std::vector<uint8_t>& output() const;
  const std::vector<int64_t>& output_shape() const;

 private:
  std::shared_ptr<detail::HandleState> state_;
};

// Runs on the background thread when the operation completes, before Handle::wait() returns;
// `error` is null on success. Must be quick and must not wait on other handles.
using Callback = std::function<void(std::exception_ptr error)>;

enum class CollectiveKind : uint8_t { kAllreduce, kBroadcast, kAllgather };

// One member of a grouped submission (and the general form of the three calls below).
struct Submission {
  std::string name;
  CollectiveKind kind = CollectiveKind::kAllreduce;
  Tensor tensor;
  ReduceOp op = ReduceOp::kSum;            // allreduce
  int root = 0;                            // broadcast
  std::optional<Compression> compression;  // allreduce; unset = the engine's default
  Callback callback;
  // With EngineOptions::local_group of L devices: the tensor's buffers on devices 1..L-1 (same
  // shape; `tensor.data` is device 0's), in device order. Empty without a group. A broadcast's
  // root is then a device's global rank, node * L + device.
  std::vector<void*> other_devices;
};

class Engine {
 public:
  Engine(Context& ctx, const EngineOptions& options = {});
  ~Engine();  // shutdown(), never throws
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // In place: afterwards `tensor` holds op over every rank's tensor.
  Handle allreduce_async(std::string name, const Tensor& tensor, ReduceOp op,
                         Callback callback = nullptr);
  // In place: afterwards `tensor` holds root's tensor on every rank.
  Handle broadcast_async(std::string name, const Tensor& tensor, int root,
                         Callback callback = nullptr);
  // Every rank's tensor, concatenated along the first dimension (which may differ per rank) into
  // Handle::output().
  Handle allgather_async(std::string name, const Tensor& tensor, Callback callback = nullptr);
  Handle submit(Submission submission);
  // The members run only when all of them are ready on every rank, fused where their kinds allow.
  // `group` names the group identically on every rank; all members are submitted atomically.
  std::vector<Handle> submit_group(const std::string& group, std::vector<Submission> members);

  // Stops this engine and, at the end of the cycle that carries the request, every rank's engine.
  // Blocks until the background thread has ended. Idempotent. `reason` (why this rank stops:
  // "it finished training", or its own error) reaches every rank's error for the tensors it
  // leaves pending, with how often this rank completed each ("rank 1 has shut down after
  // completing it 9 times"); `failed`: this rank stops because of its own error (the others then
  // report its failure, not a hint at uneven data).
  void shutdown(const std::string& reason = "", bool failed = false);

  // The epoch DGC's sparsity warm-up reads (DgcOptions::warmup). Call it with the same value on
  // every rank before submitting that epoch's first tensor; ranks that disagree fail with
  // kMismatch at the next DGC exchange.
  void set_epoch(int epoch);

  // Replaces EngineOptions::dgc for the DGC buckets that run from now on (for callers that learn
  // the settings after the engine started: ringd.torch's Compression.dgc). Every rank must pass
  // the same settings; this call does not compare them across ranks. Throws kInvalidArgument for
  // settings no rank could run (check_dgc_options) and for different settings once a DGC bucket
  // has run: a tensor's velocity and residual were built under the first ones.
  void set_dgc_options(const DgcOptions& options);

  EngineStats stats() const;
  int rank() const;
  int size() const;
  int local_devices() const;  // L with EngineOptions::local_group, else 1

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringd
