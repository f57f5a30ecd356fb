#include "cli/stop_signal.h"

#include <signal.h>

#include <atomic>

namespace ringd::cli {
namespace {

std::atomic<int> received{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler stores into it");

void record(int number) {
  int none = 0;
  received.compare_exchange_strong(none, number);
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = record;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &action, nullptr);
  action.sa_flags = SA_RESTART | SA_RESETHAND;  // the second SIGINT: the default action
  ::sigaction(SIGINT, &action, nullptr);
}

int stop_signal_received() { return received.load(); }

}  // namespace ringd::cli
