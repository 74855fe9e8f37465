// --virtual-local-rank's devices (launcher/numa/virtual_devices.hpp): each local rank's device, and
// the launches refused because a local rank has none (issue 30 item 4).
#include "launcher/numa/virtual_devices.hpp"

#include <catch2/catch.hpp>

using namespace ddp;

TEST_CASE("virtual devices: element `local rank` of CUDA_VISIBLE_DEVICES, else the local rank",
          "[virtual_devices]") {
  CHECK(virtualDevice(std::string("4,6"), 0) == "4");
  CHECK(virtualDevice(std::string("4,6"), 1) == "6");
  CHECK(virtualDevice(std::string("GPU-aa,GPU-bb"), 1) == "GPU-bb");
  CHECK_FALSE(virtualDevice(std::string("5"), 1));  // none of its own: refused at start
  CHECK_FALSE(virtualDevice(std::string(""), 0));
  CHECK(virtualDevice(std::nullopt, 3) == "3");
  CHECK(cudaVisibleList("").empty());
  CHECK(cudaVisibleList("0,") == std::vector<std::string>{"0", ""});  // torch's split
}

TEST_CASE("virtual devices: fewer visible devices than workers is refused, naming the local rank",
          "[virtual_devices]") {
  CHECK(virtualDeviceShortage(2, std::string("5"), 0) ==
        "--virtual-local-rank: local rank 1 has no visible device (CUDA_VISIBLE_DEVICES=5 "
        "lists 1)");
  CHECK(virtualDeviceShortage(4, std::string("0,1"), 8) ==
        "--virtual-local-rank: local rank 2 has no visible device (CUDA_VISIBLE_DEVICES=0,1 "
        "lists 2)");  // the list set wins over the GPUs detected
  CHECK(virtualDeviceShortage(1, std::string(""), 0) ==
        "--virtual-local-rank: local rank 0 has no visible device (CUDA_VISIBLE_DEVICES= lists 0)");
  CHECK(virtualDeviceShortage(3, std::nullopt, 2) ==
        "--virtual-local-rank: local rank 2 has no visible device (CUDA_VISIBLE_DEVICES is unset "
        "and 2 GPUs are detected)");
  CHECK(virtualDeviceShortage(2, std::nullopt, 1) ==
        "--virtual-local-rank: local rank 1 has no visible device (CUDA_VISIBLE_DEVICES is unset "
        "and 1 GPU is detected)");
  // Enough devices, or a CPU host without CUDA_VISIBLE_DEVICES: not refused.
  CHECK_FALSE(virtualDeviceShortage(2, std::string("5,7"), 0));
  CHECK_FALSE(virtualDeviceShortage(2, std::string("0,1,2"), 0));
  CHECK_FALSE(virtualDeviceShortage(8, std::nullopt, 8));
  CHECK_FALSE(virtualDeviceShortage(4, std::nullopt, 0));
}
