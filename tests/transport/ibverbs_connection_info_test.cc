// What ranks publish in the rendezvous store for the ibverbs transport: encode/decode round trip,
// rejection of truncated, foreign, other-version and padded blobs, and the compatibility checks.
#include <gtest/gtest.h>

#include "ringd/config.h"

#if RINGD_HAVE_IBVERBS

#include <functional>

#include "ringd/error.h"
#include "ringd/store.h"
#include "transport/ibverbs/connection_info.h"

namespace ringd::ibverbs {
namespace {

ConnectionInfo sample(int rank = 2, int peer = 5) {
  ConnectionInfo info;
  info.rank = rank;
  info.peer = peer;
  info.world_size = 8;
  info.link_layer = LinkLayer::kEthernet;
  info.mtu = 5;
  info.port = 2;
  info.global = true;
  info.lid = 0xBEEF;
  for (size_t i = 0; i < info.gid.size(); ++i) info.gid[i] = static_cast<uint8_t>(0xF0 + i);
  info.qpn = 0x123456;
  info.psn = 0xABCDEF;
  info.slots = 16;
  info.slot_bytes = 65536;
  info.ring_address = 0x7F00DEADBEEF1000ull;
  info.rkey = 0xCAFEF00D;
  info.host = "node-b";
  info.device = "mlx5_1";
  return info;
}

Error error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "no ringd::Error thrown";
  return Error(ErrorCode::kInternal, "");
}

TEST(IbverbsConnectionInfo, RoundTripKeepsEveryField) {
  const ConnectionInfo info = sample();
  EXPECT_EQ(decode(encode(info), "key"), info);
  ConnectionInfo plain = sample(0, 1);
  plain.link_layer = LinkLayer::kInfiniBand;
  plain.global = false;
  plain.host.clear();
  plain.device.clear();
  EXPECT_EQ(decode(encode(plain), "key"), plain);
}

TEST(IbverbsConnectionInfo, EncodingIsLittleEndianAndStartsWithTheMagic) {
  const std::vector<uint8_t> blob = encode(sample());
  ASSERT_GE(blob.size(), 8u);
  EXPECT_EQ(std::string(blob.begin(), blob.begin() + 4), "RDIB");
  EXPECT_EQ(blob[4], kInfoVersion & 0xFF);
  EXPECT_EQ(blob[5], kInfoVersion >> 8);
}

TEST(IbverbsConnectionInfo, EveryTruncationIsRejected) {
  const std::vector<uint8_t> blob = encode(sample());
  for (size_t length = 0; length < blob.size(); ++length) {
    const std::vector<uint8_t> cut(blob.begin(),
                                   blob.begin() + static_cast<std::ptrdiff_t>(length));
    const Error error = error_of([&] { decode(cut, "store key ibverbs/2/5"); });
    EXPECT_EQ(error.code(), ErrorCode::kProtocol) << "length " << length;
    EXPECT_NE(std::string(error.what()).find("store key ibverbs/2/5"), std::string::npos);
  }
}

TEST(IbverbsConnectionInfo, ForeignOtherVersionAndPaddedBlobsAreRejected) {
  const Error tcp_address = error_of([] { decode(to_bytes("127.0.0.1:41000"), "k"); });
  EXPECT_EQ(tcp_address.code(), ErrorCode::kProtocol);
  EXPECT_NE(std::string(tcp_address.what()).find("not ibverbs connection details"),
            std::string::npos)
      << tcp_address.what();

  std::vector<uint8_t> newer = encode(sample());
  newer[4] = kInfoVersion + 1;
  const Error version = error_of([&] { decode(newer, "k"); });
  EXPECT_EQ(version.code(), ErrorCode::kProtocol);
  EXPECT_NE(std::string(version.what()).find("version"), std::string::npos);

  std::vector<uint8_t> padded = encode(sample());
  padded.push_back(0);
  EXPECT_EQ(error_of([&] { decode(padded, "k"); }).code(), ErrorCode::kProtocol);

  std::vector<uint8_t> bad_layer = encode(sample());
  bad_layer[6] = 9;
  EXPECT_EQ(error_of([&] { decode(bad_layer, "k"); }).code(), ErrorCode::kProtocol);
}

TEST(IbverbsConnectionInfo, LongNamesAreClipped) {
  ConnectionInfo info = sample();
  info.host = std::string(1000, 'h');
  const ConnectionInfo back = decode(encode(info), "k");
  EXPECT_EQ(back.host, std::string(kMaxInfoNameBytes, 'h'));
}

TEST(IbverbsConnectionInfo, CompatibleDetailsPass) {
  const ConnectionInfo local = sample(5, 2);
  EXPECT_NO_THROW(check_compatible(local, sample(2, 5), "k"));
  EXPECT_EQ(describe_peer(sample(2, 5)), "rank 2 (node-b mlx5_1:2)");
}

TEST(IbverbsConnectionInfo, DetailsForSomeoneElseAreAProtocolError) {
  const Error error = error_of([] { check_compatible(sample(5, 2), sample(3, 5), "store key x"); });
  EXPECT_EQ(error.code(), ErrorCode::kProtocol);
  EXPECT_NE(std::string(error.what()).find("another job"), std::string::npos) << error.what();
}

TEST(IbverbsConnectionInfo, DifferentlyConfiguredRanksAreAMismatch) {
  const ConnectionInfo local = sample(5, 2);
  ConnectionInfo world = sample(2, 5);
  world.world_size = 4;
  const Error size = error_of([&] { check_compatible(local, world, "k"); });
  EXPECT_EQ(size.code(), ErrorCode::kMismatch);
  EXPECT_NE(std::string(size.what()).find("rank 5: peer rank 2 (node-b mlx5_1:2) has world size 4"),
            std::string::npos)
      << size.what();

  ConnectionInfo layer = sample(2, 5);
  layer.link_layer = LinkLayer::kInfiniBand;
  EXPECT_EQ(error_of([&] { check_compatible(local, layer, "k"); }).code(), ErrorCode::kMismatch);

  ConnectionInfo slots = sample(2, 5);
  slots.slot_bytes = 4096;
  const Error geometry = error_of([&] { check_compatible(local, slots, "k"); });
  EXPECT_EQ(geometry.code(), ErrorCode::kMismatch);
  EXPECT_NE(std::string(geometry.what()).find("16 slots of 4096 bytes"), std::string::npos)
      << geometry.what();

  ConnectionInfo qpn = sample(2, 5);
  qpn.qpn = 0;
  EXPECT_EQ(error_of([&] { check_compatible(local, qpn, "k"); }).code(), ErrorCode::kProtocol);
}

}  // namespace
}  // namespace ringd::ibverbs

#else  // !RINGD_HAVE_IBVERBS

TEST(IbverbsConnectionInfo, NotBuilt) {
  GTEST_SKIP() << "built without rdma-core (RINGD_HAVE_IBVERBS=0)";
}

#endif
