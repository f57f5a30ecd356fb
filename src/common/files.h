// Small files ringd keeps or is pointed at (markers, secrets, counts, profiles): writing them so
// that readers see the old contents or the new, never a part; reading them without trusting what
// sits at the path.
#pragma once

#include <cstddef>
#include <string>

namespace ringd {

// Writes `text` to `path` through a temporary in the same directory, fsync and rename; throws
// ringd::Error(kIo) naming the path (the temporary is removed).
void write_file_atomically(const std::string& path, const std::string& text);

// Reads `path` into `out` when it is a regular file (a symbolic link to one is fine: Kubernetes
// mounts Secrets so) of at most `max_bytes`. It is opened without blocking, so a FIFO put there
// cannot hang the reader. Returns false when nothing exists at `path`. Throws ringd::Error
// (kInvalidArgument) naming `what` and the path when something else is there ("is a directory,
// not a regular file", "is a FIFO", "is a character device", "holds 2 GiB, more than the 64 KiB
// a ... may hold"), kIo when it cannot be read.
bool read_state_file(const std::string& path, size_t max_bytes, const std::string& what,
                     std::string* out);

// "a directory", "a FIFO", "a character device", ... for a stat st_mode.
const char* file_kind(unsigned mode);

}  // namespace ringd
