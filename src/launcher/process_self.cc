#include "launcher/process_self.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ringd/error.h"

namespace ringd::launcher {

std::string self_path() {
  char path[4096];
  const ssize_t length = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) return "ringd";
  return std::string(path, static_cast<size_t>(length));
}

BlockedSignals::BlockedSignals(std::initializer_list<int> signals) {
  sigemptyset(&signals_);
  for (const int number : signals) sigaddset(&signals_, number);
  ::sigprocmask(SIG_BLOCK, &signals_, nullptr);
  fd_ = net::Fd(::signalfd(-1, &signals_, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd_.valid()) {
    const int error = errno;
    ::sigprocmask(SIG_UNBLOCK, &signals_, nullptr);
    RINGD_THROW(kIo, "cannot create a signalfd: " << std::strerror(error));
  }
}

BlockedSignals::~BlockedSignals() { ::sigprocmask(SIG_UNBLOCK, &signals_, nullptr); }

int BlockedSignals::read(int ignored) const {
  int last = 0;
  signalfd_siginfo info{};
  while (::read(fd_.get(), &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    if (static_cast<int>(info.ssi_signo) != ignored) last = static_cast<int>(info.ssi_signo);
  }
  return last;
}

}  // namespace ringd::launcher
