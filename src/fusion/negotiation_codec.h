// proto/negotiation.proto <-> the plain structs of tensor_params.h. Decoding checks every enum
// value and shape and throws ringd::Error(kProtocol) naming the sender on anything malformed, so a
// corrupt or foreign message never reaches the engine's tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusion/tensor_params.h"

namespace ringd::fusion {

struct Request {
  std::string name;
  TensorParams params;
  uint64_t waited_us = 0;  // how long the tensor has waited on the requesting rank
};

struct ResponseList {
  std::vector<Response> responses;
  bool shutdown = false;
  std::string shutdown_reason;
};

std::string encode_requests(int rank, const std::vector<Request>& requests);
// `from` names the sender in errors; the decoded list must carry `from` as its rank.
std::vector<Request> decode_requests(const std::string& bytes, int from);

std::string encode_responses(const ResponseList& list);
ResponseList decode_responses(const std::string& bytes, int world_size);

}  // namespace ringd::fusion
