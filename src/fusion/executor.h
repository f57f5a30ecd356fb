// Runs one cycle's ready tensors: the buckets of fusion_plan.h, each as
//
//   memcpy in (parallel, maybe f32 -> fp16/bf16)  ->  ONE collective on the fusion buffer
//   ->  memcpy out (parallel)  ->  complete the members' handles
//
// A bucket of one tensor without compression skips both copies and runs on the caller's buffer.
// Consecutive allreduce buckets run as one pipeline (allreduce/hierarchy_pipeline.h): while
// bucket b is on the network, a helper thread copies bucket b+1 into the fusion buffer and bucket
// b-1 out of it, so the copies cost almost nothing on top of the network time:
//
//   helper:  in 0 | in 1 | ... out 0 | in 2 | ... out 1 | in 3 | ... out 2 | ... out 3
//   caller:       | allreduce 0 ....| allreduce 1 .....| allreduce 2 .....| allreduce 3 |
//
// The helper copies bucket b+1 in only after bucket b-1 is out, so two fusion buffers (slots,
// alternating between the fused buckets) are enough: memory is 2 x the fusion threshold. The
// members' handles complete when the cycle's pipeline is done.
// A DGC bucket (executor_dgc.cc) compresses each member into pairs or a dense part instead.
// Every rank runs the same buckets in the same order (the ready list is identical everywhere).
// An engine over local devices runs each bucket through the hierarchy (executor_hierarchy.cc).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "compression/dgc_compressor.h"
#include "fusion/engine_config.h"
#include "fusion/fusion_buffer.h"
#include "fusion/fusion_plan.h"
#include "fusion/pending.h"
#include "fusion/timeline.h"
#include "ringd/local_group.h"
#include "ringd/transport.h"

namespace ringd::fusion {

// A tensor's buffer on device `device` (0: the submitted tensor's own), and on every device in
// device order (one without local devices).
void* device_data(const ReadyTensor& ready, int device);
std::vector<DeviceBuffer> device_buffers(const ReadyTensor& ready);

// Whether the group's buffers are host memory the engine may copy into and hand to allreduce_list
// (CPU devices: LocalGroup::staging_piece_bytes() is unlimited; GPUs are not).
inline bool host_memory(const LocalGroup& group) { return group.staging_piece_bytes() == SIZE_MAX; }

class Executor {
 public:
  // Called once per tensor (error null = success). It must reset the tensor's handle.
  using Complete = std::function<void(ReadyTensor&, std::exception_ptr)>;
  // What one bucket put on the network.
  struct Traffic {
    size_t compressed_bytes = 0;  // this rank's contribution after compression (EngineStats)
    size_t sparse_tensors = 0;    // DGC members exchanged as pairs
  };
  // Called after a bucket's collective, before its members complete: (members, payload bytes,
  // traffic).
  using BucketDone = std::function<void(size_t, size_t, const Traffic&)>;
  struct Counts {
    size_t buckets = 0;
    size_t fused_tensors = 0;  // members of buckets of two or more
    size_t bytes = 0;
  };

  Executor(Context& ctx, const EngineConfig& config, Timeline* timeline);

  // Throws the first collective error (the Context is aborted by then); tensors not completed
  // yet still hold their handle.
  Counts run(std::vector<ReadyTensor>& ready, const Complete& complete,
             const BucketDone& bucket_done);

  // Engine::set_epoch(): read by DGC buckets (any thread may set it).
  void set_epoch(int epoch) { epoch_.store(epoch); }
  // Engine::set_dgc_options() (any thread).
  void set_dgc_options(const DgcOptions& options);

 private:
  // A bucket's allreduce as the pipelines run it.
  struct AllreducePlan {
    const Bucket* bucket = nullptr;
    Compression compression = Compression::kNone;  // as applied (none unless float32)
    DataType wire = DataType::kFloat32;
    size_t wire_size = 4;
    size_t total = 0;  // elements
    // On the members' own buffers: one uncompressed member, every uncompressed bucket of the
    // flat engine (allreduce_list), or no host copies possible (device groups).
    bool in_place = false;
    int slot = 0;  // fused: the fusion buffer slot (0 or 1, alternating)
  };
  std::vector<AllreducePlan> plan_allreduces(const std::vector<const Bucket*>& buckets,
                                             const std::vector<ReadyTensor>& ready, int devices,
                                             bool can_copy, bool lists);
  // The copy pieces between a fused plan's members (on every device) and its slot.
  void fused_pieces(const AllreducePlan& plan, const std::vector<ReadyTensor>& ready, int devices,
                    std::vector<CopyPiece>* in, std::vector<CopyPiece>* out);
  // Runs a fused plan's copy into its slot (`into`) or out of it, converting for fp16/bf16.
  void copy_plan(const AllreducePlan& plan, std::vector<ReadyTensor>& ready,
                 std::vector<CopyPiece> pieces, bool into);

  Traffic run_bucket(const Bucket& bucket, std::vector<ReadyTensor>& ready);
  // Consecutive non-DGC allreduce buckets as one pipeline; traffic per bucket.
  std::vector<Traffic> run_allreduces(const std::vector<const Bucket*>& buckets,
                                      std::vector<ReadyTensor>& ready);
  Traffic run_dgc(const Bucket& bucket, std::vector<ReadyTensor>& ready);
  // A new state takes `momentum` (the settings' when the tensor first runs).
  compression::DgcTensorState& dgc_state(const std::string& name, size_t count, float momentum);
  void run_broadcast(const Bucket& bucket, std::vector<ReadyTensor>& ready);
  void run_allgather(ReadyTensor& tensor);
  // Consecutive allreduce buckets as one pipeline (executor_hierarchy.cc); traffic per bucket.
  std::vector<Traffic> run_hierarchical_allreduces(const std::vector<const Bucket*>& buckets,
                                                   std::vector<ReadyTensor>& ready);
  void run_hierarchical_broadcast(const Bucket& bucket, std::vector<ReadyTensor>& ready);
  // Fusion buffer `slot` (0 or 1) of `device`, at least `bytes` long (contents not kept when it
  // grows). Broadcast, allgather and DGC use slot 0.
  void* fusion_buffer(int device, int slot, size_t bytes);
  void copy(const Bucket& bucket, std::vector<ReadyTensor>& ready, std::vector<CopyPiece> pieces,
            CopyMode mode, Compression compression, const char* phase);
  void mark(const Bucket& bucket, std::vector<ReadyTensor>& ready, const char* phase,
            Timeline::Clock::time_point start);

  Context& ctx_;
  const EngineConfig& config_;
  Timeline* timeline_;
  std::vector<std::array<FusionBuffer, 2>> slots_;  // per device
  ParallelCopier copier_;
  std::atomic<int> epoch_{0};
  std::mutex dgc_mutex_;    // guards the two below against set_dgc_options()
  DgcOptions dgc_options_;  // config_.dgc until set_dgc_options()
  bool dgc_ran_ = false;    // a DGC bucket has run: the options are fixed
  // DGC's velocity and residual per tensor name; a name whose element count changes starts over.
  std::unordered_map<std::string, compression::DgcTensorState> dgc_states_;
  std::vector<compression::SparseEntry> dgc_entries_;  // reused between buckets
};

}  // namespace ringd::fusion
