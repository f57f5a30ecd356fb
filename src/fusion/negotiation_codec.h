// proto/negotiation.proto <-> the plain structs of tensor_params.h. Decoding checks every enum
// value and shape and throws ringd::Error(kProtocol) naming the sender on anything malformed, so a
// corrupt or foreign message never reaches the engine's tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fusion/tensor_params.h"

namespace ringd::fusion {

struct Request {
  std::string name;
  TensorParams params;
  uint64_t waited_us = 0;  // how long the tensor has waited on the requesting rank
};

using NameCounts = std::vector<std::pair<std::string, uint64_t>>;

// Where one rank stands (proto/negotiation.proto's RankState).
struct RankState {
  bool blocked = false;
  bool shutting_down = false;
  std::string reason;
  bool failed = false;  // shutting down because of its own error
  uint64_t done = 0;
  std::vector<std::string> awaited;
  NameCounts pending;       // name, times that name completed on this rank before
  NameCounts done_by_name;  // shutting down only
};

struct StoppedRank {
  int rank = 0;
  RankState state;
};

struct ResponseList {
  std::vector<Response> responses;
  bool shutdown = false;
  std::string shutdown_reason;
  std::string deadlock;              // set: every rank fails its pending tensors with this
  std::vector<StoppedRank> stopped;  // ranks whose engines shut down in this cycle
};

struct RequestList {
  std::vector<Request> requests;
  std::optional<RankState> state;
};

std::string encode_requests(int rank, const std::vector<Request>& requests,
                            const RankState* state = nullptr);
// `from` names the sender in errors; the decoded list must carry `from` as its rank.
RequestList decode_request_list(const std::string& bytes, int from);
std::vector<Request> decode_requests(const std::string& bytes, int from);

std::string encode_responses(const ResponseList& list);
ResponseList decode_responses(const std::string& bytes, int world_size);

}  // namespace ringd::fusion
