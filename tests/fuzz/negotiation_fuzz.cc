// The negotiation messages every rank's controller decodes from every other rank each cycle
// (fusion/negotiation_codec.h): request lists with their rank states, and rank 0's response lists.
// Input: a selector byte (low bit: which list; the rest picks the sender or the world size), then
// the encoded message. A list that decodes must encode and decode again to the same bytes.
#include <cstdlib>

#include "fusion/negotiation_codec.h"
#include "fuzz_support.h"
#include "ringd/error.h"

using namespace ringd;
using namespace ringd::fusion;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const unsigned selector = data[0];
  const std::string bytes(fuzz::as_text(data + 1, size - 1));
  const int number = static_cast<int>((selector >> 1) % 8);
  try {
    if (selector & 1) {
      const int world_size = number + 1;
      const ResponseList list = decode_responses(bytes, world_size);
      const std::string again = encode_responses(list);
      if (encode_responses(decode_responses(again, world_size)) != again) std::abort();
    } else {
      const RequestList list = decode_request_list(bytes, number);
      const RankState* state = list.state ? &*list.state : nullptr;
      const std::string again = encode_requests(number, list.requests, state);
      const RequestList decoded = decode_request_list(again, number);
      const std::string third =
          encode_requests(number, decoded.requests, decoded.state ? &*decoded.state : nullptr);
      if (third != again) std::abort();
      decode_requests(bytes, number);
    }
  } catch (const Error&) {
    // refused, naming the sender: what a malformed message must get
  }
  return 0;
}
