// Public entry points: validate arguments, pick the algorithm, and put the operation's context
// (which collective, sizes, algorithm, rank) in front of any error that escapes.
#include "ringd/collectives.h"

#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>

#include "allreduce/allreduce_tuner.h"
#include "allreduce/broadcast_chain.h"
#include "allreduce/halving_doubling.h"
#include "allreduce/recursive_doubling.h"
#include "allreduce/ring.h"
#include "allreduce/with_context.h"
#include "common/collective_signature.h"
#include "ringd/error.h"
#include "transport/error_text.h"

namespace ringd {
namespace {

using algo::Chunks;
using algo::Operation;
using algo::with_context;

void check_buffers(const char* what, const Context& ctx, const void* in, const void* out,
                   size_t count, DataType dtype) {
  ctx.check_usable();
  RINGD_CHECK_ARG(count <= std::numeric_limits<size_t>::max() / 8 / ctx.size(),
                  what << " on rank " << ctx.rank() << ": count " << count << " is too large");
  RINGD_CHECK_ARG(count == 0 || (in != nullptr && out != nullptr),
                  what << " on rank " << ctx.rank() << ": null buffer for " << count << " x "
                       << dtype_name(dtype));
}

uint8_t algorithm_bits(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kRing: return 1;
    case AllreduceAlgorithm::kRecursiveDoubling: return 2;
    case AllreduceAlgorithm::kHalvingDoubling: return 3;
    case AllreduceAlgorithm::kAuto: return 0;
  }
  return 0;
}

void copy_if_distinct(void* out, const void* in, size_t bytes) {
  if (out != in && bytes > 0) std::memcpy(out, in, bytes);
}

// What allgather and allgatherv share: this rank's chunk of `out` from `in`, then the ring's copy
// phase over the chunks (empty ones send nothing).
template <typename Describe>
void ring_gather(Context& ctx, const Operation& operation, const void* in, void* out,
                 const Chunks& chunks, DataType dtype, Describe describe) {
  const size_t elem = dtype_size(dtype);
  copy_if_distinct(static_cast<char*>(out) + chunks.offset(ctx.rank()) * elem, in,
                   chunks.count(ctx.rank()) * elem);
  if (ctx.size() == 1) return;
  with_context(
      ctx,
      [&] {
        algo::RingPass pass;
        pass.work = out;
        pass.count = chunks.offsets.back();
        pass.dtype = dtype;
        pass.copy_steps = ctx.size() - 1;
        pass.chunks = &chunks;
        algo::run_ring(operation, pass);
      },
      describe);
}

// A ring allreduce over `chunks` (reduce-scatter then allgather); the caller says where the data
// is (input/work, or pieces).
algo::RingPass ring_allreduce_pass(const Context& ctx, const Chunks& chunks, DataType dtype,
                                   ReduceOp op) {
  algo::RingPass pass;
  pass.count = chunks.offsets.back();
  pass.dtype = dtype;
  pass.op = op;
  pass.reduce_steps = ctx.size() - 1;
  pass.copy_steps = ctx.size() - 1;
  pass.chunks = &chunks;
  return pass;
}

algo::AllreduceTuner& tuner_of(Context& ctx) {
  std::shared_ptr<void>& state = ctx.collective_state();
  if (!state) state = std::make_shared<algo::AllreduceTuner>();
  return *static_cast<algo::AllreduceTuner*>(state.get());
}

}  // namespace

const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kAuto: return "auto";
    case AllreduceAlgorithm::kRing: return "ring";
    case AllreduceAlgorithm::kRecursiveDoubling: return "rd";
    case AllreduceAlgorithm::kHalvingDoubling: return "hd";
  }
  return "?";
}

AllreduceAlgorithm parse_allreduce_algorithm(const char* text) {
  const std::string t = text;
  if (t == "auto") return AllreduceAlgorithm::kAuto;
  if (t == "ring") return AllreduceAlgorithm::kRing;
  if (t == "rd" || t == "recursive-doubling") return AllreduceAlgorithm::kRecursiveDoubling;
  if (t == "hd" || t == "halving-doubling") return AllreduceAlgorithm::kHalvingDoubling;
  RINGD_THROW(kInvalidArgument,
              "unknown allreduce algorithm '" << t << "'; valid: auto ring rd hd");
}

