#include "fusion/negotiation_codec.h"

#include "proto/negotiation.pb.h"
#include "ringd/error.h"

namespace ringd::fusion {
namespace {

namespace pb = ::ringd::negotiation;

constexpr uint32_t kDataTypes = static_cast<uint32_t>(DataType::kUInt8) + 1;
constexpr uint32_t kReduceOps = static_cast<uint32_t>(ReduceOp::kProd) + 1;
constexpr uint32_t kCompressions = static_cast<uint32_t>(Compression::kDgc) + 1;

void to_proto(const TensorParams& params, pb::TensorParams* out) {
  out->set_kind(static_cast<pb::CollectiveKind>(params.kind));
  out->set_dtype(static_cast<uint32_t>(params.dtype));
  out->set_op(static_cast<uint32_t>(params.op));
  out->set_root(params.root);
  out->set_compression(static_cast<uint32_t>(params.compression));
  for (int64_t dim : params.shape) out->add_shape(dim);
  out->set_group(params.group);
  out->set_group_size(params.group_size);
}

TensorParams from_proto(const pb::TensorParams& in, const std::string& name, int from) {
  const auto bad = [&](const char* what, int64_t value) {
    RINGD_THROW(kProtocol, "negotiation message from rank "
                               << from << " for tensor '" << name << "' has an invalid " << what
                               << " (" << value << "); every rank must run the same ringd version");
  };
  TensorParams params;
  if (in.kind() < pb::ALLREDUCE || in.kind() > pb::ALLGATHER) bad("collective kind", in.kind());
  if (in.dtype() >= kDataTypes) bad("dtype", in.dtype());
  if (in.op() >= kReduceOps) bad("reduce op", in.op());
  if (in.compression() >= kCompressions) bad("compression", in.compression());
  params.kind = static_cast<CollectiveKind>(in.kind());
  params.dtype = static_cast<DataType>(in.dtype());
  params.op = static_cast<ReduceOp>(in.op());
  params.root = in.root();
  params.compression = static_cast<Compression>(in.compression());
  for (int64_t dim : in.shape()) {
    if (dim < 0) bad("dimension", dim);
    params.shape.push_back(dim);
  }
  params.group = in.group();
  params.group_size = in.group_size();
  return params;
}

void to_proto(const RankState& state, pb::RankState* out) {
  out->set_blocked(state.blocked);
  out->set_shutting_down(state.shutting_down);
  out->set_reason(state.reason);
  out->set_failed(state.failed);
  out->set_done(state.done);
  for (const std::string& name : state.awaited) out->add_awaited(name);
  for (const auto& [name, count] : state.pending) {
    pb::NameCount* entry = out->add_pending();
    entry->set_name(name);
    entry->set_count(count);
  }
  for (const auto& [name, count] : state.done_by_name) {
    pb::NameCount* entry = out->add_done_by_name();
    entry->set_name(name);
    entry->set_count(count);
  }
}

NameCounts from_proto(const google::protobuf::RepeatedPtrField<pb::NameCount>& in) {
  NameCounts counts;
  counts.reserve(in.size());
  for (const pb::NameCount& entry : in) counts.emplace_back(entry.name(), entry.count());
  return counts;
}

RankState from_proto(const pb::RankState& in) {
  RankState state;
  state.blocked = in.blocked();
  state.shutting_down = in.shutting_down();
  state.reason = in.reason();
  state.failed = in.failed();
  state.done = in.done();
  state.awaited.assign(in.awaited().begin(), in.awaited().end());
  state.pending = from_proto(in.pending());
  state.done_by_name = from_proto(in.done_by_name());
  return state;
}

}  // namespace

std::string encode_requests(int rank, const std::vector<Request>& requests,
                            const RankState* state) {
  pb::RequestList list;
  list.set_rank(rank);
  if (state) to_proto(*state, list.mutable_state());
  for (const Request& request : requests) {
    pb::Request* out = list.add_requests();
    out->set_tensor_name(request.name);
    to_proto(request.params, out->mutable_params());
    out->set_waited_us(request.waited_us);
  }
  return list.SerializeAsString();
}

std::vector<Request> decode_requests(const std::string& bytes, int from) {
  return decode_request_list(bytes, from).requests;
}

RequestList decode_request_list(const std::string& bytes, int from) {
  pb::RequestList list;
  if (!list.ParseFromString(bytes) || list.rank() != from) {
    RINGD_THROW(kProtocol, "the negotiation request list from rank "
                               << from << " (" << bytes.size()
                               << " bytes) does not parse; every rank must run the same ringd "
                                  "version");
  }
  RequestList decoded;
  decoded.requests.reserve(list.requests_size());
  for (const pb::Request& in : list.requests()) {
    Request request;
    request.name = in.tensor_name();
    request.params = from_proto(in.params(), request.name, from);
    request.waited_us = in.waited_us();
    decoded.requests.push_back(std::move(request));
  }
  if (list.has_state()) decoded.state = from_proto(list.state());
  return decoded;
}

std::string encode_responses(const ResponseList& list) {
  pb::ResponseList out;
  for (const Response& response : list.responses) {
    pb::Response* r = out.add_responses();
    r->set_tensor_name(response.name);
    to_proto(response.params, r->mutable_params());
    for (int64_t dim : response.first_dims) r->add_first_dims(dim);
    r->set_error(response.error);
  }
  out.set_shutdown(list.shutdown);
  out.set_shutdown_reason(list.shutdown_reason);
  out.set_deadlock(list.deadlock);
  for (const StoppedRank& stopped : list.stopped) {
    pb::StoppedRank* entry = out.add_stopped();
    entry->set_rank(stopped.rank);
    to_proto(stopped.state, entry->mutable_state());
  }
  return out.SerializeAsString();
}

ResponseList decode_responses(const std::string& bytes, int world_size) {
  pb::ResponseList in;
  if (!in.ParseFromString(bytes)) {
    RINGD_THROW(kProtocol, "the negotiation response list from rank 0 ("
                               << bytes.size()
                               << " bytes) does not parse; every rank must run the same ringd "
                                  "version");
  }
  ResponseList list;
  list.shutdown = in.shutdown();
  list.shutdown_reason = in.shutdown_reason();
  list.deadlock = in.deadlock();
  for (const pb::StoppedRank& stopped : in.stopped()) {
    if (stopped.rank() < 0 || stopped.rank() >= world_size) {
      RINGD_THROW(kProtocol, "the negotiation response list from rank 0 names rank "
                                 << stopped.rank() << " as stopped, outside the job's "
                                 << world_size << " ranks");
    }
    list.stopped.push_back(StoppedRank{stopped.rank(), from_proto(stopped.state())});
  }
  for (const pb::Response& r : in.responses()) {
    Response response;
    response.name = r.tensor_name();
    response.params = from_proto(r.params(), response.name, 0);
    response.first_dims.assign(r.first_dims().begin(), r.first_dims().end());
    response.error = r.error();
    if (response.ok() && response.params.kind == CollectiveKind::kAllgather &&
        response.first_dims.size() != static_cast<size_t>(world_size)) {
      RINGD_THROW(kProtocol, "the allgather response for '" << response.name << "' lists "
                                                            << response.first_dims.size()
                                                            << " ranks, expected " << world_size);
    }
    list.responses.push_back(std::move(response));
  }
  return list;
}

}  // namespace ringd::fusion
