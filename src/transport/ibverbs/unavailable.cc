// Builds without rdma-core (RINGD_HAVE_IBVERBS = 0) get only this file of the ibverbs transport:
// the public entry points exist and say how to get the real one.
#include "ringd/error.h"
#include "ringd/ibverbs.h"

namespace ringd {

std::unique_ptr<Context> ibverbs_connect(Store& /*store*/, int rank, int /*size*/,
                                         const IbverbsOptions& /*options*/) {
  RINGD_THROW(kUnavailable, "rank " << rank
                                    << ": --transport ibverbs: this ringd was built without "
                                       "rdma-core; install libibverbs-dev and reconfigure with "
                                       "-DRINGD_WITH_IBVERBS=ON, or use --transport tcp");
}

std::vector<std::string> ibverbs_device_names() { return {}; }

}  // namespace ringd
