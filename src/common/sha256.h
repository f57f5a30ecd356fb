// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), written here so the tcp handshake needs no
// OpenSSL. Not constant-time except for digest_equal(); only used to prove knowledge of the job
// secret, never to encrypt.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ringd {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  void update(std::string_view text) { update(text.data(), text.size()); }
  Sha256Digest finish();  // the object must not be updated afterwards

 private:
  void compress(const uint8_t block[64]);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> block_{};
  size_t block_used_ = 0;
  uint64_t total_bytes_ = 0;
};

Sha256Digest sha256(const void* data, size_t bytes);

// HMAC-SHA256, incremental: construct with the key, update() the message, finish().
class HmacSha256 {
 public:
  HmacSha256(const void* key, size_t key_bytes);
  void update(const void* data, size_t bytes) { inner_.update(data, bytes); }
  void update(std::string_view text) { inner_.update(text); }
  Sha256Digest finish();

 private:
  Sha256 inner_;
  std::array<uint8_t, 64> outer_key_pad_{};
};

Sha256Digest hmac_sha256(std::string_view key, const void* data, size_t bytes);

// Compares two digests in time independent of where they differ.
bool digest_equal(const uint8_t* a, const uint8_t* b, size_t bytes);

}  // namespace ringd
