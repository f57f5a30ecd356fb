#include "ringd/types.h"

#include "common/text.h"
#include "ringd/error.h"

namespace ringd {

size_t dtype_size(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kUInt8: return 1;
  }
  return 0;
}

bool dtype_is_float(DataType dtype) {
  return dtype == DataType::kFloat32 || dtype == DataType::kFloat64 ||
         dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

const char* dtype_name(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return "float";
    case DataType::kFloat64: return "double";
    case DataType::kFloat16: return "half";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt8: return "uint8";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProd: return "prod";
  }
  return "?";
}

DataType parse_dtype(std::string_view text) {
  const std::string t = lower_case(text);
  if (t == "float" || t == "f32" || t == "float32" || t == "fp32") return DataType::kFloat32;
  if (t == "double" || t == "f64" || t == "float64" || t == "fp64") return DataType::kFloat64;
  if (t == "half" || t == "f16" || t == "float16" || t == "fp16") return DataType::kFloat16;
  if (t == "bfloat16" || t == "bf16") return DataType::kBFloat16;
  if (t == "int32" || t == "i32" || t == "int") return DataType::kInt32;
  if (t == "int64" || t == "i64") return DataType::kInt64;
  if (t == "uint8" || t == "u8" || t == "byte") return DataType::kUInt8;
  RINGD_THROW(kInvalidArgument, "unknown data type '"
                                    << text
                                    << "'; valid: float double half bfloat16 int32 int64 uint8");
}

ReduceOp parse_reduce_op(std::string_view text) {
  const std::string t = lower_case(text);
  if (t == "sum") return ReduceOp::kSum;
  if (t == "avg" || t == "mean") return ReduceOp::kAvg;
  if (t == "min") return ReduceOp::kMin;
  if (t == "max") return ReduceOp::kMax;
  if (t == "prod" || t == "product") return ReduceOp::kProd;
  RINGD_THROW(kInvalidArgument, "unknown reduce op '" << text << "'; valid: sum avg min max prod");
}

bool reduce_op_supported(DataType dtype, ReduceOp op) {
  return op != ReduceOp::kAvg || dtype_is_float(dtype);
}

}  // namespace ringd
