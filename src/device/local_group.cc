// The parts of LocalGroup every implementation shares: shard arithmetic and argument checks.
#include "ringd/local_group.h"

#include "ringd/error.h"

namespace ringd {

ShardLayout ShardLayout::even(size_t first, size_t count, int parts) {
  RINGD_CHECK_ARG(parts >= 1, "a shard layout needs at least one part, got " << parts);
  ShardLayout layout;
  layout.offsets.resize(static_cast<size_t>(parts) + 1);
  const size_t base = count / parts, extra = count % parts;
  size_t offset = first;
  for (int d = 0; d < parts; ++d) {
    layout.offsets[d] = offset;
    offset += base + (static_cast<size_t>(d) < extra ? 1 : 0);
  }
  layout.offsets[parts] = offset;
  return layout;
}

void LocalGroup::check_buffers(const char* what, DeviceBuffers buffers, size_t count) const {
  RINGD_CHECK_ARG(static_cast<int>(buffers.size()) == size(),
                  what << ": " << buffers.size() << " buffers for a local group of " << size()
                       << " " << kind() << " devices; pass one buffer per device");
  for (int d = 0; d < size(); ++d) {
    RINGD_CHECK_ARG(buffers[d].device == d, what << ": buffer " << d << " belongs to device "
                                                 << buffers[d].device
                                                 << "; pass the buffers in device order");
    RINGD_CHECK_ARG(count == 0 || buffers[d].data != nullptr,
                    what << ": null buffer for device " << d << " (" << count << " elements)");
  }
}

}  // namespace ringd
