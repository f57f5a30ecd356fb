// Rendezvous: a key/value store used once at start-up so ranks can find each other (publish a
// listening address, read everyone else's). Separate from the transports that use it.
#pragma once

#include <chrono>
#include <condition_variable>
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

std::vector<uint8_t> to_bytes(const std::string& text);
std::string to_string(const std::vector<uint8_t>& bytes);

}  // namespace ringd
