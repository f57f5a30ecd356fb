// Parameter-server frames (ps/frame.h) as a worker or a server reads them from its peer: the
// prefix, the protobuf header and the payload that header announces.
#include <cstdlib>

#include "fuzz_support.h"
#include "ps/frame.h"
#include "ringd/error.h"

using namespace ringd;
using namespace std::chrono_literals;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::SocketPair pair;
  pair.feed(data, size);
  ps::Connection connection(net::Fd(pair.release_near()), "fuzz peer", 2000ms);
  try {
    for (int frames = 0; frames < 1000; ++frames) {
      ps::Header header;
      bool closed = false;
      if (!connection.receive_header(&header, false, -1, &closed, "a fuzzed frame")) break;
      if (header.type() == ps::ERROR) {
        try {
          ps::throw_remote_error(connection.peer(), header.error_code(), header.error());
        } catch (const Error&) {
        }
      }
      // A server reads the payload it expects into the tensor; here, whatever was announced
      // (in pieces, as skip_payload does) — it must end in a protocol error, not a wait.
      std::vector<float> values(std::min<uint64_t>(header.payload_bytes(), 4096) / 4);
      connection.expect_payload(header.payload_bytes(), "a fuzzed frame");
      connection.receive_payload(values.data(), values.size() * 4, "a fuzzed frame");
    }
  } catch (const Error& error) {
    if (error.code() == ErrorCode::kTimeout) std::abort();  // the stream had ended
  }
  return 0;
}
