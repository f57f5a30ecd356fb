// A job::EnvLookup over a fixed set of variables, for tests of what ringd reads from the
// environment (identity, topology, the exec command line) without touching the process's own.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "job/topology.h"

namespace ringd::testing {

inline job::EnvLookup fake_env(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const char* name) -> const char* {
    const auto it = values.find(name);
    return it == values.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace ringd::testing
