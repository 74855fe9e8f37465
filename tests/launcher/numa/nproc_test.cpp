// --nproc-per-node resolution: CUDA_VISIBLE_DEVICES rules, NVIDIA device files, cpu/gpu/auto.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "launcher/cli/cli.hpp"
#include "launcher/numa/nproc.hpp"
#include "rendezvous/base/error.hpp"

namespace fs = std::filesystem;

TEST_CASE("CUDA_VISIBLE_DEVICES counts entries up to the first invalid one", "[nproc]") {
  CHECK(ddp::countVisibleDevices("", 8) == 0);
  CHECK(ddp::countVisibleDevices("-1", 8) == 0);
  CHECK(ddp::countVisibleDevices("0", 8) == 1);
  CHECK(ddp::countVisibleDevices("0,1,2,3", 8) == 4);
  CHECK(ddp::countVisibleDevices(" 2, 3 ", 8) == 2);
  CHECK(ddp::countVisibleDevices("0,1,-1,2", 8) == 2);   // -1 hides the rest
  CHECK(ddp::countVisibleDevices("0,9,1", 8) == 1);      // 9 does not exist: the list stops
  CHECK(ddp::countVisibleDevices("1,1", 8) == 1);        // a repeat stops the list
  CHECK(ddp::countVisibleDevices("GPU-5f7c2a1e-0000-1111-2222-333344445555,MIG-abc", 8) == 2);
  CHECK(ddp::countVisibleDevices("0,1,2", 2) == 2);      // never more than the machine has
  CHECK(ddp::countVisibleDevices("0", 0) == 0);
}

TEST_CASE("NVIDIA device files /dev/nvidia<N> are counted, control nodes are not", "[nproc]") {
  const char* tmp = std::getenv("DDP_TEST_TMP");
  fs::path dir = fs::path(tmp ? tmp : fs::temp_directory_path().string()) / "fake_dev";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* name : {"nvidia0", "nvidia1", "nvidia7", "nvidiactl", "nvidia-uvm", "nvidia-caps", "null"})
    std::ofstream(dir / name) << "";
  CHECK(ddp::countNvidiaDeviceFiles(dir.string()) == 3);
  CHECK(ddp::countNvidiaDeviceFiles((dir / "missing").string()) == 0);
  fs::remove_all(dir);
}

TEST_CASE("nproc-per-node: integers, cpu, auto, and gpu without a GPU", "[nproc]") {
  auto noEnv = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  CHECK(ddp::resolveNprocPerNode("4", noEnv) == 4);
  CHECK(ddp::resolveNprocPerNode("cpu", noEnv) == ddp::countCpus());
  CHECK(ddp::countCpus() >= 1);
  int gpus = ddp::countGpus(noEnv);
  CHECK(ddp::resolveNprocPerNode("auto", noEnv) == (gpus > 0 ? gpus : ddp::countCpus()));
  if (gpus == 0) {
    CHECK_THROWS_WITH(ddp::resolveNprocPerNode("gpu", noEnv), Catch::Contains("no usable GPU"));
  } else {
    CHECK(ddp::resolveNprocPerNode("gpu", noEnv) == gpus);
  }
  CHECK_THROWS_AS(ddp::resolveNprocPerNode("0", noEnv), ddp::ConfigError);
  CHECK_THROWS_AS(ddp::resolveNprocPerNode("xpu", noEnv), ddp::ConfigError);
  CHECK_THROWS_AS(ddp::resolveNprocPerNode("2x", noEnv), ddp::ConfigError);
}
