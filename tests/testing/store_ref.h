// A Store that forwards to another one: a handle per thread (or per test client) onto one shared
// store, owned elsewhere.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "ringd/store.h"

namespace ringd::testing {

class StoreRef : public Store {
 public:
  explicit StoreRef(Store& inner) : inner_(inner) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    inner_.set(key, value);
  }
  bool add(const std::string& key, const std::vector<uint8_t>& value,
           std::vector<uint8_t>* existing) override {
    return inner_.add(key, value, existing);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return inner_.get(key, timeout);
  }

 private:
  Store& inner_;
};

}  // namespace ringd::testing
