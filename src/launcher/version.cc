#include "launcher/version.h"

#include "ringd/config.h"

namespace ringd {
const char* version_string() { return RINGD_VERSION; }
}  // namespace ringd
