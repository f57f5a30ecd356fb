// Rendezvous: a key/value store used once at start-up so ranks can find each other (publish a
// listening address, read everyone else's). Separate from the transports that use it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ringd {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Sets `key` only if it does not exist yet, atomically: true when this call stored `value`;
  // false when the key already existed, its value in *existing (which may be null). Ranks claim
  // their place with it, so two processes never both get rank r.
  virtual bool add(const std::string& key, const std::vector<uint8_t>& value,
                   std::vector<uint8_t>* existing) = 0;
  // Blocks until `key` exists; throws ringd::Error(kTimeout) naming the key after `timeout`.
  virtual std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

// Threads of one process (unit tests).
class MemoryStore : public Store {
 public:
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  bool add(const std::string& key, const std::vector<uint8_t>& value,
           std::vector<uint8_t>* existing) override;
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<uint8_t>> values_;
};

// Prefixes every key, so one store can serve several jobs or contexts.
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, Store& inner) : prefix_(std::move(prefix)), inner_(inner) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    inner_.set(prefix_ + "/" + key, value);
  }
  bool add(const std::string& key, const std::vector<uint8_t>& value,
           std::vector<uint8_t>* existing) override {
    return inner_.add(prefix_ + "/" + key, value, existing);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return inner_.get(prefix_ + "/" + key, timeout);
  }

 private:
  std::string prefix_;
  Store& inner_;
};

// A key/value store served over TCP by one process (rank 0), so ringd can run without mpirun:
// `ringd ... --rank R --size N --rendezvous host:port`. Clients authenticate with the same
// handshake as pairs.
class TcpStoreServer {
 public:
  // The most bytes (keys and values, stored and arriving) the server holds at once by default.
  static constexpr size_t kDefaultMaxHeldBytes = size_t{256} << 20;

  // Listens on host:port (port 0 = any free port) and serves until destroyed. A value's memory
  // grows with the bytes that actually arrive, never with the length a request announces; a set
  // that would make the server hold more than `max_held_bytes` is refused (status error, the
  // connection closed) and the store is unchanged.
  TcpStoreServer(const std::string& host, uint16_t port, const std::string& secret = {},
                 size_t max_held_bytes = kDefaultMaxHeldBytes);
  ~TcpStoreServer();
  uint16_t port() const;
  // Bytes held now: stored keys and values plus the values arriving (read on the server's thread;
  // for tests and diagnostics).
  size_t held_bytes() const;
  // "" when no connection has failed the job-secret handshake so far; else "the rendezvous store
  // refused 2 connection(s) that failed the job-secret handshake (the last: ...)": what a rank
  // waiting for a missing peer adds to its timeout (that peer may run with another secret).
  std::string refused_for_secret() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

class TcpStore : public Store {
 public:
  // Connects (retrying until `timeout`) to a TcpStoreServer.
  TcpStore(const std::string& host, uint16_t port, const std::string& secret = {},
           std::chrono::milliseconds timeout = {});
  ~TcpStore() override;
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  bool add(const std::string& key, const std::vector<uint8_t>& value,
           std::vector<uint8_t>* existing) override;
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A store in a shared directory (one file per key, written atomically): for jobs whose ranks share
// a filesystem.
class FileStore : public Store {
 public:
  explicit FileStore(std::string directory);
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  // link() of the written file: atomic on one filesystem (NFS v3+ included).
  bool add(const std::string& key, const std::vector<uint8_t>& value,
           std::vector<uint8_t>* existing) override;
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;

 private:
  std::string write_temp_file(const std::string& name, const std::vector<uint8_t>& value);
  std::string directory_;
};

std::vector<uint8_t> to_bytes(const std::string& text);
std::string to_string(const std::vector<uint8_t>& bytes);

}  // namespace ringd
