// A parameter server's connection threads (issue 15, item 3): a finished connection's thread is
// joined, not kept (1,000 short connections cost no memory and leave no threads), and beyond
// ServerOptions::max_connections a worker is refused with a reason naming the limit.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "net/handshake.h"
#include "ps/ps_test_support.h"
#include "ps/server.h"
#include "ringd/error.h"
#include "testing/process_stats.h"

namespace ringd::ps {
namespace {

using ::ringd::testing::status_kib;
using ::ringd::testing::thread_count;

ServerOptions loopback(const std::string& secret) {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.secret = secret;
  options.timeout = std::chrono::milliseconds(20000);
  return options;
}

// Waits (bounded) until at most `bound` threads run in this process; returns the count.
int wait_for_tasks_at_most(int bound) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int tasks = thread_count();
  while (tasks > bound && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a count, bounded
    tasks = thread_count();
  }
  return tasks;
}

// Before: every connection's std::thread stayed in a vector until the server was destroyed, its
// stack kept (+205 MB after 1,000 connections).
TEST(PsConnections, ShortConnectionsLeaveNoThreadsOrMemoryBehind) {
  ParameterServer server(loopback("s"));
  const auto connect_and_close = [&](int count) {
    for (int i = 0; i < count; ++i) {
      if (i % 4 == 3) {  // a wrong secret: refused in the handshake, no thread at all
        try {
          testing::raw_client(server.address(), "wrong");
          ADD_FAILURE() << "a wrong secret was accepted";
        } catch (const Error& error) {
          EXPECT_EQ(error.code(), ErrorCode::kAuth) << error.what();
        }
      } else {
        net::Fd socket =
            testing::raw_client(server.address(), "s");  // closed at once: its thread ends
      }
    }
  };
  connect_and_close(100);  // warm up: allocator arenas, cached stacks
  const int tasks_before = wait_for_tasks_at_most(thread_count());
  const long resident_before = status_kib("VmRSS:");
  const long mapped_before = status_kib("VmSize:");
  connect_and_close(1000);
  const int tasks_after = wait_for_tasks_at_most(tasks_before + 2);
  const long resident_grown = status_kib("VmRSS:") - resident_before;
  const long mapped_grown = status_kib("VmSize:") - mapped_before;
  EXPECT_LE(tasks_after, tasks_before + 2);
  EXPECT_LT(resident_grown, 16 << 10)
      << "resident memory grew by " << resident_grown / 1024 << " MiB";
  // Never-joined threads kept 8 MiB of stack each mapped: +6 GiB here. Joined, what remains is
  // the allocator's per-thread arenas (64 MiB reservations; 64-208 MiB seen), hence the margin.
  EXPECT_LT(mapped_grown, 1 << 20) << "mapped memory grew by " << mapped_grown / 1024
                                   << " MiB (the stacks of threads never joined)";
}

// Beyond the cap a worker is refused with the limit in the reason, and a freed place is taken
// again.
TEST(PsConnections, BeyondTheCapAConnectionIsRefusedNamingTheLimit) {
  ServerOptions options = loopback("s");
  options.max_connections = 4;
  ParameterServer server(options);
  std::vector<net::Fd> held;
  for (int i = 0; i < 4; ++i) held.push_back(testing::raw_client(server.address(), "s"));
  try {
    testing::raw_client(server.address(), "s");
    ADD_FAILURE() << "a fifth connection was admitted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kMismatch) << error.what();
    EXPECT_NE(std::string(error.what()).find("at most 4 connections"), std::string::npos)
        << error.what();
  }
  held.pop_back();  // its thread sees the close and ends
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool admitted = false;
  while (!admitted && std::chrono::steady_clock::now() < deadline) {
    try {
      held.push_back(testing::raw_client(server.address(), "s"));
      admitted = true;
    } catch (const Error& error) {  // refused until that thread has ended
      EXPECT_EQ(error.code(), ErrorCode::kMismatch) << error.what();
    }
  }
  EXPECT_TRUE(admitted);
}

}  // namespace
}  // namespace ringd::ps
