// --virtual-local-rank's devices: each worker sees LOCAL_RANK=0 and one device of its own, element
// `local rank` of the agent's CUDA_VISIBLE_DEVICES when it is set, else the local rank itself
// (torchrun's rule, docs/cli.md). A worker whose local rank has no element
// would inherit the whole list and share a GPU with another worker (torch refuses it with a
// ValueError naming the local rank), so ddprun refuses such a launch before any worker starts.
//
// Without CUDA_VISIBLE_DEVICES, the GPUs detected (nproc.hpp countGpus) bound the local ranks; on a
// host without any (a CPU machine) every worker gets CUDA_VISIBLE_DEVICES=<its local rank>, which
// nothing reads there, as before.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ddp {

// The entries of a CUDA_VISIBLE_DEVICES value, split at commas as torch splits it ("" = none).
std::vector<std::string> cudaVisibleList(const std::string& cudaVisibleDevices);

// The CUDA_VISIBLE_DEVICES of local rank `localRank` (see above); nullopt when the list set has no
// element for it (virtualDeviceShortage() refuses that launch).
std::optional<std::string> virtualDevice(const std::optional<std::string>& cudaVisibleDevices,
                                         int localRank);

// One line when `nproc` workers per node cannot each have a device of their own, naming the first
// local rank without one and the visible list, e.g. "--virtual-local-rank: local rank 1 has no
// visible device (CUDA_VISIBLE_DEVICES=5 lists 1)"; nullopt when they can. `gpus`: the GPUs
// detected, read only when CUDA_VISIBLE_DEVICES is unset (0: a CPU host, never refused).
std::optional<std::string> virtualDeviceShortage(
    int nproc, const std::optional<std::string>& cudaVisibleDevices, int gpus);

}  // namespace ddp
