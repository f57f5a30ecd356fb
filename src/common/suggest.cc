#include "common/suggest.h"

#include <algorithm>

#include "common/text.h"

namespace ringd {

size_t edit_distance(const std::string& a, const std::string& b) {
  // One row of the dynamic-programming table at a time: row[j] = distance(a[0..i), b[0..j)).
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];  // distance(a[0..i-1), b[0..j-1))
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest_name(const std::string& typed, const std::vector<std::string>& known) {
  const std::string wanted = lower_case(typed);
  const size_t limit = std::max<size_t>(2, typed.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const std::string& name : known) {
    const size_t distance = edit_distance(wanted, lower_case(name));
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace ringd
