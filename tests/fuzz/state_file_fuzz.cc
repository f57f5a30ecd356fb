// The small state files ringd reads (common/files.h, launcher/launch_plan.h): `ringd launch`'s
// completion marker and failure record (JSON), its attempts count, anything read through
// read_state_file (secrets, metrics). The input is the file's contents; the selector byte picks
// the size bound.
#include <cstdlib>

#include "common/files.h"
#include "fuzz_support.h"
#include "launcher/launch_plan.h"
#include "ringd/error.h"

using namespace ringd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t bound = size_t{1} << (data[0] % 20);
  fuzz::InputFile file(data + 1, size - 1);
  try {
    std::string text;
    if (!read_state_file(file.path(), bound, "the fuzzed file", &text)) std::abort();
    if (text.size() > bound || text.size() != size - 1) std::abort();
  } catch (const Error& error) {
    if (size - 1 <= bound) std::abort();  // within its bound a regular file reads
  }
  std::string contents;
  try {
    if (launcher::read_marker(file.path(), &contents)) launcher::record_exit_code(contents);
  } catch (const Error&) {
  }
  std::string problem;
  const int attempts = launcher::read_attempts(file.path(), &problem);
  if (attempts < 0 || (attempts > 0 && !problem.empty())) std::abort();
  return 0;
}
