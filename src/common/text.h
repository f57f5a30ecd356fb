// Small text helpers shared by the parsers of flags, variables and names (common/).
#pragma once

#include <algorithm>
#include <cctype>
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

}  // namespace ringd
