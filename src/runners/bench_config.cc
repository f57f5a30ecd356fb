#include "runners/bench_config.h"

#include "ringd/error.h"

namespace ringd::runners {

const char* collective_name(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAllgather: return "allgather";
    case Collective::kReduceScatter: return "reducescatter";
  }
  return "?";
}

Collective parse_collective(const std::string& text) {
  if (text == "allreduce") return Collective::kAllreduce;
  if (text == "broadcast") return Collective::kBroadcast;
  if (text == "allgather") return Collective::kAllgather;
  if (text == "reducescatter" || text == "reduce_scatter") return Collective::kReduceScatter;
  RINGD_THROW(kInvalidArgument, "unknown collective '"
                                    << text
                                    << "'; valid: allreduce broadcast allgather reducescatter");
}

bool collective_reduces(Collective collective) {
  return collective == Collective::kAllreduce || collective == Collective::kReduceScatter;
}

}  // namespace ringd::runners
