// "Did you mean ...?" for names a user typed: the closest of the known names by edit distance.
#pragma once

#include <string>
#include <vector>

namespace ringd {

// Levenshtein distance (insertions, deletions, substitutions; ASCII case counts as a difference).
size_t edit_distance(const std::string& a, const std::string& b);

// The name among `known` closest to `typed`, compared case-insensitively, if it is within
// max(2, typed.size() / 3) edits (a slip, not a different word); "" when none is that close.
std::string closest_name(const std::string& typed, const std::vector<std::string>& known);

}  // namespace ringd
