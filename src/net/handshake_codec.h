// Encoding helpers private to the handshake (handshake.cc, accept_handshake.cc): little-endian
// writer/reader, header parsing and the HMAC proofs. See handshake.h for the wire format.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "net/handshake.h"

namespace ringd::net::codec {

class Writer {
 public:
  void u16(uint16_t v) { raw(&v, 2); }
  void u32(uint32_t v) { raw(&v, 4); }
  void i32(int32_t v) { raw(&v, 4); }
  void raw(const void* data, size_t bytes) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + bytes);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Bounds-checked reads; ok() turns false (and stays false) on the first read past the end.
class Reader {
 public:
  Reader(const uint8_t* data, size_t bytes) : data_(data), bytes_(bytes) {}
  uint16_t u16() {
    uint16_t v = 0;
    raw(&v, 2);
    return v;
  }
  uint32_t u32() {
    uint32_t v = 0;
    raw(&v, 4);
    return v;
  }
  int32_t i32() {
    int32_t v = 0;
    raw(&v, 4);
    return v;
  }
  void raw(void* out, size_t n) {
    if (!ok_ || bytes_ - offset_ < n) {
      ok_ = false;
      return;
    }
    std::memcpy(out, data_ + offset_, n);
    offset_ += n;
  }
  std::string text(size_t n) {
    std::string out(n, '\0');
    raw(out.data(), n);
    return ok_ ? out : std::string();
  }
  bool ok() const { return ok_; }
  bool at_end() const { return ok_ && offset_ == bytes_; }

 private:
  const uint8_t* data_;
  size_t bytes_;
  size_t offset_ = 0;
  bool ok_ = true;
};

static_assert(sizeof(int) == 4, "ringd's wire format assumes 32-bit int");

struct ParsedHeader {
  uint32_t version = 0;
  uint32_t type = 0;
  uint32_t body_bytes = 0;
};

// "" when `bytes` (kHandshakeHeaderBytes long) is a ringd header of this version with a body within
// the limit; otherwise why not.
std::string parse_header(const uint8_t* bytes, ParsedHeader* out);

std::vector<uint8_t> encode_message(HandshakeType type, const std::vector<uint8_t>& body);

// Ma (label "ringd acceptor") or Md (label "ringd dialer"), see handshake.h.
Sha256Digest proof(const std::string& secret, const char* label,
                   const std::vector<uint8_t>& hello_body, int32_t acceptor_rank,
                   const uint8_t* acceptor_nonce);

std::vector<uint8_t> encode_hello(const HelloInfo& hello, const uint8_t* nonce);
// False when the body is malformed.
bool decode_hello(const std::vector<uint8_t>& body, HelloInfo* out);

std::vector<uint8_t> encode_result(HandshakeStatus status, const std::string& reason);

}  // namespace ringd::net::codec
