// This process's threads, CPU time and memory, for the tests that bound what a flood of
// connections may cost (tests/launcher, tests/ps, tests/rendezvous).
#pragma once

#include <dirent.h>
#include <time.h>

#include <fstream>
#include <string>

namespace ringd::testing {

// Threads of this process now (/proc/self/task).
inline int thread_count() {
  int count = 0;
  DIR* tasks = ::opendir("/proc/self/task");
  if (!tasks) return -1;
  while (const dirent* entry = ::readdir(tasks)) count += entry->d_name[0] != '.';
  ::closedir(tasks);
  return count;
}

// CPU time (user + system) this process has used, in seconds.
inline double cpu_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// A figure of /proc/self/status in KiB: "VmRSS:" (resident), "VmSize:" (mapped: a thread's stack,
// 8 MiB, stays mapped until the thread is joined); -1 when absent.
inline long status_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string word;
  while (status >> word) {
    if (word == field) {
      long kib = 0;
      status >> kib;
      return kib;
    }
  }
  return -1;
}

}  // namespace ringd::testing
