// Element types and reduction operators understood by every collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ringd {

enum class DataType : uint8_t { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };

enum class ReduceOp : uint8_t { kSum, kAvg, kMin, kMax, kProd };

inline constexpr DataType kAllDataTypes[] = {
    DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
    DataType::kInt32,   DataType::kInt64,   DataType::kUInt8};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin,
                                             ReduceOp::kMax, ReduceOp::kProd};

size_t dtype_size(DataType dtype);
bool dtype_is_float(DataType dtype);
// Short names as used on the command line and in nccl-tests' tables: float, double, half, bfloat16,
// int32, int64, uint8.
const char* dtype_name(DataType dtype);
const char* reduce_op_name(ReduceOp op);
// Accept the short names above plus common aliases (f32, fp16, bf16, i32, u8, ...); throw
// ringd::Error(kInvalidArgument) listing the valid names otherwise.
DataType parse_dtype(std::string_view text);
ReduceOp parse_reduce_op(std::string_view text);
// kAvg is defined for floating-point types only.
bool reduce_op_supported(DataType dtype, ReduceOp op);

}  // namespace ringd
