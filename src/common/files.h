// Writing a small file so that readers see the old contents or the new, never a part.
#pragma once

#include <string>

namespace ringd {

// Writes `text` to `path` through a temporary in the same directory, fsync and rename; throws
// ringd::Error(kIo) naming the path (the temporary is removed).
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace ringd
