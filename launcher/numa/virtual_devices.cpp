#include "launcher/numa/virtual_devices.hpp"

#include <sstream>

namespace ddp {

std::vector<std::string> cudaVisibleList(const std::string& cudaVisibleDevices) {
  std::vector<std::string> parts;
  if (cudaVisibleDevices.empty()) return parts;
  std::stringstream in(cudaVisibleDevices);
  std::string part;
  while (std::getline(in, part, ',')) parts.push_back(part);
  if (cudaVisibleDevices.back() == ',') parts.emplace_back();  // "0," lists two, as in torch
  return parts;
}

std::optional<std::string> virtualDevice(const std::optional<std::string>& cudaVisibleDevices,
                                         int localRank) {
  if (!cudaVisibleDevices) return std::to_string(localRank);
  const auto devices = cudaVisibleList(*cudaVisibleDevices);
  if (localRank < 0 || localRank >= static_cast<int>(devices.size())) return std::nullopt;
  return devices[localRank];
}

std::optional<std::string> virtualDeviceShortage(
    int nproc, const std::optional<std::string>& cudaVisibleDevices, int gpus) {
  int available = 0;
  std::string what;
  if (cudaVisibleDevices) {
    available = static_cast<int>(cudaVisibleList(*cudaVisibleDevices).size());
    what = "CUDA_VISIBLE_DEVICES=" + *cudaVisibleDevices + " lists " + std::to_string(available);
  } else {
    if (gpus <= 0) return std::nullopt;  // a CPU host: nothing to share
    available = gpus;
    what = "CUDA_VISIBLE_DEVICES is unset and " + std::to_string(gpus) + " GPU" +
           (gpus == 1 ? " is" : "s are") + " detected";
  }
  if (nproc <= available) return std::nullopt;
  return "--virtual-local-rank: local rank " + std::to_string(available) +
         " has no visible device (" + what + ")";
}

}  // namespace ddp
