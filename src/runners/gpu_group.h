// The local group of `--gpus` (ringd train, ringd bench replay): GPUs 0..L-1 as an NCCL group,
// the engine's buckets then running on their members' GPU buffers (no fusion buffer: the host
// cannot copy into one), so without compression.
#pragma once

#include <memory>

#include "ringd/engine.h"
#include "ringd/local_group.h"

namespace ringd::runners {

// `command` ("train", "bench replay") names the caller in errors. Throws kInvalidArgument for a
// compression other than none (RINGD_COMPRESSION can ask for one past the flags), kUnavailable in
// a build without NCCL or without a usable GPU, and the NCCL/CUDA failure otherwise.
std::unique_ptr<LocalGroup> make_gpu_group(const char* command, int devices,
                                           Compression compression);

}  // namespace ringd::runners
