#include "ringd/error.h"
#include "ringd/store.h"

namespace ringd {

void MemoryStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

bool MemoryStore::add(const std::string& key, const std::vector<uint8_t>& value,
                      std::vector<uint8_t>* existing) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [position, inserted] = values_.emplace(key, value);
    if (!inserted) {
      if (existing) *existing = position->second;
      return false;
    }
  }
  changed_.notify_all();
  return true;
}

std::vector<uint8_t> MemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!changed_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; })) {
    RINGD_THROW(kTimeout, "rendezvous: key '" << key
                                              << "' did not appear in the memory store within "
                                              << timeout.count() << " ms");
  }
  return values_[key];
}

std::vector<uint8_t> to_bytes(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string to_string(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace ringd
