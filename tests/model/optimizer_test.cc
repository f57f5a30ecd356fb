// Sgd against its closed form (v = m v + g + wd w; w -= lr v), its state for checkpoints, and
// its argument checks.
#include "model/optimizer.h"

#include <gtest/gtest.h>

#include <vector>

#include "ringd/error.h"

namespace ringd::model {
namespace {

TEST(Sgd, MomentumAndWeightDecayInClosedForm) {
  Sgd sgd(SgdOptions{0.5, 0.1});
  sgd.add_parameter(0, 2);
  std::vector<float> w = {1.0f, -2.0f};
  const std::vector<float> g = {0.5f, 0.25f};
  sgd.apply(0, w.data(), g.data(), 2, 0.1);
  // g' = g + 0.1 w = {0.6, 0.05}; v = g'; w = w - 0.1 v
  EXPECT_FLOAT_EQ(sgd.state(0)[0], 0.6f);
  EXPECT_FLOAT_EQ(sgd.state(0)[1], 0.05f);
  EXPECT_FLOAT_EQ(w[0], 0.94f);
  EXPECT_FLOAT_EQ(w[1], -2.005f);
  sgd.apply(0, w.data(), g.data(), 2, 0.1);
  // g' = {0.5 + 0.094, 0.25 - 0.2005}; v = 0.5 v + g'
  const float v0 = 0.5f * 0.6f + (0.5f + 0.1f * 0.94f);
  const float v1 = 0.5f * 0.05f + (0.25f + 0.1f * -2.005f);
  EXPECT_FLOAT_EQ(sgd.state(0)[0], v0);
  EXPECT_FLOAT_EQ(sgd.state(0)[1], v1);
  EXPECT_FLOAT_EQ(w[0], 0.94f - 0.1f * v0);
  EXPECT_FLOAT_EQ(w[1], -2.005f - 0.1f * v1);
}

TEST(Sgd, PlainSgdWithoutMomentum) {
  Sgd sgd(SgdOptions{0.0, 0.0});
  sgd.add_parameter(3, 1);
  float w = 1;
  const float g = 2;
  for (int i = 0; i < 3; ++i) sgd.apply(3, &w, &g, 1, 0.25);
  EXPECT_FLOAT_EQ(w, -0.5f);
}

TEST(Sgd, StateRestoresAndIsChecked) {
  Sgd a(SgdOptions{0.9, 0});
  Sgd b(SgdOptions{0.9, 0});
  for (Sgd* sgd : {&a, &b}) {
    sgd->add_parameter(0, 3);
    sgd->add_parameter(1, 1);
  }
  std::vector<float> wa = {1, 2, 3};
  const std::vector<float> g = {0.1f, -0.2f, 0.3f};
  a.apply(0, wa.data(), g.data(), 3, 0.5);
  b.restore_state(0, a.state(0));
  std::vector<float> wb = wa;
  a.apply(0, wa.data(), g.data(), 3, 0.5);
  b.apply(0, wb.data(), g.data(), 3, 0.5);
  EXPECT_EQ(wa, wb) << "restored momentum continues bit for bit";
  EXPECT_THROW(b.restore_state(0, std::vector<float>(2)), Error);
  EXPECT_THROW(b.state(7), Error);
  EXPECT_THROW(b.apply(2, wb.data(), g.data(), 3, 0.5), Error) << "never registered";
  EXPECT_THROW(b.apply(0, wb.data(), g.data(), 2, 0.5), Error) << "wrong count";
  EXPECT_THROW(b.add_parameter(0, 4), Error) << "re-registered with another count";
  b.add_parameter(0, 3);  // the same count again is fine
  EXPECT_THROW(Sgd(SgdOptions{1.5, 0}), Error);
  EXPECT_THROW(Sgd(SgdOptions{0.9, -1}), Error);
}

}  // namespace
}  // namespace ringd::model
