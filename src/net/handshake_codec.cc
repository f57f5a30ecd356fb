#include "net/handshake_codec.h"

#include <bit>
#include <sstream>

#include "common/text.h"

namespace ringd::net::codec {

static_assert(std::endian::native == std::endian::little,
              "ringd writes its little-endian wire format with memcpy; port the codec first");

std::string parse_header(const uint8_t* bytes, ParsedHeader* out) {
  if (std::memcmp(bytes, kHandshakeMagic, 4) != 0) {
    std::ostringstream reason;
    reason << "not a ringd peer (first bytes 0x" << std::hex;
    for (int i = 0; i < 4; ++i) reason << (bytes[i] >> 4) << (bytes[i] & 15);
    reason << ", expected \"RNGD\")";
    return reason.str();
  }
  Reader reader(bytes + 4, kHandshakeHeaderBytes - 4);
  out->version = reader.u32();
  out->type = reader.u32();
  out->body_bytes = reader.u32();
  if (out->version != kProtocolVersion) {
    return "peer speaks ringd protocol v" + std::to_string(out->version) + ", this is v" +
           std::to_string(kProtocolVersion);
  }
  if (out->body_bytes > kMaxHandshakeBody) {
    return "handshake message of " + std::to_string(out->body_bytes) + " bytes exceeds the " +
           std::to_string(kMaxHandshakeBody) + "-byte limit";
  }
  return "";
}

std::vector<uint8_t> encode_message(HandshakeType type, const std::vector<uint8_t>& body) {
  std::vector<uint8_t> message = encode_handshake_header(type, static_cast<uint32_t>(body.size()));
  message.insert(message.end(), body.begin(), body.end());
  return message;
}

Sha256Digest proof(const std::string& secret, const char* label,
                   const std::vector<uint8_t>& hello_body, int32_t acceptor_rank,
                   const uint8_t* acceptor_nonce) {
  HmacSha256 mac(secret.data(), secret.size());
  mac.update(label, std::strlen(label));
  const uint32_t version = kProtocolVersion;
  mac.update(&version, sizeof(version));
  mac.update(hello_body.data(), hello_body.size());
  mac.update(&acceptor_rank, sizeof(acceptor_rank));
  mac.update(acceptor_nonce, kNonceBytes);
  return mac.finish();
}

namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

// 32 hex digits -> 16 bytes; "" (or anything else) -> zeros.
void job_id_bytes(const std::string& job_id, uint8_t* out) {
  std::memset(out, 0, kJobIdBytes);
  if (job_id.size() != 2 * kJobIdBytes) return;
  for (size_t i = 0; i < kJobIdBytes; ++i) {
    const char* high = std::strchr(kHexDigits, job_id[2 * i]);
    const char* low = std::strchr(kHexDigits, job_id[2 * i + 1]);
    if (!high || !low || !*high || !*low) {
      std::memset(out, 0, kJobIdBytes);
      return;
    }
    out[i] = static_cast<uint8_t>(((high - kHexDigits) << 4) | (low - kHexDigits));
  }
}

std::string job_id_text(const uint8_t* bytes) {
  for (size_t i = 0; i < kJobIdBytes; ++i) {
    if (bytes[i] != 0) return hex(bytes, kJobIdBytes);
  }
  return "";
}

}  // namespace

std::vector<uint8_t> encode_hello(const HelloInfo& hello, const uint8_t* nonce) {
  Writer writer;
  writer.u32(static_cast<uint32_t>(hello.kind));
  writer.i32(hello.rank);
  writer.i32(hello.target_rank);
  writer.i32(hello.world_size);
  writer.raw(nonce, kNonceBytes);
  uint8_t job[kJobIdBytes];
  job_id_bytes(hello.job_id, job);
  writer.raw(job, kJobIdBytes);
  const std::string address = hello.address.substr(0, 255);
  writer.u16(static_cast<uint16_t>(address.size()));
  writer.raw(address.data(), address.size());
  return std::move(writer.bytes());
}

bool decode_hello(const std::vector<uint8_t>& body, HelloInfo* out) {
  Reader reader(body.data(), body.size());
  const uint32_t kind = reader.u32();
  out->rank = reader.i32();
  out->target_rank = reader.i32();
  out->world_size = reader.i32();
  uint8_t nonce[kNonceBytes];
  reader.raw(nonce, kNonceBytes);
  uint8_t job[kJobIdBytes] = {};
  reader.raw(job, kJobIdBytes);
  out->job_id = job_id_text(job);
  const uint16_t address_bytes = reader.u16();
  out->address = reader.text(address_bytes);
  if (!reader.at_end() || address_bytes > 255) return false;
  if (kind != static_cast<uint32_t>(PeerKind::kPair) &&
      kind != static_cast<uint32_t>(PeerKind::kStoreClient) &&
      kind != static_cast<uint32_t>(PeerKind::kPsWorker) &&
      kind != static_cast<uint32_t>(PeerKind::kConflictNotice)) {
    return false;
  }
  out->kind = static_cast<PeerKind>(kind);
  return true;
}

std::vector<uint8_t> encode_result(HandshakeStatus status, const std::string& reason) {
  Writer writer;
  writer.u32(static_cast<uint32_t>(status));
  const std::string text = reason.substr(0, 512);
  writer.u16(static_cast<uint16_t>(text.size()));
  writer.raw(text.data(), text.size());
  return std::move(writer.bytes());
}

}  // namespace ringd::net::codec
