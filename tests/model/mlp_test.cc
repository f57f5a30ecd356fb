// The MLP: deterministic initialisation, gradients against finite differences, the order in
// which backward hands gradients over, and softmax cross-entropy in closed form.
#include "model/mlp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/random.h"
#include "ringd/error.h"
#include "testing/model_data.h"

namespace ringd::model {
namespace {

using Data = testing::LabelledData;
using testing::random_labelled_data;

TEST(Mlp, ParametersAreNamedShapedAndSeeded) {
  Mlp a({6, 5, 3}, 7);
  const auto& params = a.parameters();
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params[0].name, "layer0.weight");
  EXPECT_EQ(params[0].shape, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(params[1].name, "layer0.bias");
  EXPECT_EQ(params[1].count, 5u);
  EXPECT_EQ(params[2].shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(params[3].name, "layer1.bias");
  EXPECT_EQ(a.describe(), "6,5,3");
  Mlp same({6, 5, 3}, 7);
  Mlp other({6, 5, 3}, 8);
  bool differs = false;
  for (size_t i = 0; i < params.size(); ++i) {
    for (size_t j = 0; j < params[i].count; ++j) {
      EXPECT_EQ(params[i].value[j], same.parameters()[i].value[j]);
      differs |= params[i].value[j] != other.parameters()[i].value[j];
    }
  }
  EXPECT_TRUE(differs) << "another seed gives other weights";
  // Kaiming-uniform bound sqrt(6 / fan_in); biases start at zero.
  const float bound = std::sqrt(6.0f / 6.0f);
  for (size_t j = 0; j < params[0].count; ++j) EXPECT_LE(std::fabs(params[0].value[j]), bound);
  for (size_t j = 0; j < params[1].count; ++j) EXPECT_EQ(params[1].value[j], 0.0f);
}

TEST(Mlp, GradientsMatchFiniteDifferences) {
  Mlp mlp({7, 6, 5, 4}, 3);
  const Data data = random_labelled_data(5, 7, 4, 11);
  // Non-zero biases so every ReLU sees both signs.
  for (const ParameterView& p : mlp.parameters()) {
    if (p.shape.size() == 1) {
      for (size_t j = 0; j < p.count; ++j) p.value[j] = 0.1f * static_cast<float>(j % 3) - 0.1f;
    }
  }
  mlp.forward(data.batch());
  mlp.backward([](size_t) {});
  std::vector<std::vector<float>> analytic;
  for (const ParameterView& p : mlp.parameters()) analytic.emplace_back(p.grad, p.grad + p.count);
  const double h = 1e-3;
  double worst = 0;
  for (size_t i = 0; i < mlp.parameters().size(); ++i) {
    const ParameterView& p = mlp.parameters()[i];
    for (size_t j = 0; j < p.count; ++j) {
      const float saved = p.value[j];
      p.value[j] = static_cast<float>(saved + h);
      const double plus = mlp.forward(data.batch()).loss;
      p.value[j] = static_cast<float>(saved - h);
      const double minus = mlp.forward(data.batch()).loss;
      p.value[j] = saved;
      const double numeric = (plus - minus) / (2 * h);
      const double error = std::fabs(numeric - analytic[i][j]) / std::max(1e-2, std::fabs(numeric));
      worst = std::max(worst, error);
      EXPECT_LT(error, 2e-2) << p.name << "[" << j << "]: numeric " << numeric << " analytic "
                             << analytic[i][j];
    }
  }
  EXPECT_LT(worst, 2e-2);
}

TEST(Mlp, BackwardHandsGradientsOverInReverseRegistrationOrder) {
  Mlp mlp({4, 3, 3, 2}, 1);
  const Data data = random_labelled_data(3, 4, 2, 5);
  mlp.forward(data.batch());
  std::vector<size_t> order;
  // When i is handed over its gradient must already be final: compare with a second backward.
  std::vector<std::vector<float>> at_handover(mlp.parameters().size());
  mlp.backward([&](size_t i) {
    order.push_back(i);
    const ParameterView& p = mlp.parameters()[i];
    at_handover[i].assign(p.grad, p.grad + p.count);
  });
  EXPECT_EQ(order, (std::vector<size_t>{5, 4, 3, 2, 1, 0}));
  for (size_t i = 0; i < order.size(); ++i) {
    const ParameterView& p = mlp.parameters()[i];
    EXPECT_EQ(at_handover[i], std::vector<float>(p.grad, p.grad + p.count)) << p.name;
  }
}

TEST(Mlp, LearnsASeparableProblem) {
  // Label = which half of the inputs has the larger sum: 200 plain SGD steps learn it.
  Mlp mlp({8, 16, 2}, 9);
  SplitMix64 random(4);
  double first_loss = 0;
  double last_loss = 0;
  size_t last_correct = 0;
  for (int step = 0; step < 200; ++step) {
    Data data;
    for (int r = 0; r < 32; ++r) {
      double left = 0;
      double right = 0;
      for (int f = 0; f < 8; ++f) {
        const float v = static_cast<float>(random.uniform());
        (f < 4 ? left : right) += v;
        data.inputs.push_back(v);
      }
      data.labels.push_back(left > right ? 1 : 0);
    }
    const ForwardResult result = mlp.forward(data.batch());
    if (step == 0) first_loss = result.loss;
    last_loss = result.loss;
    last_correct = result.correct;
    mlp.backward([](size_t) {});
    for (const ParameterView& p : mlp.parameters()) {
      for (size_t j = 0; j < p.count; ++j) p.value[j] -= 0.2f * p.grad[j];
    }
  }
  EXPECT_LT(last_loss, first_loss * 0.5);
  EXPECT_GE(last_correct, 26u);
}

TEST(SoftmaxCrossEntropy, ClosedForm) {
  // Equal logits: loss = log(classes), probabilities 1/classes; argmax ties go to the first.
  std::vector<float> logits = {2, 2, 2, 2, 0, 1, 3, 2};
  const std::vector<int32_t> labels = {0, 2};
  size_t correct = 0;
  const double loss = softmax_cross_entropy(logits.data(), labels.data(), 2, 4, &correct);
  const double second = std::log(std::exp(0.0) + std::exp(1.0) + std::exp(3.0) + std::exp(2.0)) - 3;
  EXPECT_NEAR(loss, std::log(4.0) + second, 1e-6);
  EXPECT_EQ(correct, 2u);
  EXPECT_NEAR(logits[0], 0.25, 1e-7);
  double sum = 0;
  for (int j = 4; j < 8; ++j) sum += logits[j];
  EXPECT_NEAR(sum, 1.0, 1e-6);
  const std::vector<int32_t> bad = {0, 4};
  EXPECT_THROW(softmax_cross_entropy(logits.data(), bad.data(), 2, 4, &correct), Error);
}

TEST(Mlp, LayerSizesParse) {
  EXPECT_EQ(parse_layer_sizes("784,256,10"), (std::vector<size_t>{784, 256, 10}));
  EXPECT_THROW(parse_layer_sizes("784"), Error);
  EXPECT_THROW(parse_layer_sizes("784,,10"), Error);
  EXPECT_THROW(parse_layer_sizes("784,x,10"), Error);
  EXPECT_THROW(parse_layer_sizes("784,0,10"), Error);
  Mlp mlp({4, 2}, 1);
  const Data data = random_labelled_data(2, 3, 2, 1);
  EXPECT_THROW(mlp.forward(data.batch()), Error) << "3 features into a 4-input MLP";
}

// 65 layers of 1048576 x 1048576 weights: 2^46 floats, 256 TiB, more than any process's address
// space, so the allocation fails whatever the host (std::bad_alloc was all it said before).
TEST(Mlp, ParametersThatCannotBeAllocatedSayWhatTheyNeed) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer ends the process on an impossible allocation instead of "
                  "throwing std::bad_alloc";
#endif
  const std::vector<size_t> sizes(66, size_t{1} << 20);
  try {
    Mlp mlp(sizes, 1);
    FAIL() << "256 TiB of parameters were allocated";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(what.find("71,468,323,962,880 floats"), std::string::npos) << what;
    EXPECT_NE(what.find("GB"), std::string::npos) << what;
    EXPECT_NE(what.find("of memory"), std::string::npos) << what;
  }
}

TEST(Mlp, ParameterCountAndMemoryCheck) {
  EXPECT_EQ(mlp_parameter_count({784, 256, 10}), 784u * 256 + 256 + 256 * 10 + 10);
  EXPECT_NO_THROW(check_mlp_fits_in_memory({784, 256, 10}, 1));
  // 1,100,346,294,282 floats: values and gradients need 8802.8 GB.
  try {
    check_mlp_fits_in_memory({784, 1 << 20, 1 << 20, 10}, 1);
    FAIL() << "8.8 TB fit in this host's memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--layers 784,1048576,1048576,10"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ringd::model
