// Small text helpers shared by the parsers of flags, variables and names, and by everything that
// writes bytes as hex digits (common/).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ringd {

// `text` with ASCII letters in lower case (names compared without case: dtypes, log levels,
// "did you mean" candidates).
inline std::string lower_case(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// `bytes` bytes at `data` as lowercase hex digits, two per byte ("00ff...").
inline std::string hex(const void* data, size_t bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const auto* in = static_cast<const uint8_t*>(data);
  std::string out;
  out.reserve(2 * bytes);
  for (size_t i = 0; i < bytes; ++i) {
    out += kDigits[in[i] >> 4];
    out += kDigits[in[i] & 15];
  }
  return out;
}

}  // namespace ringd
