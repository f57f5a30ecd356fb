// The gradient profiles compiled into the binary (generated from data/gradient_profiles/*.tsv by
// cmake/EmbedProfiles.cmake): name (file name without .tsv) and the file's text.
#pragma once

#include <vector>

namespace ringd::model {

struct EmbeddedProfile {
  const char* name;
  const char* tsv;
};

const std::vector<EmbeddedProfile>& embedded_profiles();

}  // namespace ringd::model
