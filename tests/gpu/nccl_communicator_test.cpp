// NcclCommunicator on a real GPU: every collective on one rank (a single GPU is enough), ordering
// after the caller's stream, and a bounded failure when a peer never joins. With two or more
// GPUs, two ranks (threads) also allreduce across devices. Exits 77 (skipped) without a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "rendezvous/store/in_memory_store.hpp"
#include "worker_runtime/bfloat16.hpp"
#include "worker_runtime/communicator.hpp"
#include "worker_runtime/nccl_communicator.hpp"
#include "worker_runtime/worker_env.hpp"

using namespace std::chrono_literals;
using ddp::DataType;
using ddp::ReduceOp;

namespace {

int deviceCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

ddp::WorkerEnv env(int rank, int size) {
  ddp::WorkerEnv e;
  e.rank = rank;
  e.localRank = rank;
  e.worldSize = size;
  e.localWorldSize = size;
  e.master.host = "127.0.0.1";
  e.master.port = 29500;
  return e;
}

ddp::CommOptions ncclOptions(std::chrono::milliseconds timeout) {
  ddp::CommOptions options;
  options.backend = ddp::CommBackend::kNccl;
  options.timeout = timeout;
  return options;
}

// Device buffer with host copies in and out.
template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  std::size_t count;
  explicit DeviceBuffer(std::size_t n) : count(n) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(T)) == cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  void upload(const std::vector<T>& host) {
    REQUIRE(cudaMemcpy(ptr, host.data(), count * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> host(count);
    REQUIRE(cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }
};

}  // namespace

TEST_CASE("kAuto picks NCCL on a machine with a GPU and every collective runs", "[nccl]") {
  ddp::InMemoryStore store(30s);
  ddp::CommOptions options = ncclOptions(60s);
  options.backend = ddp::CommBackend::kAuto;
  auto comm = ddp::makeCommunicator(env(0, 1), store, options);
  REQUIRE(comm->backend() == ddp::CommBackend::kNccl);

  DeviceBuffer<float> f(1000);
  std::vector<float> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 17);
  f.upload(values);
  comm->allreduce(f.ptr, f.count, DataType::kFloat32, ReduceOp::kSum);
  CHECK(f.download() == values);
  comm->allreduce(f.ptr, f.count, DataType::kFloat32, ReduceOp::kAvg);
  CHECK(f.download() == values);

  DeviceBuffer<uint16_t> b(64);
  std::vector<uint16_t> bvalues(64, ddp::floatToBf16(3.0f));
  b.upload(bvalues);
  comm->allreduce(b.ptr, b.count, DataType::kBFloat16, ReduceOp::kSum);
  CHECK(b.download() == bvalues);

  comm->broadcast(f.ptr, f.count * sizeof(float), 0);
  comm->barrier();
  DeviceBuffer<float> gathered(1000);
  comm->allgather(f.ptr, gathered.ptr, 1000, DataType::kFloat32);
  CHECK(gathered.download() == values);
  DeviceBuffer<float> scattered(1000);
  comm->reduceScatter(f.ptr, scattered.ptr, 1000, DataType::kFloat32, ReduceOp::kSum);
  CHECK(scattered.download() == values);
}

TEST_CASE("collectives follow the work queued on the stream given to setStream", "[nccl]") {
  ddp::InMemoryStore store(30s);
  auto comm = ddp::makeCommunicator(env(0, 1), store, ncclOptions(60s));
  cudaStream_t user = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
  const std::size_t n = 1 << 24;  // 64 MiB: a copy that takes long enough to race if unordered
  DeviceBuffer<float> buf(n);
  std::vector<float> ones(n, 1.0f);
  float* pinned = nullptr;
  REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), n * sizeof(float)) == cudaSuccess);
  std::copy(ones.begin(), ones.end(), pinned);
  REQUIRE(cudaMemsetAsync(buf.ptr, 0, n * sizeof(float), user) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(buf.ptr, pinned, n * sizeof(float), cudaMemcpyHostToDevice, user) ==
          cudaSuccess);
  comm->setStream(user);
  // In place with a group of one NCCL still reads and writes the buffer after the copy.
  comm->allgather(buf.ptr, buf.ptr, n, DataType::kFloat32);
  CHECK(buf.download() == ones);
  cudaFreeHost(pinned);
  cudaStreamDestroy(user);
}

TEST_CASE("NCCL init with a peer that never joins fails within the budget", "[nccl][timeout]") {
  ddp::InMemoryStore store(30s);
  auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    ddp::NcclCommunicator comm(env(0, 2), store, ncclOptions(2000ms));
  } catch (const ddp::CommError& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Contains("rank 0 of 2") && Catch::Contains("timed out after 2000 ms"));
  CHECK(std::chrono::steady_clock::now() - start < 30s);
}

TEST_CASE("two ranks on two GPUs allreduce across devices", "[nccl][multi]") {
  if (deviceCount() < 2) {
    WARN("fewer than two GPUs: multi-rank NCCL case not run");
    return;
  }
  ddp::InMemoryStore store(30s);
  std::vector<std::vector<float>> results(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto comm = ddp::makeCommunicator(env(rank, 2), store, ncclOptions(60s));
        float* d = nullptr;
        cudaSetDevice(rank);
        cudaMalloc(reinterpret_cast<void**>(&d), 4 * sizeof(float));
        std::vector<float> host(4, static_cast<float>(rank + 1));
        cudaMemcpy(d, host.data(), 4 * sizeof(float), cudaMemcpyHostToDevice);
        comm->allreduce(d, 4, DataType::kFloat32, ReduceOp::kSum);
        cudaMemcpy(host.data(), d, 4 * sizeof(float), cudaMemcpyDeviceToHost);
        cudaFree(d);
        results[rank] = host;
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(errors == std::vector<std::string>(2));
  CHECK(results[0] == std::vector<float>(4, 3.0f));
  CHECK(results[1] == std::vector<float>(4, 3.0f));
}

int main(int argc, char** argv) {
  if (deviceCount() == 0) return 77;  // no GPU: skipped (SKIP_RETURN_CODE 77)
  return Catch::Session().run(argc, argv);
}
