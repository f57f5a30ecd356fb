#include "transport/mpi/mpi_init.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "common/logging.h"
#include "ringd/error.h"
#include "ringd/mpi.h"
#include "transport/mpi/mpi_errors.h"

namespace ringd::mpi {
namespace {

int signal_pipe_write = -1;  // written by the SIGINT handler (async-signal-safe: write only)

void on_interrupt(int signal_number) {
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  const int saved = errno;
  [[maybe_unused]] const ssize_t written = ::write(signal_pipe_write, &byte, 1);
  errno = saved;
}

int env_int(const char* name, int otherwise) {
  const char* value = std::getenv(name);
  if (!value || !*value) return otherwise;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  return *end == '\0' && parsed >= 0 && parsed < (1 << 30) ? static_cast<int>(parsed) : otherwise;
}

// mpirun's session directory for this job on this host (Open MPI 4), where each rank leaves
// "ringd-init/<rank>" before MPI_Init; "" when not under Open MPI's mpirun.
std::string arrivals_directory() {
  const char* session = std::getenv("OMPI_MCA_orte_jobfam_session_dir");
  if (!session || !*session) return "";
  return std::string(session) + "/ringd-init";
}

void mark_arrival(const std::string& directory, int rank) {
  if (directory.empty() || rank < 0) return;
  ::mkdir(directory.c_str(), 0700);
  const std::string marker = directory + "/" + std::to_string(rank);
  const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) ::close(fd);
}

std::set<int> arrived(const std::string& directory) {
  std::set<int> ranks;
  DIR* dir = directory.empty() ? nullptr : ::opendir(directory.c_str());
  if (!dir) return ranks;
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long rank = std::strtol(entry->d_name, &end, 10);
    if (end != entry->d_name && *end == '\0' && rank >= 0) ranks.insert(static_cast<int>(rank));
  }
  ::closedir(dir);
  return ranks;
}

std::string list(const std::set<int>& ranks) {
  std::ostringstream text;
  const char* separator = "";
  for (const int rank : ranks) {
    text << separator << rank;
    separator = ", ";
  }
  return text.str();
}

// Why this rank is still in MPI_Init after `timeout`, and what this host can tell.
std::string timeout_message(int rank, std::chrono::milliseconds timeout,
                            const std::string& directory) {
  const int size = env_int("OMPI_COMM_WORLD_SIZE", 0);
  const int local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 0);
  std::ostringstream text;
  text << "rank " << rank << ": MPI_Init has waited " << timeout.count() / 1000.0
       << " s for the other processes of this mpirun job";
  if (size > 0) text << " (" << size << " in all)";
  text << ": MPI starts only once every process has called it, so a rank that never started ringd "
          "(it failed or exited before ringd.init(), or does not call it) holds every other rank "
          "here";
  const std::set<int> here = arrived(directory);
  if (!here.empty() && local_size > 0) {
    text << ". On this host " << here.size() << " of its " << local_size
         << " ranks reached MPI_Init (" << list(here) << ")";
    if (static_cast<int>(here.size()) >= local_size) {
      text << ", so the missing rank runs on another host";
    } else if (local_size == size) {
      std::set<int> missing;
      for (int r = 0; r < size; ++r) {
        if (!here.count(r)) missing.insert(r);
      }
      text << "; missing: rank" << (missing.size() > 1 ? "s " : " ") << list(missing);
    }
  }
  text << ". Ending this rank so that mpirun ends the job (the bound is RINGD_TIMEOUT or "
          "--timeout)";
  return text.str();
}

}  // namespace

int init_thread_bounded(int required, std::chrono::milliseconds timeout) {
  const int rank = env_int("OMPI_COMM_WORLD_RANK", -1);
  const std::string directory = arrivals_directory();
  mark_arrival(directory, rank);

  int signal_pipe[2] = {-1, -1};
  int done_pipe[2] = {-1, -1};
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0 || ::pipe2(done_pipe, O_CLOEXEC) != 0) {
    RINGD_THROW(kIo, "rank " << rank << ": cannot create the pipes of MPI_Init's watchdog");
  }
  // Take SIGINT only from a handler that would swallow it; SIG_DFL already ends the process and
  // SIG_IGN stays ignored.
  struct sigaction previous {};
  ::sigaction(SIGINT, nullptr, &previous);
  const bool take_interrupt = (previous.sa_flags & SA_SIGINFO) != 0 ||
                              (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN);
  if (take_interrupt) {
    signal_pipe_write = signal_pipe[1];
    struct sigaction ours {};
    ours.sa_handler = on_interrupt;
    sigemptyset(&ours.sa_mask);
    ::sigaction(SIGINT, &ours, nullptr);
  }

  std::thread watchdog([&] {
    pollfd entries[2] = {{done_pipe[0], POLLIN, 0}, {signal_pipe[0], POLLIN, 0}};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      const int ready = ::poll(entries, 2, static_cast<int>(std::max<int64_t>(left.count(), 0)));
      if (ready < 0 && errno == EINTR) continue;
      if (entries[0].revents != 0) return;  // MPI_Init returned
      if (entries[1].revents != 0) {
        RINGD_LOG(kError) << "rank " << rank
                          << ": interrupted (SIGINT) while MPI_Init waited for the other "
                             "processes of this mpirun job; ending this rank";
        std::_Exit(128 + SIGINT);
      }
      if (ready == 0 && left.count() <= 0) {
        RINGD_LOG(kError) << timeout_message(rank, timeout, directory);
        std::_Exit(1);
      }
    }
  });

  int provided = MPI_THREAD_SINGLE;
  const int code = MPI_Init_thread(nullptr, nullptr, required, &provided);
  const char byte = 0;
  [[maybe_unused]] const ssize_t written = ::write(done_pipe[1], &byte, 1);
  watchdog.join();
  if (take_interrupt) {
    ::sigaction(SIGINT, &previous, nullptr);
    signal_pipe_write = -1;
  }
  for (const int fd : {signal_pipe[0], signal_pipe[1], done_pipe[0], done_pipe[1]}) ::close(fd);
  if (code != MPI_SUCCESS) {
    RINGD_THROW(kUnavailable, "MPI_Init_thread failed: " << describe_mpi_error(code)
                                                         << "; is this process started by mpirun "
                                                            "(or able to run as a singleton)?");
  }
  return provided;
}

}  // namespace ringd::mpi
