#include "tf_bridge.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "errors.h"
#include "ringd/error.h"
#include "ringd_tf_bridge.h"

namespace nb = nanobind;

namespace ringd::python {
namespace {

struct Pending {
  Handle handle;
  void* keepalive = nullptr;
};

struct BridgeState {
  std::mutex mutex;
  Engine* engine = nullptr;  // the attached job's; null before init() and after shutdown()
  std::unordered_map<int64_t, Pending> pending;
  int64_t next_id = 1;
};

BridgeState& state() {
  static auto* bridge = new BridgeState;  // never destroyed: ops may run during interpreter exit
  return *bridge;
}

RingdTfBridge g_table{};

int fail(const Error& e, char* error, size_t error_size) {
  const std::string text =
      std::string("[ringd:") + error_code_python_name(e.code()) + "] " + e.what();
  if (error_size > 0) {
    const size_t n = std::min(text.size(), error_size - 1);
    std::memcpy(error, text.data(), n);
    error[n] = '\0';
  }
  return 1 + static_cast<int>(e.code());
}

// Runs `body`, turning what it throws into the bridge's return value.
template <typename Body>
int guarded(char* error, size_t error_size, Body&& body) {
  try {
    body();
    return 0;
  } catch (const Error& e) {
    return fail(e, error, error_size);
  } catch (const std::exception& e) {
    return fail(Error(ErrorCode::kInternal, e.what()), error, error_size);
  }
}

Handle handle_of(int64_t id) {
  BridgeState& bridge = state();
  std::lock_guard lock(bridge.mutex);
  auto it = bridge.pending.find(id);
  if (it == bridge.pending.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                "ringd: TensorFlow op handle " + std::to_string(id) +
                    " is unknown: its job was shut down after it was submitted, or it was waited "
                    "for already");
  }
  return it->second.handle;
}

CollectiveKind kind_of(int kind) {
  switch (kind) {
    case RINGD_TF_ALLREDUCE: return CollectiveKind::kAllreduce;
    case RINGD_TF_BROADCAST: return CollectiveKind::kBroadcast;
    case RINGD_TF_ALLGATHER: return CollectiveKind::kAllgather;
    default: break;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "ringd: TensorFlow op of unknown kind " + std::to_string(kind));
}

int submit(const RingdTfOptions* options, const RingdTfRequest* requests, int count, int64_t* ids,
           char* error, size_t error_size) {
  return guarded(error, error_size, [&] {
    std::vector<Submission> submissions;
    submissions.reserve(static_cast<size_t>(count));
    const CollectiveKind kind = kind_of(options->kind);
    for (int i = 0; i < count; ++i) {
      const RingdTfRequest& request = requests[i];
      Submission s;
      s.name.assign(request.name, request.name_size);
      s.kind = kind;
      s.tensor.data = request.data;
      s.tensor.dtype = parse_dtype(request.dtype);
      s.tensor.shape.assign(request.shape, request.shape + request.ndims);
      if (kind == CollectiveKind::kAllreduce) {
        s.op = parse_reduce_op(options->op);
        if (options->compression[0] != '\0')
          s.compression = parse_compression(options->compression);
      }
      s.root = options->root;
      submissions.push_back(std::move(s));
    }
    const std::string group(options->group, options->group_size);
    BridgeState& bridge = state();
    // Under the lock: a shutdown cannot take the engine away between the check and the submission.
    std::lock_guard lock(bridge.mutex);
    if (bridge.engine == nullptr) {
      throw Error(ErrorCode::kInvalidArgument,
                  "ringd: no job is open in this process (call ringd.tensorflow.init() on every "
                  "rank first, and not after shutdown())");
    }
    std::vector<Handle> handles;
    if (group.empty()) {
      for (Submission& s : submissions) handles.push_back(bridge.engine->submit(std::move(s)));
    } else {
      handles = bridge.engine->submit_group(group, std::move(submissions));
    }
    for (size_t i = 0; i < handles.size(); ++i) {
      const int64_t id = bridge.next_id++;
      bridge.pending.emplace(id, Pending{std::move(handles[i]), requests[i].keepalive});
      ids[i] = id;
    }
  });
}

int wait(int64_t id, char* error, size_t error_size) {
  return guarded(error, error_size, [&] {
    const Handle handle = handle_of(id);
    try {
      handle.wait();
    } catch (const Error& e) {
      // An engine-wide failure names the engine's own operation: say which tensor it took down.
      const std::string quoted = "'" + handle.name() + "'";
      if (std::string_view(e.what()).find(quoted) != std::string_view::npos) throw;
      throw Error(e.code(), "tensor " + quoted + ": " + e.what());
    }
  });
}

int output_shape(int64_t id, int64_t* shape, int max_dims, int* ndims, char* error,
                 size_t error_size) {
  return guarded(error, error_size, [&] {
    const std::vector<int64_t>& dims = handle_of(id).output_shape();
    if (static_cast<int>(dims.size()) > max_dims) {
      throw Error(ErrorCode::kInternal,
                  "ringd: allgather result of " + std::to_string(dims.size()) + " dimensions");
    }
    std::copy(dims.begin(), dims.end(), shape);
    *ndims = static_cast<int>(dims.size());
  });
}

int copy_output(int64_t id, void* destination, size_t bytes, char* error, size_t error_size) {
  return guarded(error, error_size, [&] {
    const std::vector<uint8_t>& data = handle_of(id).output();
    if (data.size() != bytes) {
      throw Error(ErrorCode::kInternal, "ringd: allgather result of " +
                                            std::to_string(data.size()) + " bytes, expected " +
                                            std::to_string(bytes));
    }
    if (bytes > 0) std::memcpy(destination, data.data(), bytes);
  });
}

void release(int64_t id) {
  void* keepalive = nullptr;
  {
    BridgeState& bridge = state();
    std::lock_guard lock(bridge.mutex);
    auto it = bridge.pending.find(id);
    if (it == bridge.pending.end()) return;
    keepalive = it->second.keepalive;
    bridge.pending.erase(it);
  }
  if (keepalive != nullptr && g_table.release_keepalive != nullptr)
    g_table.release_keepalive(keepalive);
}

}  // namespace

