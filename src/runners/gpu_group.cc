#include "runners/gpu_group.h"

#include <numeric>
#include <vector>

#include "ringd/error.h"
#include "ringd/nccl_local_group.h"

namespace ringd::runners {

std::unique_ptr<LocalGroup> make_gpu_group(const char* command, int devices,
                                           Compression compression) {
  if (compression != Compression::kNone) {
    RINGD_THROW(kInvalidArgument, command << " --gpus: compression "
                                          << compression_name(compression)
                                          << " (RINGD_COMPRESSION?) does not run on GPU buffers; "
                                             "use none");
  }
#if RINGD_HAVE_NCCL
  std::vector<int> gpus(static_cast<size_t>(devices));
  std::iota(gpus.begin(), gpus.end(), 0);
  return make_nccl_local_group(gpus);
#else
  (void)devices;
  RINGD_THROW(kUnavailable, command << " --gpus: this ringd was built without NCCL");
#endif
}

}  // namespace ringd::runners
