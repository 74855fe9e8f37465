// Resolving --nproc-per-node (N | gpu | cpu | auto) to a worker count: counting the GPUs this
// process may use and the CPUs it may run on.
//
// GPU counting, in order: the CUDA driver API (libcuda.so.1, installed with every NVIDIA driver),
// then the CUDA runtime (libcudart.so), both loaded with dlopen at run time so ddprun needs no CUDA
// at build time and starts on machines without it; both honour CUDA_VISIBLE_DEVICES themselves.
// Without either library, NVIDIA's device files /dev/nvidia<N> are counted and
// CUDA_VISIBLE_DEVICES is applied by hand (its entries up to the first invalid one, "" or "-1"
// meaning none), capped by the number of device files.
//
// Thread safety: the functions may be called from any thread; the driver probe initialises CUDA in
// the calling process (it never creates a context), which is safe before fork+exec of workers.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/base/env_lookup.hpp"

namespace ddp {

// The entries CUDA would accept from a CUDA_VISIBLE_DEVICES value, given `physical` devices, in
// order and trimmed: comma-separated indices (< physical, no repeats) or GPU-/MIG- UUIDs, up to the
// first invalid entry, at most `physical` of them. "" and "-1" give none. Pure; does not block.
std::vector<std::string> visibleDeviceEntries(const std::string& cudaVisibleDevices, int physical);

// The number of visibleDeviceEntries(). Pure; does not block.
int countVisibleDevices(const std::string& cudaVisibleDevices, int physical);

// Number of /dev/nvidia<N> files in `devDir` (the physical GPUs the driver exposes). Does not block.
int countNvidiaDeviceFiles(const std::string& devDir = "/dev");

// GPUs usable by workers started from this process (see the file comment). May block for the
// CUDA driver's initialisation (hundreds of ms on a GPU host). Never throws; 0 when none.
int countGpus(const EnvLookup& getenv = processEnv);

// CPUs this process may run on (its affinity mask, so taskset/Slurm/cgroup limits count), at least 1.
int countCpus();

}  // namespace ddp
