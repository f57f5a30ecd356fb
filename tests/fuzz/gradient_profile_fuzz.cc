// Gradient profiles (model/gradient_profile.h): `ringd replay --profile file.tsv` parses what the
// user wrote.
#include <cstdlib>

#include "fuzz_support.h"
#include "model/gradient_profile.h"
#include "ringd/error.h"

using namespace ringd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const model::GradientProfile profile =
        model::parse_gradient_profile("fuzz", std::string(fuzz::as_text(data, size)), "fuzz.tsv");
    for (const model::GradientTensor& tensor : profile.tensors) {
      if (tensor.name.empty() || tensor.elements == 0) std::abort();
    }
  } catch (const Error&) {
  }
  return 0;
}
