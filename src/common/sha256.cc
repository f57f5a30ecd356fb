#include "common/sha256.h"

#include <algorithm>
#include <cstring>

namespace ringd {
namespace {

// FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the cube roots of the
// first 64 primes.
constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// Section 5.3.3: initial hash value.
constexpr std::array<uint32_t, 8> kInitialState = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

}  // namespace

Sha256::Sha256() : state_(kInitialState) {}

// Section 6.2.2: one 512-bit block.
void Sha256::compress(const uint8_t block[64]) {
  uint32_t w[64];
  for (size_t t = 0; t < 16; ++t) {
    w[t] = (uint32_t{block[4 * t]} << 24) | (uint32_t{block[4 * t + 1]} << 16) |
           (uint32_t{block[4 * t + 2]} << 8) | uint32_t{block[4 * t + 3]};
  }
  for (int t = 16; t < 64; ++t) {
    const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (int t = 0; t < 64; ++t) {
    const uint32_t big_s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    const uint32_t choose = (e & f) ^ (~e & g);
    const uint32_t t1 = h + big_s1 + choose + kRoundConstants[t] + w[t];
    const uint32_t big_s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    const uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    const uint32_t t2 = big_s0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
}

void Sha256::update(const void* data, size_t bytes) {
  const uint8_t* in = static_cast<const uint8_t*>(data);
  total_bytes_ += bytes;
  while (bytes > 0) {
    if (block_used_ == 0 && bytes >= 64) {
      compress(in);
      in += 64;
      bytes -= 64;
      continue;
    }
    const size_t take = std::min(bytes, 64 - block_used_);
    std::memcpy(block_.data() + block_used_, in, take);
    block_used_ += take;
    in += take;
    bytes -= take;
    if (block_used_ == 64) {
      compress(block_.data());
      block_used_ = 0;
    }
  }
}

// Section 5.1.1: append 0x80, zeros, and the message length in bits as a 64-bit big-endian number.
Sha256Digest Sha256::finish() {
  const uint64_t bit_length = total_bytes_ * 8;
  const uint8_t one_bit = 0x80;
  update(&one_bit, 1);
  const uint8_t zero = 0;
  while (block_used_ != 56) update(&zero, 1);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(bit_length >> (56 - 8 * i));
  update(length, 8);
  Sha256Digest digest;
  for (size_t i = 0; i < 8; ++i) {
    digest[4 * i] = static_cast<uint8_t>(state_[i] >> 24);
    digest[4 * i + 1] = static_cast<uint8_t>(state_[i] >> 16);
    digest[4 * i + 2] = static_cast<uint8_t>(state_[i] >> 8);
    digest[4 * i + 3] = static_cast<uint8_t>(state_[i]);
  }
  return digest;
}

Sha256Digest sha256(const void* data, size_t bytes) {
  Sha256 hash;
  hash.update(data, bytes);
  return hash.finish();
}

// RFC 2104: H(K ^ opad, H(K ^ ipad, text)), keys longer than the block are hashed first.
HmacSha256::HmacSha256(const void* key, size_t key_bytes) {
  std::array<uint8_t, 64> block_key{};
  if (key_bytes > 64) {
    const Sha256Digest hashed = sha256(key, key_bytes);
    std::memcpy(block_key.data(), hashed.data(), hashed.size());
  } else if (key_bytes > 0) {
    std::memcpy(block_key.data(), key, key_bytes);
  }
  std::array<uint8_t, 64> inner_pad;
  for (size_t i = 0; i < 64; ++i) {
    inner_pad[i] = block_key[i] ^ 0x36;
    outer_key_pad_[i] = block_key[i] ^ 0x5c;
  }
  inner_.update(inner_pad.data(), inner_pad.size());
}

Sha256Digest HmacSha256::finish() {
  const Sha256Digest inner_digest = inner_.finish();
  Sha256 outer;
  outer.update(outer_key_pad_.data(), outer_key_pad_.size());
  outer.update(inner_digest.data(), inner_digest.size());
  return outer.finish();
}

Sha256Digest hmac_sha256(std::string_view key, const void* data, size_t bytes) {
  HmacSha256 mac(key.data(), key.size());
  mac.update(data, bytes);
  return mac.finish();
}

bool digest_equal(const uint8_t* a, const uint8_t* b, size_t bytes) {
  uint8_t difference = 0;
  for (size_t i = 0; i < bytes; ++i) difference |= static_cast<uint8_t>(a[i] ^ b[i]);
  return difference == 0;
}

}  // namespace ringd
