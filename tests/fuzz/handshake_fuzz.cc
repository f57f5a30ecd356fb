// The job-secret handshake (net/handshake.h) that opens every rank-to-rank and store
// connection: what a stranger's bytes reach before anyone has proven the job secret. Input: a
// mode byte, then the bytes of the other side.
//   mode 0: the acceptor's state machine reading a dialer's HELLO / PROOF;
//   mode 1: the dialer reading an acceptor's CHALLENGE / RESULT;
//   mode 2: header parsing and HELLO decoding alone.
#include <unistd.h>

#include <cstdlib>

#include "fuzz_support.h"
#include "net/handshake.h"
#include "net/handshake_codec.h"
#include "ringd/error.h"

using namespace ringd;
using namespace ringd::net;

namespace {

void accept_side(const uint8_t* data, size_t size, const std::string& secret) {
  fuzz::SocketPair pair;
  pair.feed(data, size);
  AcceptHandshake handshake(secret, 0, [](const HelloInfo&) { return std::string(); });
  // The input and its end of stream are all there: two advances see everything.
  handshake.advance(pair.near());
  const AcceptHandshake::State state = handshake.advance(pair.near());
  // The stream ended, so the handshake cannot still be waiting for bytes.
  if (state == AcceptHandshake::State::kInProgress) std::abort();
  if (state == AcceptHandshake::State::kRejected && handshake.reject_reason().empty()) std::abort();
}

void dial_side(const uint8_t* data, size_t size, const std::string& secret) {
  fuzz::SocketPair pair;
  pair.feed(data, size);
  HelloInfo hello;
  hello.rank = 1;
  hello.target_rank = 0;
  hello.world_size = 2;
  hello.job_id = "0123456789abcdef0123456789abcdef";
  hello.address = "127.0.0.1:1";
  try {
    dial_handshake(pair.near(), secret, hello, 0, "rank 1", "peer rank 0",
                   Clock::now() + std::chrono::seconds(5));
  } catch (const Error& error) {
    if (error.code() == ErrorCode::kTimeout) std::abort();  // the stream had ended: no waiting
  }
}

void decode_only(const uint8_t* data, size_t size) {
  if (size < kHandshakeHeaderBytes) return;
  codec::ParsedHeader header;
  codec::parse_header(data, &header);
  HelloInfo hello;
  const std::vector<uint8_t> body(data + kHandshakeHeaderBytes, data + size);
  if (codec::decode_hello(body, &hello)) {
    std::vector<uint8_t> nonce(kNonceBytes);
    // What decodes re-encodes to a HELLO that decodes to the same fields.
    HelloInfo again;
    if (!codec::decode_hello(codec::encode_hello(hello, nonce.data()), &again)) std::abort();
    if (again.kind != hello.kind || again.rank != hello.rank ||
        again.target_rank != hello.target_rank || again.world_size != hello.world_size ||
        again.address != hello.address) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0] % 3;
  const std::string secret = (data[0] & 0x80) ? "job secret" : "";
  switch (mode) {
    case 0: accept_side(data + 1, size - 1, secret); break;
    case 1: dial_side(data + 1, size - 1, secret); break;
    default: decode_only(data + 1, size - 1);
  }
  return 0;
}
