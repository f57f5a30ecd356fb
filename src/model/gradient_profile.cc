#include "model/gradient_profile.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <set>
#include <sstream>

#include "common/files.h"
#include "model/embedded_profiles.h"
#include "ringd/error.h"

namespace ringd::model {

// A profile lists a network's tensors, one line each: a few KiB; 64 MiB is far beyond any.
constexpr size_t kMaxProfileBytes = 64 << 20;

size_t GradientProfile::total_elements() const {
  size_t total = 0;
  for (const GradientTensor& tensor : tensors) total += tensor.elements;
  return total;
}

std::vector<std::string> builtin_profile_names() {
  std::vector<std::string> names;
  for (const EmbeddedProfile& profile : embedded_profiles()) names.push_back(profile.name);
  std::sort(names.begin(), names.end());
  return names;
}

GradientProfile parse_gradient_profile(const std::string& name, const std::string& text,
                                       const std::string& source) {
  GradientProfile profile;
  profile.name = name;
  std::set<std::string> seen;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    const std::string count_text = tab == std::string::npos ? "" : line.substr(tab + 1);
    // Digits only (no sign, blank or NUL that strtoull would skip or stop at), then in range.
    const bool digits_only =
        !count_text.empty() && count_text.find_first_not_of("0123456789") == std::string::npos;
    errno = 0;
    const unsigned long long count = std::strtoull(count_text.c_str(), nullptr, 10);
    if (tab == 0 || tab == std::string::npos || !digits_only || errno == ERANGE) {
      RINGD_THROW(kInvalidArgument, source << ":" << number << ": expected 'name<TAB>element "
                                           << "count', got '" << line << "'");
    }
    RINGD_CHECK_ARG(count > 0, source << ":" << number << ": tensor '" << line.substr(0, tab)
                                      << "' has 0 elements; a gradient holds at least one");
    GradientTensor tensor{line.substr(0, tab), static_cast<size_t>(count)};
    RINGD_CHECK_ARG(seen.insert(tensor.name).second,
                    source << ":" << number << ": tensor '" << tensor.name << "' appears twice");
    profile.tensors.push_back(std::move(tensor));
  }
  RINGD_CHECK_ARG(!profile.tensors.empty(), source << " lists no tensors");
  return profile;
}

GradientProfile load_gradient_profile(const std::string& name_or_path) {
  const bool is_file =
      name_or_path.size() > 4 && name_or_path.compare(name_or_path.size() - 4, 4, ".tsv") == 0;
  if (is_file) {
    std::string text;
    RINGD_CHECK_ARG(read_state_file(name_or_path, kMaxProfileBytes, "the gradient profile", &text),
                    "the gradient profile " << name_or_path << " does not exist");
    std::string name = name_or_path.substr(name_or_path.find_last_of('/') + 1);
    name.resize(name.size() - 4);
    return parse_gradient_profile(name, text, name_or_path);
  }
  for (const EmbeddedProfile& profile : embedded_profiles()) {
    if (name_or_path == profile.name) {
      return parse_gradient_profile(profile.name, profile.tsv, profile.name + std::string(".tsv"));
    }
  }
  std::ostringstream names;
  for (const std::string& name : builtin_profile_names()) names << " " << name;
  RINGD_THROW(kInvalidArgument, "unknown gradient profile '" << name_or_path
                                                             << "'; built in:" << names.str()
                                                             << " (or a path to a .tsv file)");
}

}  // namespace ringd::model
