// broadcast (every root), allgather, allgatherv and reduce_scatter over ranks x counts x
// transports, in place and out of place.
#include "ringd/collectives.h"

#include <gtest/gtest.h>

#include <tuple>

#include "testing/check.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

using testing::Transport;

const std::vector<size_t> kCounts = {0, 1, 2, 3, 13, 65, 1021, 20011};

CollectiveOptions small_segments() {
  CollectiveOptions options;
  options.segment_bytes = 200;  // 50 floats
  options.segments_in_flight = 2;
  return options;
}

using Param = std::tuple<Transport, int>;
class Collectives : public ::testing::TestWithParam<Param> {};

TEST_P(Collectives, BroadcastFromEveryRoot) {
  const auto [transport, size] = GetParam();
  testing::run_ranks(transport, size, [&](Context& ctx) {
    for (int root = 0; root < size; ++root) {
      for (size_t count : kCounts) {
        std::vector<float> buf(count + 1, -1.0f);
        if (ctx.rank() == root) {
          for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(root * 1000 + i % 977);
        }
        broadcast(ctx, buf.data(), count, DataType::kFloat32, root, small_segments());
        const std::string bad =
            testing::first_mismatch(buf.data(), count, DataType::kFloat32, 0,
                                    [&](size_t i) { return root * 1000.0 + i % 977; });
        ASSERT_EQ(bad, "") << "rank " << ctx.rank() << " root " << root << " count " << count;
        EXPECT_EQ(buf[count], -1.0f) << "wrote past the end";
      }
    }
  });
}

TEST_P(Collectives, AllgatherInPlaceAndOutOfPlace) {
  const auto [transport, size] = GetParam();
  for (DataType dtype : {DataType::kFloat32, DataType::kUInt8, DataType::kFloat64}) {
    testing::run_ranks(transport, size, [&](Context& ctx) {
      for (bool in_place : {false, true}) {
        for (size_t count : kCounts) {
          const size_t elem = dtype_size(dtype);
          std::vector<unsigned char> in(count * elem + 1);
          for (size_t i = 0; i < count; ++i)
            testing::store_value(in.data(), i, dtype, (ctx.rank() * 31 + i) % 200);
          std::vector<unsigned char> out(count * size * elem + 1, 0xCD);
          const void* source = in.data();
          if (in_place) {
            std::memcpy(out.data() + ctx.rank() * count * elem, in.data(), count * elem);
            source = out.data() + ctx.rank() * count * elem;
          }
          allgather(ctx, source, out.data(), count, dtype, small_segments());
          const std::string bad = testing::first_mismatch(
              out.data(), count * size, dtype, 0,
              [&](size_t j) { return static_cast<double>((j / count * 31 + j % count) % 200); });
          ASSERT_EQ(bad, "") << "rank " << ctx.rank() << " count " << count << " in_place "
                             << in_place;
          EXPECT_EQ(out.back(), 0xCD) << "wrote past the end";
        }
      }
    });
  }
}

TEST_P(Collectives, AllgathervUnevenAndEmptyContributions) {
  const auto [transport, size] = GetParam();
  // Rank r contributes counts[r] elements: zero for some ranks, uneven, one rank far larger.
  const std::vector<std::vector<size_t>> patterns = [&] {
    std::vector<std::vector<size_t>> all(4, std::vector<size_t>(size));
    for (int r = 0; r < size; ++r) {
      all[0][r] = static_cast<size_t>(r);       // rank 0 sends nothing
      all[1][r] = r % 2 == 0 ? 0 : 13 * r + 1;  // every other rank empty
      all[2][r] = r == size - 1 ? 20011 : 3;    // one large contribution
      all[3][r] = 0;                            // nothing at all
    }
    return all;
  }();
  for (DataType dtype : {DataType::kFloat32, DataType::kUInt8, DataType::kFloat64}) {
    testing::run_ranks(transport, size, [&](Context& ctx) {
      for (bool in_place : {false, true}) {
        for (const std::vector<size_t>& counts : patterns) {
          const size_t elem = dtype_size(dtype);
          std::vector<size_t> offsets(size + 1, 0);
          for (int r = 0; r < size; ++r) offsets[r + 1] = offsets[r] + counts[r];
          const size_t mine = counts[ctx.rank()];
          const auto value = [&](int rank, size_t i) {
            return static_cast<double>((rank * 37 + i) % 200);
          };
          std::vector<unsigned char> in(mine * elem + 1);
          for (size_t i = 0; i < mine; ++i)
            testing::store_value(in.data(), i, dtype, value(ctx.rank(), i));
          std::vector<unsigned char> out(offsets[size] * elem + 1, 0xCD);
          const void* source = in.data();
          if (in_place) {
            std::memcpy(out.data() + offsets[ctx.rank()] * elem, in.data(), mine * elem);
            source = out.data() + offsets[ctx.rank()] * elem;
          }
          allgatherv(ctx, source, out.data(), counts, dtype, small_segments());
          const std::string bad =
              testing::first_mismatch(out.data(), offsets[size], dtype, 0, [&](size_t j) {
                int rank = 0;
                while (offsets[rank + 1] <= j) ++rank;
                return value(rank, j - offsets[rank]);
              });
          ASSERT_EQ(bad, "") << "rank " << ctx.rank() << " total " << offsets[size] << " in_place "
                             << in_place;
          EXPECT_EQ(out.back(), 0xCD) << "wrote past the end";
        }
      }
    });
  }
}

TEST_P(Collectives, ReduceScatterEveryOp) {
  const auto [transport, size] = GetParam();
  for (ReduceOp op : kAllReduceOps) {
    for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64}) {
      if (!reduce_op_supported(dtype, op)) continue;
      testing::RankOutputs unused(size);
      testing::run_ranks(transport, size, [&](Context& ctx) {
        for (bool in_place : {false, true}) {
          for (size_t count : kCounts) {
            const size_t elem = dtype_size(dtype);
            std::vector<unsigned char> in =
                testing::make_input(op, ctx.rank(), count * size, dtype);
            std::vector<unsigned char> out(count * elem + 1, 0xEE);
            void* result = in_place ? in.data() + ctx.rank() * count * elem : out.data();
            reduce_scatter(ctx, in.data(), result, count, dtype, op, small_segments());
            const double tolerance = op == ReduceOp::kAvg ? testing::avg_tolerance(dtype) : 0.0;
            const std::string bad =
                testing::first_mismatch(result, count, dtype, tolerance, [&](size_t i) {
                  return testing::expected_value(op, size, ctx.rank() * count + i);
                });
            ASSERT_EQ(bad, "") << "rank " << ctx.rank() << " " << reduce_op_name(op) << " "
                               << dtype_name(dtype) << " count " << count << " in_place "
                               << in_place;
            if (!in_place) {
              EXPECT_EQ(out.back(), 0xEE) << "wrote past the end";
            }
          }
        }
      });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Inproc, Collectives,
                         ::testing::Combine(::testing::Values(Transport::kInproc),
                                            ::testing::Values(1, 2, 3, 4, 5, 7, 8, 16)),
                         [](const auto& info) {
                           return "inproc_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });
INSTANTIATE_TEST_SUITE_P(Tcp, Collectives,
                         ::testing::Combine(::testing::Values(Transport::kTcp),
                                            ::testing::Values(2, 3, 4, 8)),
                         [](const auto& info) {
                           return "tcp_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

}  // namespace
}  // namespace ringd
