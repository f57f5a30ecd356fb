#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "ringd/error.h"

namespace ringd {

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) RINGD_THROW(kIo, "cannot write " << path << ": " << std::strerror(errno));
  const bool wrote = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!wrote || !synced || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    RINGD_THROW(kIo, "cannot write " << path << ": " << std::strerror(error));
  }
}

const char* file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a special file";
}

bool read_state_file(const std::string& path, size_t max_bytes, const std::string& what,
                     std::string* out) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) return false;
    RINGD_THROW(kIo, what << " " << path << " cannot be opened: " << std::strerror(error));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    RINGD_THROW(kIo, what << " " << path << " cannot be examined: " << std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    RINGD_THROW(kInvalidArgument, what << " " << path << " is " << file_kind(info.st_mode)
                                       << ", not a regular file; remove it or point ringd at "
                                          "the file meant");
  }
  if (static_cast<uint64_t>(info.st_size) > max_bytes) {
    ::close(fd);
    RINGD_THROW(kInvalidArgument, what << " " << path << " holds " << info.st_size
                                       << " bytes, more than the " << max_bytes
                                       << " it may hold; is it the file meant?");
  }
  out->clear();
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      RINGD_THROW(kIo, what << " " << path << " cannot be read: " << std::strerror(error));
    }
    if (out->size() + static_cast<size_t>(n) > max_bytes) {  // it grew while being read
      ::close(fd);
      RINGD_THROW(kInvalidArgument,
                  what << " " << path << " grew past the " << max_bytes << " bytes it may hold");
    }
    out->append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}

}  // namespace ringd
