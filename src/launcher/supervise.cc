#include "launcher/supervise.h"

#include <poll.h>
#include <signal.h>

#include <cstdio>
#include <memory>

#include "launcher/process_self.h"

namespace ringd::launcher {

int run_forwarding_signals(const SpawnOptions& spawn, const std::string& self,
                           const std::string& child, int* signal_received) {
  BlockedSignals signals({SIGTERM, SIGINT});
  const std::unique_ptr<ChildProcess> process = ChildProcess::spawn(spawn);
  while (!process->exited()) {
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {process->exit_fd(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[0].revents) {
      const int number = signals.read();
      if (number == 0) continue;
      if (*signal_received) {
        std::fprintf(stderr, "%s: second signal %d: killing %s\n", self.c_str(), number,
                     child.c_str());
        process->signal(SIGKILL);
      } else {
        std::fprintf(stderr, "%s: signal %d: forwarding it to %s\n", self.c_str(), number,
                     child.c_str());
        process->signal_leader(number);
      }
      *signal_received = number;
    }
  }
  return process->exit_code();
}

int pause_unless_signalled(std::chrono::milliseconds delay) {
  BlockedSignals signals({SIGTERM, SIGINT});
  const auto deadline = std::chrono::steady_clock::now() + delay;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return 0;
    pollfd entry{signals.fd(), POLLIN, 0};
    if (::poll(&entry, 1, static_cast<int>(left.count())) > 0) {
      if (const int number = signals.read()) return number;
    }
  }
}

}  // namespace ringd::launcher