void allreduce(Context& ctx, const void* in, void* out, size_t count, DataType dtype, ReduceOp op,
               const CollectiveOptions& options) {
  check_buffers("allreduce", ctx, in, out, count, dtype);
  RINGD_CHECK_ARG(reduce_op_supported(dtype, op), "allreduce on rank "
                                                      << ctx.rank() << ": op " << reduce_op_name(op)
                                                      << " is not defined for " << dtype_name(dtype)
                                                      << " (avg needs a floating-point type)");
  Operation operation{ctx, ctx.next_operation_id(), algo::resolve(ctx, options)};
  const size_t bytes = count * dtype_size(dtype);
  AllreduceAlgorithm algorithm = options.algorithm;
  algo::AllreduceTuner::Pick tuned;
  if (algorithm == AllreduceAlgorithm::kAuto && count >= static_cast<size_t>(ctx.size())) {
    tuned = tuner_of(ctx).pick(bytes, ctx.size(), operation.opts);
    algorithm = tuned.algorithm;
  }
  if (algorithm == AllreduceAlgorithm::kAuto)
    algorithm = algo::allreduce_by_size(bytes, operation.opts);
  // Fewer elements than ranks leaves ring (or halving) chunks empty; recursive doubling is right
  // there anyway.
  if (algorithm != AllreduceAlgorithm::kRecursiveDoubling &&
      count < static_cast<size_t>(ctx.size())) {
    algorithm = AllreduceAlgorithm::kRecursiveDoubling;
  }
  if (count == 0) return;
  if (ctx.size() == 1) {
    copy_if_distinct(out, in, bytes);
    return;
  }
  operation.signature =
      encode_signature({SignatureKind::kAllreduce, dtype, op, algorithm_bits(algorithm), count, 0});
  with_context(
      ctx,
      [&] {
        if (algorithm == AllreduceAlgorithm::kRecursiveDoubling ||
            algorithm == AllreduceAlgorithm::kHalvingDoubling) {
          const auto start = std::chrono::steady_clock::now();
          copy_if_distinct(out, in, bytes);
          if (algorithm == AllreduceAlgorithm::kRecursiveDoubling) {
            algo::recursive_doubling_allreduce(operation, out, count, dtype, op);
          } else {
            algo::halving_doubling_allreduce(operation, out, count, dtype, op);
          }
          if (tuned.size_class >= 0) {
            const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
            tuner_of(ctx).record(tuned, took.count(), ctx, operation.opts);
          }
          return;
        }
        const Chunks chunks(count, ctx.size());
        algo::RingPass pass = ring_allreduce_pass(ctx, chunks, dtype, op);
        pass.input = in;
        pass.work = out;
        algo::run_ring(operation, pass);
      },
      [&](std::ostream& os) {
        os << "allreduce #" << operation.id << " (" << count << " x " << dtype_name(dtype) << " "
           << reduce_op_name(op) << ", " << allreduce_algorithm_name(algorithm) << ", "
           << ctx.transport_name() << ")";
      });
}

void allreduce_list(Context& ctx, std::span<const BufferView> buffers, DataType dtype, ReduceOp op,
                    const CollectiveOptions& options) {
  size_t total = 0;
  for (const BufferView& buffer : buffers) {
    check_buffers("allreduce_list", ctx, buffer.data, buffer.data, buffer.count, dtype);
    total += buffer.count;
  }
  if (buffers.size() == 1) {
    allreduce(ctx, buffers[0].data, buffers[0].data, total, dtype, op, options);
    return;
  }
  const size_t elem = dtype_size(dtype);
  const algo::Resolved resolved = algo::resolve(ctx, options);
  const bool ring = total >= static_cast<size_t>(ctx.size()) && ctx.size() > 1 &&
                    (options.algorithm == AllreduceAlgorithm::kRing ||
                     (options.algorithm == AllreduceAlgorithm::kAuto &&
                      total * elem > resolved.ring_allreduce_bytes));
  if (!ring) {
    // Latency-bound (or a forced rd/hd): one buffer, whatever allreduce picks for it, in the
    // context's staging memory (kept between calls: the engine does this every cycle).
    unsigned char* joined = static_cast<unsigned char*>(ctx.staging(total * elem));
    size_t offset = 0;
    for (const BufferView& buffer : buffers) {
      if (buffer.count > 0) std::memcpy(joined + offset, buffer.data, buffer.count * elem);
      offset += buffer.count * elem;
    }
    allreduce(ctx, joined, joined, total, dtype, op, options);
    offset = 0;
    for (const BufferView& buffer : buffers) {
      if (buffer.count > 0) std::memcpy(buffer.data, joined + offset, buffer.count * elem);
      offset += buffer.count * elem;
    }
    return;
  }
  RINGD_CHECK_ARG(reduce_op_supported(dtype, op), "allreduce_list on rank "
                                                      << ctx.rank() << ": op " << reduce_op_name(op)
                                                      << " is not defined for " << dtype_name(dtype)
                                                      << " (avg needs a floating-point type)");
  // The same operation, signature and chunks as allreduce() of the joined buffers with the ring.
  Operation operation{ctx, ctx.next_operation_id(), resolved};
  operation.signature = encode_signature(
      {SignatureKind::kAllreduce, dtype, op, algorithm_bits(AllreduceAlgorithm::kRing), total, 0});
  algo::PieceList pieces;
  pieces.elem = elem;
  pieces.starts.push_back(0);
  for (const BufferView& buffer : buffers) {
    pieces.bases.push_back(static_cast<char*>(buffer.data));
    pieces.starts.push_back(pieces.starts.back() + buffer.count);
  }
  with_context(
      ctx,
      [&] {
        const Chunks chunks(total, ctx.size());
        algo::RingPass pass = ring_allreduce_pass(ctx, chunks, dtype, op);
        pass.pieces = &pieces;
        algo::run_ring(operation, pass);
      },
      [&](std::ostream& os) {
        os << "allreduce #" << operation.id << " (" << total << " x " << dtype_name(dtype) << " "
           << reduce_op_name(op) << " in " << buffers.size() << " buffers, ring, "
           << ctx.transport_name() << ")";
      });
}

