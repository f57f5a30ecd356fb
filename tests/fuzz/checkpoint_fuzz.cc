// `ringd train --resume` reads checkpoint files that may be truncated, corrupt or someone else's
// (model/checkpoint.h). The input is a checkpoint file; it is also tried with its checksum
// recomputed, so the fuzzer reaches the header and payload checks behind the checksum.
#include <cstdlib>

#include "common/sha256.h"
#include "fuzz_support.h"
#include "model/checkpoint.h"
#include "ringd/error.h"

using namespace ringd;

namespace {

void read(const uint8_t* data, size_t size) {
  fuzz::InputFile file(data, size, ".ringd");
  try {
    model::read_checkpoint_meta(file.path());
  } catch (const Error&) {
  }
  try {
    const model::Checkpoint checkpoint = model::read_checkpoint(file.path());
    for (size_t i = 0; i < checkpoint.parameters.size(); ++i) {
      size_t elements = 1;
      for (const int64_t extent : checkpoint.parameters[i].shape) elements *= extent;
      // What read_checkpoint returns is consistent: each tensor holds what its shape says.
      if (elements != checkpoint.parameters[i].values.size()) std::abort();
    }
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  read(data, size);
  if (size >= 32) {
    std::vector<uint8_t> resealed(data, data + size);
    const Sha256Digest digest = sha256(resealed.data(), size - 32);
    std::copy(digest.begin(), digest.end(), resealed.end() - 32);
    read(resealed.data(), resealed.size());
  }
  return 0;
}