void tf_bridge_attach(Engine* engine) {
  BridgeState& bridge = state();
  std::lock_guard lock(bridge.mutex);
  bridge.engine = engine;
}

void tf_bridge_detach(Engine* engine) {
  BridgeState& bridge = state();
  std::lock_guard lock(bridge.mutex);
  if (bridge.engine == engine) bridge.engine = nullptr;
}

void tf_bridge_forget_all() {
  std::unordered_map<int64_t, Pending> pending;
  {
    BridgeState& bridge = state();
    std::lock_guard lock(bridge.mutex);
    // Only the stopped engine's: a later job's ids stay (each id's handle is done once its
    // engine has stopped).
    for (auto it = bridge.pending.begin(); it != bridge.pending.end();) {
      if (it->second.handle.done()) {
        pending.insert(bridge.pending.extract(it++));
      } else {
        ++it;
      }
    }
  }
  if (g_table.release_keepalive == nullptr) return;
  for (auto& [id, entry] : pending) {
    if (entry.keepalive != nullptr) g_table.release_keepalive(entry.keepalive);
  }
}

void bind_tf_bridge(nb::module_& module) {
  g_table.version = RINGD_TF_BRIDGE_VERSION;
  g_table.submit = &submit;
  g_table.wait = &wait;
  g_table.output_shape = &output_shape;
  g_table.copy_output = &copy_output;
  g_table.release = &release;
  module.def(
      "_tf_bridge_address", [] { return reinterpret_cast<uintptr_t>(&g_table); },
      "The address of the C table ringd's TensorFlow ops call (ringd_tf_bridge.h).");
}

}  // namespace ringd::python
