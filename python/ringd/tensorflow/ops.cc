// ringd's TensorFlow ops, written against TensorFlow's C API only (tensorflow/c/kernels.h, ops.h):
// the ABI TensorFlow keeps stable across releases, so this library survives TF upgrades that a
// C++ custom op (Horovod's) would not. ringd.tensorflow compiles it on first import against the
// installed TensorFlow's headers and caches it (_build.py); it reaches ringd's engine through the
// C table of ringd_tf_bridge.h, which ringd._core hands over (ringd_tf_connect).
//
//   RingdSubmit(x: N tensors, names: string[N + 1]) -> (y: N tensors, handles: int64[N])
//     Submits every x[i] to the engine under names[i] (names[N]: the group, "" for none) and
//     returns at once. y[i] is the buffer the engine writes (x[i]'s own when TensorFlow lets it go,
//     else a copy); allgather leaves x as it is (y[i] = x[i]).
//   RingdWait(y: N tensors, handles: int64[N]) -> z: N tensors
//     Blocks until every handle is done: z[i] = y[i] (allreduce, broadcast: no copy) or the
//     gathered tensor (allgather). Errors carry ringd's message behind "[ringd:<code>] ".
//
// Both are synchronous kernels. The Python side puts every submission of a step before its waits,
// so a wait blocking one of TensorFlow's threads never holds back a submission (the engine's
// overlap comes from submitting each tensor as soon as it exists). Dtypes the engine does not
// reduce are moved by broadcast and allgather as their bytes (uint8 rows).
#include "tensorflow/c/ops.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ringd_tf_bridge.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_datatype.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"
#include "tensorflow/c/tf_tstring.h"  // TF_TString_Get*: inline (ctstring.h), no exported symbol

