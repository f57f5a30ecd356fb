// What the pod commands (`ringd agent`, `ringd launch`) need of their own process: the path of
// the running binary, and signals taken through a file descriptor so that one poll() waits for
// them with everything else.
#pragma once

#include <signal.h>

#include <initializer_list>
#include <string>

#include "net/socket.h"

namespace ringd::launcher {

// The running binary (/proc/self/exe), for starting it again ("ringd launch", the rsh agent of
// mpirun); "ringd" when it cannot be read.
std::string self_path();

// `signals` blocked and readable through fd() for this object's lifetime, unblocked again after.
// Block them before starting threads or children: both inherit the mask.
class BlockedSignals {
 public:
  explicit BlockedSignals(std::initializer_list<int> signals);
  ~BlockedSignals();
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

  int fd() const { return fd_.get(); }
  // Reads every pending signal; returns the last one that is not in `ignored` (0: none).
  int read(int ignored = 0) const;

 private:
  sigset_t signals_{};
  net::Fd fd_;
};

}  // namespace ringd::launcher
