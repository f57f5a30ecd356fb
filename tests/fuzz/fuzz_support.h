// Shared by the libFuzzer harnesses of tests/fuzz (see CMakeLists.txt there and scripts/fuzz.sh):
// quiet logging, an input written to a file, an input fed through a socket. Include it from the
// harness's one source file (it defines LLVMFuzzerInitialize).
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace ringd::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input as a file, for decoders that read paths; removed when this goes. One per process
// (libFuzzer's -fork and -jobs run several processes).
class InputFile {
 public:
  InputFile(const uint8_t* data, size_t size, const char* suffix = "") {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/ringd-fuzz-" + std::to_string(::getpid()) +
            suffix;
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) std::abort();
    size_t written = 0;
    while (written < size) {
      const ssize_t n = ::write(fd, data + written, size - written);
      if (n <= 0) std::abort();
      written += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  ~InputFile() { ::unlink(path_.c_str()); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A connected AF_UNIX stream pair. feed() writes the input into the far end and half-closes it,
// so the near end (non-blocking) reads exactly the input, then end of stream — what a peer that
// sends these bytes and stops would look like. Its buffers hold a whole input (inputs are capped
// by -max_len, 64 KiB in CMakeLists.txt).
class SocketPair {
 public:
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
    near_ = fds[0];
    far_ = fds[1];
    const int bytes = 1 << 20;
    ::setsockopt(far_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
    ::setsockopt(near_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
    ::setsockopt(near_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
    ::fcntl(near_, F_SETFL, ::fcntl(near_, F_GETFL) | O_NONBLOCK);
  }
  ~SocketPair() {
    if (near_ >= 0) ::close(near_);
    if (far_ >= 0) ::close(far_);
  }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;

  void feed(const uint8_t* data, size_t size) {
    size_t written = 0;
    while (written < size) {
      const ssize_t n = ::send(far_, data + written, size - written, MSG_NOSIGNAL);
      if (n <= 0) std::abort();
      written += static_cast<size_t>(n);
    }
    ::shutdown(far_, SHUT_WR);
  }
  int near() const { return near_; }
  // Hands the near end to an owner that closes it.
  int release_near() {
    const int fd = near_;
    near_ = -1;
    return fd;
  }

 private:
  int near_ = -1;
  int far_ = -1;
};

}  // namespace ringd::fuzz

// libFuzzer calls this once before the first input. Warnings about each rejected input would be
// most of a run's time and output. (Defined here: each harness is one source file.)
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ::setenv("RINGD_LOG_LEVEL", "error", /*overwrite=*/0);
  return 0;
}
