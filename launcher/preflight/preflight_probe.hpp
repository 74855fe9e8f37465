// Probing this node for its preflight report (preflight_report.hpp): versions, GPUs, free disk,
// reaching the worker store, and the wall clock.
//
//   ddprun        this binary's version
//   kernel        uname -r
//   CUDA driver   cuDriverGetVersion of libcuda.so.1, "none" without a driver
//   CUDA runtime  cudaRuntimeGetVersion of the libcudart that C++ workers load, "none" without one
//   NCCL          ncclGetVersion of libnccl.so.2 (what C++ workers load; a PyTorch worker uses the
//                 NCCL bundled with torch, whose CUDA version the torch column shows)
//   GPUs          countGpus() (nproc.hpp: the devices workers may use) and the model names from the
//                 driver
//   torch         only for a Python entry point: the entry point's interpreter reads torch's
//                 version.py without importing torch (a few ms instead of seconds of import), in a
//                 child process bounded by `torchTimeout` and killed after it ("unknown")
// The libraries are loaded with dlopen, as nproc.cpp does, and stay loaded.
//
// Test-only environment overrides (documented in docs/preflight.md, never for production):
//   DDP_TEST_FINGERPRINT="field=value,..."   replaces probed fields: ddprun, kernel, cuda_driver,
//                                            cuda_runtime, nccl, torch, gpus, gpu_model
//   DDP_TEST_CLOCK_OFFSET_MS=N               adds N ms to this agent's preflight clock readings
//
// Thread safety: every function may be called from any thread; probeFingerprint() starts and
// reaps one child process (by its pid) when the entry point is Python.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/config/launch_config.hpp"
#include "launcher/numa/nproc.hpp"
#include "launcher/preflight/preflight_report.hpp"

namespace ddp {

// The static facts of this node but torch (left "n/a"; see the file comment). Blocks for the
// library loads (milliseconds; the CUDA driver's initialisation may take longer on a GPU host).
// Never throws.
NodeFingerprint probeFingerprint(const EnvLookup& getenv);

// The torch version `python` would import ("none" when it has no torch, "unknown" when the probe
// failed or ran past `timeout`, after which it is killed). Never throws.
std::string probeTorch(const std::string& python, std::chrono::milliseconds timeout);

// Applies a DDP_TEST_FINGERPRINT value to `fp`. Throws ConfigError naming a bad field or value.
void applyTestFingerprint(const std::string& spec, NodeFingerprint& fp);

// The entry point's interpreter when it is a Python script or module, else "".
std::string pythonOf(const LaunchConfig& config);

// Where checkpoints go, for the free-disk column: the worker's --checkpoint-dir (or
// --checkpoint_dir) argument when given, else --log-dir, else the current directory.
std::string checkpointPlace(const LaunchConfig& config);

// Bytes available to unprivileged users on the file system holding `path` (or its nearest
// existing parent). nullopt when statvfs fails. Does not block beyond the file system call.
std::optional<uint64_t> freeDiskBytes(const std::string& path);

// Connects to addr:port (a TCP connection, closed at once), blocking at most `timeout` (name
// resolution included, which getaddrinfo itself bounds). Never throws.
PortProbe probePort(const std::string& addr, uint16_t port, std::chrono::milliseconds timeout);

// DDP_TEST_CLOCK_OFFSET_MS from `getenv` (0 when unset). Throws ConfigError for a bad value.
std::chrono::milliseconds testClockOffset(const EnvLookup& getenv);

// The wall clock in ms since the epoch, plus `offset` (the test-only skew).
int64_t wallClockMs(std::chrono::milliseconds offset);

}  // namespace ddp
