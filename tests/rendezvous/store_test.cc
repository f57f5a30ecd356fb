// The Store contract, for every store: set/get, overwrite, binary and empty values, get waiting
// for a later set, get timing out with the key named, many concurrent clients.
#include "ringd/store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

#include "ringd/error.h"
#include "testing/store_ref.h"

namespace ringd {
namespace {

using std::chrono::milliseconds;

// A store shared by all clients of one test; client() gives each thread its own handle.
class StoreUnderTest {
 public:
  virtual ~StoreUnderTest() = default;
  virtual std::unique_ptr<Store> client() = 0;
};

using testing::StoreRef;

class MemoryUnderTest : public StoreUnderTest {
 public:
  std::unique_ptr<Store> client() override { return std::make_unique<StoreRef>(store_); }

 private:
  MemoryStore store_;
};

class TcpUnderTest : public StoreUnderTest {
 public:
  std::unique_ptr<Store> client() override {
    return std::make_unique<TcpStore>("127.0.0.1", server_.port(), "store-secret",
                                      milliseconds(10000));
  }

 private:
  TcpStoreServer server_{"127.0.0.1", 0, "store-secret"};
};

class FileUnderTest : public StoreUnderTest {
 public:
  FileUnderTest() {
    char pattern[] = "/tmp/ringd_file_store_XXXXXX";
    directory_ = ::mkdtemp(pattern);
  }
  ~FileUnderTest() override { std::filesystem::remove_all(directory_); }
  std::unique_ptr<Store> client() override {
    return std::make_unique<FileStore>(directory_ + "/nested/dir");
  }

 private:
  std::string directory_;
};

using Factory = std::function<std::unique_ptr<StoreUnderTest>()>;

class StoreTest : public ::testing::TestWithParam<std::pair<const char*, Factory>> {
 protected:
  void SetUp() override { store_ = GetParam().second(); }
  std::unique_ptr<StoreUnderTest> store_;
};

TEST_P(StoreTest, SetThenGetReturnsTheValue) {
  auto writer = store_->client();
  auto reader = store_->client();
  std::vector<uint8_t> binary(1000);
  for (size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<uint8_t>(i * 7);
  writer->set("tcp/0", to_bytes("127.0.0.1:4000"));
  writer->set("binary", binary);
  writer->set("empty", {});
  writer->set("odd key/../with spaces%", to_bytes("x"));
  EXPECT_EQ(to_string(reader->get("tcp/0", milliseconds(1000))), "127.0.0.1:4000");
  EXPECT_EQ(reader->get("binary", milliseconds(1000)), binary);
  EXPECT_TRUE(reader->get("empty", milliseconds(1000)).empty());
  EXPECT_EQ(to_string(reader->get("odd key/../with spaces%", milliseconds(1000))), "x");
  writer->set("tcp/0", to_bytes("10.0.0.1:5000"));  // overwrite
  EXPECT_EQ(to_string(reader->get("tcp/0", milliseconds(1000))), "10.0.0.1:5000");
}

TEST_P(StoreTest, GetWaitsForALaterSet) {
  // A chain: client i waits for key i, then sets key i+1. All start waiting before key 0 exists.
  constexpr int kClients = 6;
  std::vector<std::unique_ptr<Store>> clients;
  for (int i = 0; i <= kClients; ++i) clients.push_back(store_->client());
  std::vector<std::string> seen(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      seen[i] = to_string(clients[i]->get("chain/" + std::to_string(i), milliseconds(10000)));
      clients[i]->set("chain/" + std::to_string(i + 1), to_bytes(seen[i] + "+"));
    });
  }
  clients[kClients]->set("chain/0", to_bytes("start"));
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(seen[kClients - 1], "start+++++");
  EXPECT_EQ(to_string(clients[kClients]->get("chain/6", milliseconds(1000))), "start++++++");
}

TEST_P(StoreTest, GetTimesOutNamingTheKey) {
  auto reader = store_->client();
  const auto start = std::chrono::steady_clock::now();
  try {
    reader->get("never/set", milliseconds(200));
    FAIL() << "get of a missing key returned";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(error.what()).find("'never/set'"), std::string::npos) << error.what();
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(200));
  EXPECT_LT(elapsed, milliseconds(3000));
  // The store still works after a timed-out get.
  reader->set("after", to_bytes("ok"));
  EXPECT_EQ(to_string(reader->get("after", milliseconds(1000))), "ok");
}

TEST_P(StoreTest, ManyClientsPublishAndReadEachOther) {
  constexpr int kClients = 8;
  std::vector<std::thread> threads;
  std::vector<int> correct(kClients, 0);
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto client = store_->client();
      client->set("rank/" + std::to_string(i), to_bytes("address of " + std::to_string(i)));
      for (int j = 0; j < kClients; ++j) {
        const std::string value =
            to_string(client->get("rank/" + std::to_string(j), milliseconds(10000)));
        correct[i] += value == "address of " + std::to_string(j);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(correct[i], kClients) << "client " << i;
}

// add() is set-if-absent, atomically: of 8 clients adding the same key at once exactly one
// stores its value, and every other learns that value (ranks claim their number this way).
TEST_P(StoreTest, AddStoresOnlyTheFirstValue) {
  constexpr int kClients = 8;
  std::vector<std::unique_ptr<Store>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(store_->client());
  std::vector<int> won(kClients, 0);
  std::vector<std::string> seen(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      std::vector<uint8_t> existing;
      won[i] = clients[i]->add("claim", to_bytes("client " + std::to_string(i)), &existing);
      seen[i] = won[i] ? "client " + std::to_string(i) : to_string(existing);
    });
  }
  for (auto& thread : threads) thread.join();
  int winners = 0;
  for (int i = 0; i < kClients; ++i) winners += won[i];
  ASSERT_EQ(winners, 1);
  const std::string stored = to_string(clients[0]->get("claim", milliseconds(1000)));
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(seen[i], stored) << "client " << i;
  EXPECT_FALSE(clients[0]->add("claim", to_bytes("late"), nullptr));
  EXPECT_EQ(to_string(clients[1]->get("claim", milliseconds(1000))), stored);
}

INSTANTIATE_TEST_SUITE_P(
    Stores, StoreTest,
    ::testing::Values(
        std::make_pair("memory", Factory([] { return std::make_unique<MemoryUnderTest>(); })),
        std::make_pair("tcp", Factory([] { return std::make_unique<TcpUnderTest>(); })),
        std::make_pair("file", Factory([] { return std::make_unique<FileUnderTest>(); }))),
    [](const auto& info) { return std::string(info.param.first); });

}  // namespace
}  // namespace ringd
