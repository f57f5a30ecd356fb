// For tests where every rank must fail: each rank's error has `code` and names `text`.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "ringd/error.h"
#include "testing/ranks.h"

namespace ringd::testing {

inline void expect_every_rank_failed(const RankErrors& result, ErrorCode code,
                                     const std::string& text) {
  for (size_t rank = 0; rank < result.errors.size(); ++rank) {
    ASSERT_NE(result.errors[rank], nullptr) << "rank " << rank << " succeeded";
    try {
      std::rethrow_exception(result.errors[rank]);
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), code) << "rank " << rank << ": " << error.what();
      EXPECT_NE(std::string(error.what()).find(text), std::string::npos)
          << "rank " << rank << " does not name '" << text << "': " << error.what();
    }
  }
}

}  // namespace ringd::testing
