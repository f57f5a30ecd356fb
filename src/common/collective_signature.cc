#include "common/collective_signature.h"

namespace ringd {
namespace {

constexpr int kKindShift = 13;
constexpr int kDtypeShift = 10;
constexpr int kOpShift = 7;
constexpr int kAlgorithmShift = 5;
constexpr uint16_t kHashMask = 0x1F;

const char* kind_name(unsigned kind) {
  switch (kind) {
    case 1: return "allreduce";
    case 2: return "broadcast";
    case 3: return "allgather";
    case 4: return "reduce_scatter";
    case 5: return "allgatherv";
  }
  return "an unknown collective";
}

const char* algorithm_name(unsigned algorithm) {
  switch (algorithm) {
    case 1: return "ring";
    case 2: return "rd";
    case 3: return "hd";
  }
  return "-";
}

bool reduces(unsigned kind) { return kind == 1 || kind == 4; }

unsigned field(uint16_t bits, int shift, unsigned mask) { return (bits >> shift) & mask; }

std::string dtype_text(unsigned value) {
  return value < sizeof(kAllDataTypes) / sizeof(kAllDataTypes[0])
             ? dtype_name(static_cast<DataType>(value))
             : "dtype " + std::to_string(value);
}

std::string op_text(unsigned value) {
  return value < sizeof(kAllReduceOps) / sizeof(kAllReduceOps[0])
             ? reduce_op_name(static_cast<ReduceOp>(value))
             : "op " + std::to_string(value);
}

}  // namespace

uint16_t encode_signature(const CollectiveSignature& s) {
  const unsigned kind = static_cast<unsigned>(s.kind) & 7;
  const unsigned op = reduces(kind) ? static_cast<unsigned>(s.op) & 7 : 0;
  // Fibonacci hashing of count and root; the top 5 bits of the product are the best mixed.
  const uint64_t mixed =
      (static_cast<uint64_t>(s.count) * 0x9E3779B97F4A7C15ull) ^
      (static_cast<uint64_t>(static_cast<uint32_t>(s.root)) * 0xC2B2AE3D27D4EB4Full);
  const unsigned hash = static_cast<unsigned>(mixed >> 59) & kHashMask;
  return static_cast<uint16_t>(kind << kKindShift |
                               (static_cast<unsigned>(s.dtype) & 7) << kDtypeShift |
                               op << kOpShift | (s.algorithm & 3u) << kAlgorithmShift | hash);
}

std::string describe_signature(uint16_t bits) {
  const unsigned kind = field(bits, kKindShift, 7);
  if (kind == 0) return "no collective";
  std::string text = std::string(kind_name(kind)) + " " + dtype_text(field(bits, kDtypeShift, 7));
  if (reduces(kind)) text += " " + op_text(field(bits, kOpShift, 7));
  const unsigned algorithm = field(bits, kAlgorithmShift, 3);
  if (algorithm != 0) text += std::string(" ") + algorithm_name(algorithm);
  return text + ", count/root hash " + std::to_string(bits & kHashMask);
}

std::string signature_difference(uint16_t mine, uint16_t peer) {
  std::string out;
  const auto add = [&out](const std::string& what, const std::string& here,
                          const std::string& there) {
    if (here == there) return;
    out += std::string(out.empty() ? "" : ", ") + what + " (" + here + " here, " + there +
           " at the peer)";
  };
  const unsigned kind_here = field(mine, kKindShift, 7);
  const unsigned kind_there = field(peer, kKindShift, 7);
  add("collective", kind_here ? kind_name(kind_here) : "none",
      kind_there ? kind_name(kind_there) : "none");
  if (kind_here != kind_there) return out;  // the other fields mean different things
  add("dtype", dtype_text(field(mine, kDtypeShift, 7)), dtype_text(field(peer, kDtypeShift, 7)));
  if (reduces(kind_here)) {
    add("op", op_text(field(mine, kOpShift, 7)), op_text(field(peer, kOpShift, 7)));
  }
  add("algorithm", algorithm_name(field(mine, kAlgorithmShift, 3)),
      algorithm_name(field(peer, kAlgorithmShift, 3)));
  if (out.empty() && (mine & kHashMask) != (peer & kHashMask)) {
    out = "element count or root (their hashes differ: " + std::to_string(mine & kHashMask) +
          " here, " + std::to_string(peer & kHashMask) + " at the peer)";
  }
  return out;
}

}  // namespace ringd
