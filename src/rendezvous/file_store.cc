// FileStore: one file per key in a shared directory. set() writes a temporary file and rename()s
// it into place (add() link()s it, which fails when the key exists), so a reader sees either
// nothing or the whole value; get() polls for the file
// with a sleeping back-off (1 ms doubling to 20 ms) until it appears or the timeout passes.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <thread>

#include "net/socket.h"
#include "ringd/error.h"
#include "ringd/store.h"

namespace ringd {
namespace {

// Letters, digits, '-', '_' and non-leading '.' stay; everything else becomes %XX, so distinct
// keys map to distinct names, '/' cannot escape the directory, and no name starts with '.' (the
// temporary files do).
std::string file_name_for(const std::string& key) {
  static const char kDigits[] = "0123456789ABCDEF";
  std::string name;
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    const bool plain = std::isalnum(c) || c == '-' || c == '_' || (c == '.' && i > 0);
    if (plain) {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += kDigits[c >> 4];
      name += kDigits[c & 15];
    }
  }
  return name.empty() ? "%" : name;  // the empty key
}

void make_directories(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      RINGD_THROW(kIo, "rendezvous: cannot create the file store directory "
                           << prefix << ": " << net::errno_text(errno));
    }
    if (slash == std::string::npos) return;
  }
}

// Returns false when the file does not exist.
bool read_file(const std::string& path, std::vector<uint8_t>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    RINGD_THROW(kIo, "rendezvous: cannot open " << path << ": " << net::errno_text(errno));
  }
  net::Fd owner(fd);
  out->clear();
  uint8_t chunk[65536];
  for (;;) {
    const ssize_t got = ::read(fd, chunk, sizeof(chunk));
    if (got == 0) return true;
    if (got < 0) {
      if (errno == EINTR) continue;
      RINGD_THROW(kIo, "rendezvous: cannot read " << path << ": " << net::errno_text(errno));
    }
    out->insert(out->end(), chunk, chunk + got);
  }
}

}  // namespace

FileStore::FileStore(std::string directory) : directory_(std::move(directory)) {
  RINGD_CHECK_ARG(!directory_.empty(), "rendezvous: the file store needs a directory");
  make_directories(directory_);
}

std::string FileStore::write_temp_file(const std::string& name, const std::vector<uint8_t>& value) {
  static std::atomic<uint64_t> counter{0};
  const std::string temp_path = directory_ + "/.tmp." + name + "." + std::to_string(::getpid()) +
                                "." + std::to_string(counter.fetch_add(1));
  net::Fd fd(::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    RINGD_THROW(kIo, "rendezvous: cannot create " << temp_path << ": " << net::errno_text(errno));
  }
  size_t written = 0;
  while (written < value.size()) {
    const ssize_t n = ::write(fd.get(), value.data() + written, value.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::unlink(temp_path.c_str());
      RINGD_THROW(kIo, "rendezvous: cannot write " << temp_path << ": " << net::errno_text(error));
    }
    written += static_cast<size_t>(n);
  }
  return temp_path;
}

void FileStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  const std::string name = file_name_for(key);
  const std::string final_path = directory_ + "/" + name;
  const std::string temp_path = write_temp_file(name, value);
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp_path.c_str());
    RINGD_THROW(kIo, "rendezvous: cannot rename " << temp_path << " to " << final_path << ": "
                                                  << net::errno_text(error));
  }
}

bool FileStore::add(const std::string& key, const std::vector<uint8_t>& value,
                    std::vector<uint8_t>* existing) {
  const std::string name = file_name_for(key);
  const std::string final_path = directory_ + "/" + name;
  const std::string temp_path = write_temp_file(name, value);
  const int linked = ::link(temp_path.c_str(), final_path.c_str());
  const int error = errno;
  ::unlink(temp_path.c_str());
  if (linked == 0) return true;
  if (error != EEXIST) {
    RINGD_THROW(kIo, "rendezvous: cannot link " << temp_path << " to " << final_path << ": "
                                                << net::errno_text(error));
  }
  std::vector<uint8_t> found;
  if (!read_file(final_path, &found)) {
    RINGD_THROW(kIo, "rendezvous: " << final_path << " existed and then vanished");
  }
  if (existing) *existing = std::move(found);
  return false;
}

std::vector<uint8_t> FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const std::string path = directory_ + "/" + file_name_for(key);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(1);
  std::vector<uint8_t> value;
  for (;;) {
    if (read_file(path, &value)) return value;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      RINGD_THROW(kTimeout, "rendezvous: key '" << key << "' did not appear in the file store "
                                                << directory_ << " within " << timeout.count()
                                                << " ms (looked for " << path
                                                << ") — did every rank start with the same "
                                                   "directory?");
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace ringd
