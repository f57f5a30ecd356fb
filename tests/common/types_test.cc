// DataType / ReduceOp names, sizes, parsing and which (dtype, op) pairs are defined.
#include "ringd/types.h"

#include <gtest/gtest.h>

#include <string>

#include "ringd/error.h"

namespace ringd {
namespace {

TEST(DataTypes, SizesAndFloatness) {
  EXPECT_EQ(dtype_size(DataType::kFloat32), 4u);
  EXPECT_EQ(dtype_size(DataType::kFloat64), 8u);
  EXPECT_EQ(dtype_size(DataType::kFloat16), 2u);
  EXPECT_EQ(dtype_size(DataType::kBFloat16), 2u);
  EXPECT_EQ(dtype_size(DataType::kInt32), 4u);
  EXPECT_EQ(dtype_size(DataType::kInt64), 8u);
  EXPECT_EQ(dtype_size(DataType::kUInt8), 1u);
  int floats = 0;
  for (DataType t : kAllDataTypes) floats += dtype_is_float(t);
  EXPECT_EQ(floats, 4);
  EXPECT_FALSE(dtype_is_float(DataType::kInt64));
  EXPECT_TRUE(dtype_is_float(DataType::kBFloat16));
}

TEST(DataTypes, NameParseRoundTrip) {
  for (DataType t : kAllDataTypes) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t) << dtype_name(t);
  }
  EXPECT_STREQ(dtype_name(DataType::kFloat32), "float");
  EXPECT_STREQ(dtype_name(DataType::kBFloat16), "bfloat16");
  for (ReduceOp op : kAllReduceOps) {
    EXPECT_EQ(parse_reduce_op(reduce_op_name(op)), op) << reduce_op_name(op);
  }
}

TEST(DataTypes, AliasesAndCase) {
  EXPECT_EQ(parse_dtype("f32"), DataType::kFloat32);
  EXPECT_EQ(parse_dtype("FP64"), DataType::kFloat64);
  EXPECT_EQ(parse_dtype("fp16"), DataType::kFloat16);
  EXPECT_EQ(parse_dtype("BF16"), DataType::kBFloat16);
  EXPECT_EQ(parse_dtype("i32"), DataType::kInt32);
  EXPECT_EQ(parse_dtype("int64"), DataType::kInt64);
  EXPECT_EQ(parse_dtype("u8"), DataType::kUInt8);
  EXPECT_EQ(parse_reduce_op("MEAN"), ReduceOp::kAvg);
  EXPECT_EQ(parse_reduce_op("product"), ReduceOp::kProd);
}

// The message must say what was wrong and list every valid name, so a user can fix the flag.
template <class Parse>
void expect_parse_error(Parse parse, const std::string& text,
                        const std::vector<std::string>& valid) {
  try {
    parse(text);
    FAIL() << "'" << text << "' parsed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    const std::string message = e.what();
    EXPECT_NE(message.find("'" + text + "'"), std::string::npos) << message;
    for (const std::string& name : valid)
      EXPECT_NE(message.find(name), std::string::npos) << message;
  }
}

TEST(DataTypes, ParseErrorsListValidNames) {
  std::vector<std::string> dtypes, ops;
  for (DataType t : kAllDataTypes) dtypes.push_back(dtype_name(t));
  for (ReduceOp op : kAllReduceOps) ops.push_back(reduce_op_name(op));
  for (const char* bad : {"float128", "", "int 32", "f32 "}) {
    expect_parse_error([](const std::string& s) { return parse_dtype(s); }, bad, dtypes);
  }
  for (const char* bad : {"median", "", "summ"}) {
    expect_parse_error([](const std::string& s) { return parse_reduce_op(s); }, bad, ops);
  }
}

TEST(DataTypes, AvgIsForFloatsOnly) {
  for (DataType t : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      const bool want = op != ReduceOp::kAvg || dtype_is_float(t);
      EXPECT_EQ(reduce_op_supported(t, op), want) << dtype_name(t) << " " << reduce_op_name(op);
    }
  }
  EXPECT_FALSE(reduce_op_supported(DataType::kInt32, ReduceOp::kAvg));
  EXPECT_TRUE(reduce_op_supported(DataType::kBFloat16, ReduceOp::kAvg));
  EXPECT_TRUE(reduce_op_supported(DataType::kUInt8, ReduceOp::kProd));
}

}  // namespace
}  // namespace ringd
