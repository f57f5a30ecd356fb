// A network's gradient profile: its parameter tensors (name, element count) in registration
// order. A backward pass makes the gradients ready roughly in reverse (replay_schedule.h). The
// built-in profiles (resnet50, vgg16, bert_base, inception_v3) are compiled into the binary.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringd::model {

struct GradientTensor {
  std::string name;
  size_t elements = 0;
};

struct GradientProfile {
  std::string name;
  std::vector<GradientTensor> tensors;  // registration order

  size_t total_elements() const;
};

// The names of the built-in profiles, sorted.
std::vector<std::string> builtin_profile_names();

// A built-in profile by name, or (when `name_or_path` ends in .tsv) a profile file in the same
// format. Throws ringd::Error(kInvalidArgument) listing the built-in names, or naming the file and
// line that does not parse.
GradientProfile load_gradient_profile(const std::string& name_or_path);

// "name<TAB>count" lines; '#' starts a comment line; blank lines are skipped. `source` names the
// text in errors.
GradientProfile parse_gradient_profile(const std::string& name, const std::string& text,
                                       const std::string& source);

}  // namespace ringd::model
