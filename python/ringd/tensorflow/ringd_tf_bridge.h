/* The C interface between ringd's TensorFlow ops (ops.cc, compiled against the installed
 * TensorFlow's C API when ringd.tensorflow is first imported) and the extension ringd._core, which
 * holds the job and its fusion engine (python/src/tf_bridge.cc). Plain C on both sides: the op
 * library depends on neither ringd's C++ ABI nor TensorFlow's, only on TensorFlow's stable C API
 * and on this struct, which ringd._core hands over by address (ringd_tf_connect).
 *
 * One submitted tensor is an id (> 0). The op library keeps the tensor's buffer alive through
 * `keepalive` until the bridge calls `release_keepalive(keepalive)`: when the id is released
 * (after its wait) or, for ids whose wait never comes (a step that failed between submission and
 * wait), when the job shuts down, after the engine has stopped writing.
 */
#ifndef RINGD_TF_BRIDGE_H_
#define RINGD_TF_BRIDGE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RINGD_TF_BRIDGE_VERSION 1

enum RingdTfKind { RINGD_TF_ALLREDUCE = 0, RINGD_TF_BROADCAST = 1, RINGD_TF_ALLGATHER = 2 };

typedef struct RingdTfRequest {
  const char* name; /* the engine's tensor name (the same on every rank) */
  size_t name_size;
  const char* dtype; /* ringd's dtype name: float32 float64 float16 bfloat16 int32 int64 uint8 */
  void* data;        /* the tensor's memory: read, and written in place (not for allgather) */
  int ndims;
  const int64_t* shape;
  void* keepalive; /* the op library's reference to the buffer */
} RingdTfRequest;

typedef struct RingdTfOptions {
  int kind;                /* RingdTfKind */
  const char* op;          /* allreduce: sum avg min max prod */
  int root;                /* broadcast */
  const char* compression; /* allreduce of float32: none fp16 bf16; "" = the job's default */
  const char* group;       /* "": each tensor alone; else one group (all or nothing) */
  size_t group_size;
} RingdTfOptions;

/* Return values of the functions below: 0, or 1 + ringd::ErrorCode, with the message (and the
 * code's name, "peer_lost" ...) in `error` (NUL-terminated, truncated to error_size). */
typedef struct RingdTfBridge {
  int version; /* RINGD_TF_BRIDGE_VERSION */
  /* Submits `count` tensors; writes their ids. On failure nothing is submitted and no keepalive is
   * kept (the caller releases them). */
  int (*submit)(const RingdTfOptions* options, const RingdTfRequest* requests, int count,
                int64_t* ids, char* error, size_t error_size);
  /* Blocks until the tensor is done. */
  int (*wait)(int64_t id, char* error, size_t error_size);
  /* allgather, after wait: the gathered tensor's shape (at most max_dims) and bytes. */
  int (*output_shape)(int64_t id, int64_t* shape, int max_dims, int* ndims, char* error,
                      size_t error_size);
  int (*copy_output)(int64_t id, void* destination, size_t bytes, char* error, size_t error_size);
  /* Forgets the id and releases its keepalive. */
  void (*release)(int64_t id);
  /* How the op library drops a keepalive (set by ringd_tf_connect). */
  void (*release_keepalive)(void* keepalive);
} RingdTfBridge;

#ifdef __cplusplus
}
#endif

#endif /* RINGD_TF_BRIDGE_H_ */
