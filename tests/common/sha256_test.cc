// SHA-256 against FIPS 180-4 examples and HMAC-SHA256 against RFC 4231 test cases 1-7.
#include "common/sha256.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ringd {
namespace {

std::string hex(const Sha256Digest& digest, size_t bytes = 32) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    out += kDigits[digest[i] >> 4];
    out += kDigits[digest[i] & 15];
  }
  return out;
}

std::string hash_text(const std::string& text) { return hex(sha256(text.data(), text.size())); }

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(hash_text(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hash_text("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hash_text("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      hash_text("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                "klmnopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionAsFedInUnevenPieces) {
  const std::string chunk(997, 'a');
  Sha256 hash;
  size_t fed = 0;
  for (size_t piece = 1; fed < 1000000; piece = piece * 3 % 997 + 1) {
    const size_t take = std::min(piece, 1000000 - fed);
    hash.update(chunk.data(), take);
    fed += take;
  }
  EXPECT_EQ(hex(hash.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  // Lengths around the 55/56/64-byte padding edges must agree between one-shot and byte-wise.
  for (size_t length : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128}) {
    const std::string text(length, 'x');
    Sha256 bytewise;
    for (char c : text) bytewise.update(&c, 1);
    EXPECT_EQ(hex(bytewise.finish()), hash_text(text)) << "length " << length;
  }
}

struct HmacCase {
  std::string key;
  std::string data;
  std::string expected;  // hex; shorter than 64 digits = truncated output (case 5)
};

TEST(HmacSha256, Rfc4231) {
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  const std::vector<HmacCase> cases = {
      {std::string(20, '\x0b'), "Hi There",
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"Jefe", "what do ya want for nothing?",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {std::string(20, '\xaa'), std::string(50, '\xdd'),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {key4, std::string(50, '\xcd'),
       "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {std::string(20, '\x0c'), "Test With Truncation", "a3b6167473100ee06e0c796c2955552b"},
      {std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {std::string(131, '\xaa'),
       "This is a test using a larger than block-size key and a larger than block-size data. The "
       "key needs to be hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const HmacCase& c = cases[i];
    const Sha256Digest mac = hmac_sha256(c.key, c.data.data(), c.data.size());
    EXPECT_EQ(hex(mac, c.expected.size() / 2), c.expected) << "RFC 4231 test case " << i + 1;
  }
}

TEST(HmacSha256, IncrementalMatchesOneShotAndEmptyKeyWorks) {
  const std::string data = "nonce-a|nonce-b|rank 3|rank 5";
  HmacSha256 mac("", 0);
  mac.update(data.substr(0, 7));
  mac.update(data.substr(7));
  const Sha256Digest incremental = mac.finish();
  EXPECT_EQ(hex(incremental), hex(hmac_sha256("", data.data(), data.size())));
  const Sha256Digest other = hmac_sha256("x", data.data(), data.size());
  EXPECT_FALSE(digest_equal(incremental.data(), other.data(), 32));
  EXPECT_TRUE(digest_equal(incremental.data(), incremental.data(), 32));
}

}  // namespace
}  // namespace ringd
