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
  action.sa_flags = SA_RESTART | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (int number : {SIGTERM, SIGINT}) ::sigaction(number, &action, nullptr);
}

int stop_signal_received() { return received.load(); }

}  // namespace ringd::cli
