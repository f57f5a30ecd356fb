// The inproc transport: ranks are threads of one process. Used by unit tests so that most of the
// suite runs without mpirun. A send completes when the matching receive has copied the data (one
// memcpy, straight from the sender's buffer into the receiver's).
#pragma once

#include <chrono>
#include <memory>

#include "ringd/transport.h"

namespace ringd {

class InprocHub {
 public:
  explicit InprocHub(int size);
  ~InprocHub();
  // Each rank's thread calls connect(rank) once. `timeout` defaults to RINGD_TIMEOUT.
  std::unique_ptr<Context> connect(int rank, std::chrono::milliseconds timeout = {});
  // Fails every pending and future operation that involves `rank` with kPeerLost. Happens by
  // itself when a rank's Context is destroyed; tests also call it to simulate a crash.
  void kill_rank(int rank);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ringd
