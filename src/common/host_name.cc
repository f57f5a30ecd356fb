#include "common/host_name.h"

#include <unistd.h>

namespace ringd {

const std::string& host_name() {
  static const std::string name = [] {
    char text[256] = {};
    return ::gethostname(text, sizeof(text) - 1) == 0 && text[0] ? std::string(text)
                                                                 : std::string("unknown-host");
  }();
  return name;
}

}  // namespace ringd
