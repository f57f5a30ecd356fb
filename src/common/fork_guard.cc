#include "common/fork_guard.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace ringd {
namespace {

std::atomic<uint64_t> g_generation{0};

void in_child() { g_generation.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

uint64_t fork_generation() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, &in_child);
    return true;
  }();
  (void)registered;
  return g_generation.load(std::memory_order_relaxed);
}

ForkOwner::ForkOwner() : generation_(fork_generation()), pid_(getpid()) {}

std::string ForkOwner::child_message(int rank) const {
  return "rank " + std::to_string(rank) + ": this process (pid " + std::to_string(getpid()) +
         ") is a child forked after the job was opened in pid " + std::to_string(pid_) +
         "; a child cannot use its parent's job (its engine and connections belong to the "
         "parent). Run collectives in the parent only (DataLoader workers and multiprocessing "
         "children must not call them), or start children with the 'spawn' method and open a "
         "job there";
}

}  // namespace ringd
