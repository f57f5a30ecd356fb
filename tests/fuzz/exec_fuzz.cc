// `ringd exec` <-> `ringd agent` (launcher/exec_protocol.h, exec_command_line.h): what reaches an
// agent's port from anyone, and what a client reads from an agent. Input: a mode byte, then:
//   mode 0: a client's handshake bytes, fed to the agent's handshake state machine;
//   mode 1: raw frames, read by a Channel (MACs under fixed keys: the fuzzer cannot forge them, so
//           this covers the framing checks before the MAC);
//   mode 2: frames as [type u8][length u16][payload], sent with valid MACs, read by a Channel;
//   mode 3: an agent's handshake replies, read by client_handshake;
//   mode 4: a command line as an agent parses it (after authentication).
#include <cstdlib>
#include <cstring>

#include "fuzz_support.h"
#include "launcher/exec_command_line.h"
#include "launcher/exec_protocol.h"
#include "ringd/error.h"

using namespace ringd;
using namespace ringd::launcher;
using namespace std::chrono_literals;

namespace {

const std::string kSecret = "job secret";

exec::SessionKeys fixed_keys(bool swapped) {
  exec::SessionKeys keys;
  keys.send.fill(1);
  keys.receive.fill(2);
  if (swapped) std::swap(keys.send, keys.receive);
  return keys;
}

void agent_handshake(const uint8_t* data, size_t size) {
  exec::ServerHandshake handshake(kSecret, "fuzz client");
  size_t offset = 0;
  try {
    while (!handshake.done() && size - offset >= handshake.wanted()) {
      const size_t wanted = handshake.wanted();
      std::string reply;
      handshake.consume(data + offset, &reply);
      offset += wanted;
    }
  } catch (const Error&) {
  }
}

void read_frames(const uint8_t* data, size_t size) {
  fuzz::SocketPair pair;
  pair.feed(data, size);
  exec::Channel channel(pair.near(), fixed_keys(false), "fuzz peer");
  try {
    exec::MessageType type;
    std::string payload;
    for (int frames = 0; frames < 1000; ++frames) {
      if (!channel.receive(&type, &payload, net::Clock::now() + 5s)) break;
    }
  } catch (const Error& error) {
    if (error.code() == ErrorCode::kTimeout) std::abort();  // the stream had ended
  }
}

void read_signed_frames(const uint8_t* data, size_t size) {
  exec::Channel sender(-1, fixed_keys(true), "fuzz sender");
  std::string stream;
  size_t offset = 0;
  while (size - offset >= 3) {
    const auto type = static_cast<exec::MessageType>(data[offset]);
    size_t length = data[offset + 1] | (size_t{data[offset + 2]} << 8);
    offset += 3;
    length = std::min(length, size - offset);
    stream += sender.encode(type, fuzz::as_text(data + offset, length));
    offset += length;
  }
  read_frames(reinterpret_cast<const uint8_t*>(stream.data()), stream.size());
}

void client_handshake(const uint8_t* data, size_t size) {
  fuzz::SocketPair pair;
  pair.feed(data, size);
  try {
    exec::client_handshake(pair.near(), kSecret, "fuzz agent", net::Clock::now() + 5s);
  } catch (const Error& error) {
    if (error.code() == ErrorCode::kTimeout) std::abort();
  }
}

void command_line(const uint8_t* data, size_t size) {
  const auto env = [](const char* name) -> const char* {
    return std::strcmp(name, "PATH") == 0 ? "/usr/bin:/bin" : nullptr;
  };
  try {
    const ExecCommand command =
        parse_exec_command_line(std::string(fuzz::as_text(data, size)), env);
    (void)command;
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  switch (data[0] % 5) {
    case 0: agent_handshake(data + 1, size - 1); break;
    case 1: read_frames(data + 1, size - 1); break;
    case 2: read_signed_frames(data + 1, size - 1); break;
    case 3: client_handshake(data + 1, size - 1); break;
    default: command_line(data + 1, size - 1);
  }
  return 0;
}
