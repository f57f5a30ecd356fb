#include "device/cuda/nccl_types.h"

namespace ringd {

// ncclBfloat16 and ncclAvg: NCCL 2.10.
#define RINGD_NCCL_HAS_BF16_AND_AVG (NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0))

ncclDataType_t nccl_data_type(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16:
#if RINGD_NCCL_HAS_BF16_AND_AVG
      return ncclBfloat16;
#else
      RINGD_THROW(kUnavailable,
                  "the NCCL local group cannot reduce bfloat16: this ringd was built "
                  "against NCCL "
                      << NCCL_VERSION_CODE << ", which has no ncclBfloat16 (NCCL >= 2.10 has)");
#endif
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kUInt8: return ncclUint8;
  }
  RINGD_THROW(kInvalidArgument,
              "the NCCL local group has no NCCL type for dtype " << static_cast<int>(dtype));
}

ncclRedOp_t nccl_reduce_op(ReduceOp op, DataType dtype) {
  RINGD_CHECK_ARG(reduce_op_supported(dtype, op), "nccl local group: op "
                                                      << reduce_op_name(op)
                                                      << " is not defined for " << dtype_name(dtype)
                                                      << "; use sum and divide, or a float type");
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kProd: return ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kAvg:
#if RINGD_NCCL_HAS_BF16_AND_AVG
      return ncclAvg;
#else
      RINGD_THROW(kUnavailable,
                  "the NCCL local group cannot average: this ringd was built against "
                  "NCCL "
                      << NCCL_VERSION_CODE
                      << ", which has no ncclAvg (NCCL >= 2.10 has); pass sum "
                         "and scale, as the hierarchical collectives do");
#endif
  }
  RINGD_THROW(kInvalidArgument,
              "the NCCL local group has no NCCL op for op " << static_cast<int>(op));
}

ErrorCode nccl_error_code(ncclResult_t result) {
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage: return ErrorCode::kInvalidArgument;
    case ncclUnhandledCudaError:
    case ncclSystemError: return ErrorCode::kIo;
    case ncclRemoteError: return ErrorCode::kPeerLost;
    default: return ErrorCode::kInternal;
  }
}

std::string nccl_failure(const char* call, ncclResult_t result) {
  std::string message = std::string(call) + " failed: " + ncclGetErrorString(result);
  const char* detail = ncclGetLastError(nullptr);
  if (detail != nullptr && detail[0] != '\0') message += std::string(" (") + detail + ")";
  if (result == ncclInvalidArgument || result == ncclInvalidUsage) {
    message += "; check that every buffer is device memory of its own device";
  } else if (result == ncclUnhandledCudaError || result == ncclSystemError) {
    message += "; NCCL_DEBUG=WARN shows NCCL's own account";
  }
  return message;
}

}  // namespace ringd
