// IDX data files (model/idx.h), plain or gzip: `ringd train --data` reads what it is pointed at.
// Input: a byte choosing labels or images (and whether to keep only the first items), then the
// file.
#include <cstdlib>

#include "fuzz_support.h"
#include "model/idx.h"
#include "ringd/error.h"

using namespace ringd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t dims = (data[0] & 1) ? 3 : 1;
  const size_t max_items = (data[0] >> 1) % 4;
  fuzz::InputFile file(data + 1, size - 1);
  try {
    const model::IdxArray array = model::read_idx(file.path(), dims, max_items);
    size_t elements = array.dims.empty() ? 0 : 1;
    for (const uint32_t extent : array.dims) elements *= extent;
    if (array.dims.size() != dims || elements != array.data.size()) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