void broadcast(Context& ctx, void* buf, size_t count, DataType dtype, int root,
               const CollectiveOptions& options) {
  check_buffers("broadcast", ctx, buf, buf, count, dtype);
  RINGD_CHECK_ARG(root >= 0 && root < ctx.size(),
                  "broadcast on rank " << ctx.rank() << ": root " << root
                                       << " is not a rank of this job (size " << ctx.size() << ")");
  const Operation operation{
      ctx, ctx.next_operation_id(), algo::resolve(ctx, options),
      encode_signature({SignatureKind::kBroadcast, dtype, ReduceOp::kSum, 0, count, root})};
  if (count == 0 || ctx.size() == 1) return;
  with_context(
      ctx, [&] { algo::chain_broadcast(operation, buf, count * dtype_size(dtype), root); },
      [&](std::ostream& os) {
        os << "broadcast #" << operation.id << " (" << count << " x " << dtype_name(dtype)
           << " from root " << root << ", " << ctx.transport_name() << ")";
      });
}

void allgather(Context& ctx, const void* in, void* out, size_t count_per_rank, DataType dtype,
               const CollectiveOptions& options) {
  check_buffers("allgather", ctx, in, out, count_per_rank, dtype);
  const Operation operation{
      ctx, ctx.next_operation_id(), algo::resolve(ctx, options),
      encode_signature({SignatureKind::kAllgather, dtype, ReduceOp::kSum, 1, count_per_rank, 0})};
  if (count_per_rank == 0) return;
  ring_gather(ctx, operation, in, out, Chunks(count_per_rank * ctx.size(), ctx.size()), dtype,
              [&](std::ostream& os) {
                os << "allgather #" << operation.id << " (" << count_per_rank << " x "
                   << dtype_name(dtype) << " per rank, " << ctx.transport_name() << ")";
              });
}

void allgatherv(Context& ctx, const void* in, void* out, const std::vector<size_t>& counts,
                DataType dtype, const CollectiveOptions& options) {
  RINGD_CHECK_ARG(counts.size() == static_cast<size_t>(ctx.size()),
                  "allgatherv on rank " << ctx.rank() << ": " << counts.size() << " counts for "
                                        << ctx.size() << " ranks");
  const algo::Chunks chunks(counts);
  const size_t total = chunks.offsets.back();
  check_buffers("allgatherv", ctx, in, out, total, dtype);
  // The counts' hash in the signature: ranks that disagree on any count fail at the first message.
  size_t counts_hash = 0xcbf29ce484222325ull;
  for (size_t count : counts) counts_hash = (counts_hash ^ count) * 0x100000001b3ull;
  const Operation operation{
      ctx, ctx.next_operation_id(), algo::resolve(ctx, options),
      encode_signature({SignatureKind::kAllgatherv, dtype, ReduceOp::kSum, 1, counts_hash, 0})};
  if (total == 0) return;
  ring_gather(ctx, operation, in, out, chunks, dtype, [&](std::ostream& os) {
    os << "allgatherv #" << operation.id << " (" << chunks.count(ctx.rank()) << " of " << total
       << " x " << dtype_name(dtype) << " here, " << ctx.transport_name() << ")";
  });
}

void reduce_scatter(Context& ctx, const void* in, void* out, size_t count_per_rank, DataType dtype,
                    ReduceOp op, const CollectiveOptions& options) {
  check_buffers("reduce_scatter", ctx, in, out, count_per_rank, dtype);
  RINGD_CHECK_ARG(reduce_op_supported(dtype, op),
                  "reduce_scatter on rank " << ctx.rank() << ": op " << reduce_op_name(op)
                                            << " is not defined for " << dtype_name(dtype));
  const Operation operation{
      ctx, ctx.next_operation_id(), algo::resolve(ctx, options),
      encode_signature({SignatureKind::kReduceScatter, dtype, op, 1, count_per_rank, 0})};
  const size_t elem = dtype_size(dtype);
  if (count_per_rank == 0) return;
  if (ctx.size() == 1) {
    copy_if_distinct(out, in, count_per_rank * elem);
    return;
  }
  with_context(
      ctx,
      [&] {
        const Chunks chunks(count_per_rank * ctx.size(), ctx.size());
        algo::RingPass pass;
        pass.input = in;
        pass.work = nullptr;  // scratch: the other ranks' partial chunks
        pass.result_chunk = out;
        pass.result_chunk_index = ctx.rank();
        pass.count = count_per_rank * ctx.size();
        pass.dtype = dtype;
        pass.op = op;
        pass.reduce_steps = ctx.size() - 1;
        pass.shift = -1;
        pass.chunks = &chunks;
        algo::run_ring(operation, pass);
      },
      [&](std::ostream& os) {
        os << "reduce_scatter #" << operation.id << " (" << count_per_rank << " x "
           << dtype_name(dtype) << " " << reduce_op_name(op) << " per rank, "
           << ctx.transport_name() << ")";
      });
}

}  // namespace ringd