namespace {

RingdTfBridge* g_bridge = nullptr;

constexpr size_t kErrorSize = 4096;

// The ringd dtype a TF dtype travels as; nullptr: none (only its bytes can move).
const char* ringd_dtype(TF_DataType dtype) {
  switch (dtype) {
    case TF_FLOAT: return "float32";
    case TF_DOUBLE: return "float64";
    case TF_HALF: return "float16";
    case TF_BFLOAT16: return "bfloat16";
    case TF_INT32: return "int32";
    case TF_INT64: return "int64";
    case TF_UINT8: return "uint8";
    default: return nullptr;
  }
}

TF_Code tf_code(int bridge_code) {
  // 1 + ringd::ErrorCode (include/ringd/error.h), in that enum's order.
  switch (bridge_code - 1) {
    case 0: return TF_INVALID_ARGUMENT;     // kInvalidArgument
    case 1: return TF_DEADLINE_EXCEEDED;    // kTimeout
    case 2: return TF_UNAVAILABLE;          // kPeerLost
    case 3: return TF_DATA_LOSS;            // kProtocol
    case 4: return TF_PERMISSION_DENIED;    // kAuth
    case 5: return TF_FAILED_PRECONDITION;  // kMismatch
    case 6: return TF_INTERNAL;             // kIo
    case 7: return TF_UNIMPLEMENTED;        // kUnavailable
    case 9: return TF_ABORTED;              // kDeadlock
    default: return TF_INTERNAL;
  }
}

struct Attrs {
  int kind = RINGD_TF_ALLREDUCE;
  std::string op;
  int root = 0;
  std::string compression;
};

std::string string_attr(TF_OpKernelConstruction* ctx, const char* name, TF_Status* status) {
  int32_t list_size = 0;
  int32_t total_size = 0;
  TF_OpKernelConstruction_GetAttrSize(ctx, name, &list_size, &total_size, status);
  if (TF_GetCode(status) != TF_OK) return {};
  std::string value(static_cast<size_t>(total_size), '\0');
  TF_OpKernelConstruction_GetAttrString(ctx, name, value.data(), value.size(), status);
  return value;
}

void* create_kernel(TF_OpKernelConstruction* ctx) {
  auto* attrs = new Attrs;
  TF_Status* status = TF_NewStatus();
  int32_t value = 0;
  TF_OpKernelConstruction_GetAttrInt32(ctx, "kind", &value, status);
  attrs->kind = value;
  if (TF_GetCode(status) == TF_OK && TF_OpKernelConstruction_HasAttr(ctx, "root", status)) {
    TF_OpKernelConstruction_GetAttrInt32(ctx, "root", &value, status);
    attrs->root = value;
  }
  if (TF_GetCode(status) == TF_OK && TF_OpKernelConstruction_HasAttr(ctx, "op", status)) {
    attrs->op = string_attr(ctx, "op", status);
  }
  if (TF_GetCode(status) == TF_OK && TF_OpKernelConstruction_HasAttr(ctx, "compression", status)) {
    attrs->compression = string_attr(ctx, "compression", status);
  }
  if (TF_GetCode(status) != TF_OK) TF_OpKernelConstruction_Failure(ctx, status);
  TF_DeleteStatus(status);
  return attrs;
}

void delete_kernel(void* kernel) { delete static_cast<Attrs*>(kernel); }

void fail(TF_OpKernelContext* ctx, TF_Code code, const std::string& message) {
  TF_Status* status = TF_NewStatus();
  TF_SetStatus(status, code, message.c_str());
  TF_OpKernelContext_Failure(ctx, status);
  TF_DeleteStatus(status);
}

void fail_bridge(TF_OpKernelContext* ctx, int code, const char* error) {
  fail(ctx, tf_code(code), error);
}

bool connected(TF_OpKernelContext* ctx) {
  if (g_bridge != nullptr) return true;
  fail(ctx, TF_FAILED_PRECONDITION,
       "[ringd:invalid_argument] ringd's TensorFlow ops are not connected to ringd._core; load "
       "them through ringd.tensorflow, not tf.load_op_library");
  return false;
}

std::vector<int64_t> dims_of(const TF_Tensor* tensor) {
  std::vector<int64_t> dims(static_cast<size_t>(TF_NumDims(tensor)));
  for (size_t d = 0; d < dims.size(); ++d) dims[d] = TF_Dim(tensor, static_cast<int>(d));
  return dims;
}

// One tensor as the engine sees it: its dtype, or its bytes as uint8 rows ([rows, row bytes]; a
// scalar: [bytes]) where the engine has no such dtype (broadcast and allgather only).
struct EngineView {
  const char* dtype = nullptr;
  std::vector<int64_t> shape;
};

bool engine_view(const TF_Tensor* tensor, int kind, EngineView* view, std::string* error) {
  const TF_DataType dtype = TF_TensorType(tensor);
  view->shape = dims_of(tensor);
  view->dtype = ringd_dtype(dtype);
  if (view->dtype != nullptr) return true;
  const size_t element = TF_DataTypeSize(dtype);
  if (kind == RINGD_TF_ALLREDUCE || element == 0) {
    *error = "TensorFlow dtype " + std::to_string(static_cast<int>(dtype)) +
             (kind == RINGD_TF_ALLREDUCE ? " cannot be reduced by ringd"
                                         : " has no fixed size and cannot be moved by ringd");
    return false;
  }
  view->dtype = "uint8";
  if (view->shape.empty()) {
    view->shape = {static_cast<int64_t>(element)};
  } else {
    int64_t row = static_cast<int64_t>(element);
    for (size_t d = 1; d < view->shape.size(); ++d) row *= view->shape[d];
    view->shape = {view->shape[0], row};
  }
  return true;
}

void submit_compute(void* kernel, TF_OpKernelContext* ctx) {
  if (!connected(ctx)) return;
  const Attrs& attrs = *static_cast<Attrs*>(kernel);
  const int count = TF_NumInputs(ctx) - 1;
  TF_Status* status = TF_NewStatus();
  TF_Tensor* names = nullptr;
  std::vector<TF_Tensor*> buffers;  // one reference each: the keepalives
  auto cleanup = [&] {
    for (TF_Tensor* buffer : buffers) TF_DeleteTensor(buffer);
    if (names != nullptr) TF_DeleteTensor(names);
    TF_DeleteStatus(status);
  };

  TF_GetInput(ctx, count, &names, status);
  if (TF_GetCode(status) != TF_OK || TF_TensorElementCount(names) != count + 1) {
    fail(ctx, TF_INVALID_ARGUMENT,
         "[ringd:invalid_argument] RingdSubmit: names must hold " + std::to_string(count + 1) +
             " strings");
    cleanup();
    return;
  }
  const auto* name_strings = static_cast<const TF_TString*>(TF_TensorData(names));

  std::vector<EngineView> views(static_cast<size_t>(count));
  std::vector<RingdTfRequest> requests(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    TF_Tensor* input = nullptr;
    TF_GetInput(ctx, i, &input, status);
    if (TF_GetCode(status) != TF_OK) {
      TF_OpKernelContext_Failure(ctx, status);
      cleanup();
      return;
    }
    std::string error;
    if (!engine_view(input, attrs.kind, &views[i], &error)) {
      const char* name = TF_TString_GetDataPointer(&name_strings[i]);
      fail(ctx, TF_INVALID_ARGUMENT,
           "[ringd:invalid_argument] ringd: tensor '" +
               std::string(name, TF_TString_GetSize(&name_strings[i])) + "': " + error);
      TF_DeleteTensor(input);
      cleanup();
      return;
    }
    TF_Tensor* buffer = input;
    if (attrs.kind != RINGD_TF_ALLGATHER) {
      // The engine writes the result in place: into x[i]'s own buffer when nothing else holds it.
      const std::vector<int64_t> dims = dims_of(input);
      int forwarded = -1;
      buffer = TF_ForwardInputOrAllocateOutput(ctx, &i, 1, i, dims.data(),
                                               static_cast<int>(dims.size()), &forwarded, status);
      if (TF_GetCode(status) != TF_OK) {
        TF_OpKernelContext_Failure(ctx, status);
        TF_DeleteTensor(input);
        cleanup();
        return;
      }
      if (forwarded != i && TF_TensorByteSize(input) > 0) {
        std::memcpy(TF_TensorData(buffer), TF_TensorData(input), TF_TensorByteSize(input));
      }
      TF_DeleteTensor(input);
    } else {
      TF_SetOutput(ctx, i, input, status);
    }
    buffers.push_back(buffer);
    RingdTfRequest& request = requests[i];
    request.name = TF_TString_GetDataPointer(&name_strings[i]);
    request.name_size = TF_TString_GetSize(&name_strings[i]);
    request.dtype = views[i].dtype;
    request.data = TF_TensorData(buffer);
    request.ndims = static_cast<int>(views[i].shape.size());
    request.shape = views[i].shape.data();
    request.keepalive = buffer;
  }

  const int64_t ids_dims[1] = {count};
  TF_Tensor* ids = TF_AllocateOutput(ctx, count, TF_INT64, ids_dims, 1,
                                     sizeof(int64_t) * static_cast<size_t>(count), status);
  if (TF_GetCode(status) != TF_OK) {
    TF_OpKernelContext_Failure(ctx, status);
    cleanup();
    return;
  }
  RingdTfOptions options{};
  options.kind = attrs.kind;
  options.op = attrs.op.c_str();
  options.root = attrs.root;
  options.compression = attrs.compression.c_str();
  options.group = TF_TString_GetDataPointer(&name_strings[count]);
  options.group_size = TF_TString_GetSize(&name_strings[count]);
  char error[kErrorSize];
  const int code = g_bridge->submit(&options, requests.data(), count,
                                    static_cast<int64_t*>(TF_TensorData(ids)), error, sizeof error);
  TF_DeleteTensor(ids);
  // On success the bridge holds the buffers (and has copied the names).
  if (code == 0) {
    buffers.clear();
  } else {
    fail_bridge(ctx, code, error);
  }
  cleanup();
}

void wait_compute(void* kernel, TF_OpKernelContext* ctx) {
  if (!connected(ctx)) return;
  const Attrs& attrs = *static_cast<Attrs*>(kernel);
  const int count = TF_NumInputs(ctx) - 1;
  TF_Status* status = TF_NewStatus();
  TF_Tensor* handles = nullptr;
  TF_GetInput(ctx, count, &handles, status);
  if (TF_GetCode(status) != TF_OK || TF_TensorElementCount(handles) != count) {
    fail(ctx, TF_INVALID_ARGUMENT,
         "[ringd:invalid_argument] RingdWait: handles must hold " + std::to_string(count) + " ids");
    if (handles != nullptr) TF_DeleteTensor(handles);
    TF_DeleteStatus(status);
    return;
  }
  const auto* ids = static_cast<const int64_t*>(TF_TensorData(handles));
  // Every handle, even after one failed: the engine may still write the others' buffers.
  int first_code = 0;
  std::string first_error;
  char error[kErrorSize];
  for (int i = 0; i < count; ++i) {
    const int code = g_bridge->wait(ids[i], error, sizeof error);
    if (code != 0 && first_code == 0) {
      first_code = code;
      first_error = error;
    }
  }
  for (int i = 0; i < count && first_code == 0; ++i) {
    TF_Tensor* input = nullptr;
    TF_GetInput(ctx, i, &input, status);
    if (TF_GetCode(status) != TF_OK) break;
    if (attrs.kind != RINGD_TF_ALLGATHER) {
      TF_SetOutput(ctx, i, input, status);
      TF_DeleteTensor(input);
      continue;
    }
    int64_t gathered[32];
    int ndims = 0;
    int code = g_bridge->output_shape(ids[i], gathered, 32, &ndims, error, sizeof error);
    if (code == 0) {
      std::vector<int64_t> dims = dims_of(input);  // Python gathers scalars as [1]
      if (dims.empty()) dims.push_back(1);
      dims[0] = gathered[0];
      size_t bytes = TF_DataTypeSize(TF_TensorType(input));
      for (int64_t extent : dims) bytes *= static_cast<size_t>(extent);
      TF_Tensor* output = TF_AllocateOutput(ctx, i, TF_TensorType(input), dims.data(),
                                            static_cast<int>(dims.size()), bytes, status);
      if (TF_GetCode(status) == TF_OK) {
        code = g_bridge->copy_output(ids[i], TF_TensorData(output), bytes, error, sizeof error);
        TF_DeleteTensor(output);
      }
    }
    TF_DeleteTensor(input);
    if (code != 0) {
      first_code = code;
      first_error = error;
    }
    if (TF_GetCode(status) != TF_OK) break;
  }
  for (int i = 0; i < count; ++i) g_bridge->release(ids[i]);
  TF_DeleteTensor(handles);
  if (first_code != 0) {
    fail_bridge(ctx, first_code, first_error.c_str());
  } else if (TF_GetCode(status) != TF_OK) {
    TF_OpKernelContext_Failure(ctx, status);
  }
  TF_DeleteStatus(status);
}

// Outputs 0..N-1 shaped like inputs 0..N-1; output N (RingdSubmit's handles) a vector.
void shape_like_inputs(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  const int64_t count = TF_ShapeInferenceContextNumInputs(ctx) - 1;
  TF_ShapeHandle* shape = TF_NewShapeHandle();
  for (int64_t i = 0; i < count && TF_GetCode(status) == TF_OK; ++i) {
    TF_ShapeInferenceContextGetInput(ctx, static_cast<int>(i), shape, status);
    if (TF_GetCode(status) == TF_OK) {
      TF_ShapeInferenceContextSetOutput(ctx, static_cast<int>(i), shape, status);
    }
  }
  TF_DeleteShapeHandle(shape);
}

void submit_shape(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  shape_like_inputs(ctx, status);
  if (TF_GetCode(status) != TF_OK) return;
  const int64_t count = TF_ShapeInferenceContextNumInputs(ctx) - 1;
  TF_ShapeHandle* vector = TF_ShapeInferenceContextVectorFromSize(ctx, count);
  TF_ShapeInferenceContextSetOutput(ctx, static_cast<int>(count), vector, status);
  TF_DeleteShapeHandle(vector);
}

void register_op(const char* name, bool submit, TF_Status* status) {
  TF_OpDefinitionBuilder* op = TF_NewOpDefinitionBuilder(name);
  TF_OpDefinitionBuilderAddAttr(op, "T: list(type) >= 1");
  TF_OpDefinitionBuilderAddAttr(op, "kind: int");
  if (submit) {
    TF_OpDefinitionBuilderAddAttr(op, "op: string = 'sum'");
    TF_OpDefinitionBuilderAddAttr(op, "root: int = 0");
    TF_OpDefinitionBuilderAddAttr(op, "compression: string = ''");
    TF_OpDefinitionBuilderAddInput(op, "x: T");
    TF_OpDefinitionBuilderAddInput(op, "names: string");
    TF_OpDefinitionBuilderAddOutput(op, "y: T");
    TF_OpDefinitionBuilderAddOutput(op, "handles: int64");
    TF_OpDefinitionBuilderSetShapeInferenceFunction(op, &submit_shape);
  } else {
    TF_OpDefinitionBuilderAddInput(op, "y: T");
    TF_OpDefinitionBuilderAddInput(op, "handles: int64");
    TF_OpDefinitionBuilderAddOutput(op, "z: T");
    // Allgather's first dimension is known only once it ran: Python sets what is known.
    TF_OpDefinitionBuilderSetShapeInferenceFunction(op, &TF_ShapeInferenceContextSetUnknownShape);
  }
  TF_OpDefinitionBuilderSetIsStateful(op, true);
  TF_RegisterOpDefinition(op, status);
  if (TF_GetCode(status) != TF_OK) return;
  TF_KernelBuilder* kernel = TF_NewKernelBuilder(
      name, "CPU", &create_kernel, submit ? &submit_compute : &wait_compute, &delete_kernel);
  // The names and the handles are host data wherever the op runs.
  TF_RegisterKernelBuilder(name, kernel, status);
}

struct Registration {
  Registration() {
    TF_Status* status = TF_NewStatus();
    register_op("RingdSubmit", true, status);
    if (TF_GetCode(status) == TF_OK) register_op("RingdWait", false, status);
    TF_DeleteStatus(status);
  }
} registration;

void delete_tensor(void* tensor) { TF_DeleteTensor(static_cast<TF_Tensor*>(tensor)); }

}  // namespace

// Called once by ringd.tensorflow (ctypes) with ringd._core's table; 0 on success, else the
// table's version (which this library does not speak).
extern "C" __attribute__((visibility("default"))) int ringd_tf_connect(void* table) {
  auto* bridge = static_cast<RingdTfBridge*>(table);
  if (bridge->version != RINGD_TF_BRIDGE_VERSION) return bridge->version;
  bridge->release_keepalive = &delete_tensor;
  g_bridge = bridge;
  return 0;
}
