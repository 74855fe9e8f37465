// CudaMlp against CpuMlp (GPU only; exits 77 when no CUDA device is visible): same loss and
// gradients in fp32, bf16 autocast close to fp32, identical optimizer updates.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <random>

#include "trainer/cpu_mlp.hpp"
#include "trainer/cuda_mlp.hpp"
#include "trainer/cuda_devices.hpp"

using namespace ddp;

namespace {

void skipWithoutDevice() {
  if (cudaDeviceCount() == 0) {
    std::fprintf(stderr, "no CUDA device: skipping\n");
    std::exit(77);
  }
}

struct Fixture {
  MlpShape shape{24, {64, 32}, 5};
  int batch = 48;
  std::vector<float> x, init;
  std::vector<int32_t> y;
  Fixture() {
    std::mt19937 rng(4);
    std::normal_distribution<float> normal;
    x.resize(std::size_t(batch) * shape.inputs);
    for (auto& v : x) v = normal(rng);
    for (int i = 0; i < batch; ++i) y.push_back(int32_t(rng() % shape.classes));
    init = initMlpParams(shape, 8);
  }
  std::vector<float> grads(Model& m, float* loss) {
    m.upload(init.data(), m.params(), init.size());
    m.zeroGrads();
    *loss = m.trainBatch(x.data(), y.data(), batch, 1.0f / batch, nullptr);
    std::vector<float> g(m.numParams());
    m.synchronize();
    m.download(m.grads(), g.data(), g.size());
    return g;
  }
};

}  // namespace

TEST_CASE("CUDA fp32 loss and gradients match the CPU model", "[gpu]") {
  skipWithoutDevice();
  Fixture f;
  CpuMlp cpu(f.shape);
  CudaMlp gpu(f.shape, 0, false);
  float lossCpu, lossGpu;
  auto gc = f.grads(cpu, &lossCpu), gg = f.grads(gpu, &lossGpu);
  REQUIRE(lossGpu == Approx(lossCpu).epsilon(1e-4));
  for (std::size_t i = 0; i < gc.size(); ++i) REQUIRE(gg[i] == Approx(gc[i]).margin(1e-5).epsilon(1e-3));
}

TEST_CASE("bf16 autocast stays close to fp32", "[gpu]") {
  skipWithoutDevice();
  Fixture f;
  CpuMlp cpu(f.shape);
  CudaMlp gpu(f.shape, 0, true);
  float lossCpu, lossGpu;
  auto gc = f.grads(cpu, &lossCpu), gg = f.grads(gpu, &lossGpu);
  REQUIRE(lossGpu == Approx(lossCpu).epsilon(2e-2));
  double dot = 0, nc = 0, ng = 0;
  for (std::size_t i = 0; i < gc.size(); ++i) dot += gc[i] * gg[i], nc += gc[i] * gc[i], ng += gg[i] * gg[i];
  REQUIRE(dot / std::sqrt(nc * ng) > 0.99);  // same direction within bf16 rounding
}

TEST_CASE("CUDA SGD and AdamW updates match the CPU model", "[gpu]") {
  skipWithoutDevice();
  Fixture f;
  for (int adam = 0; adam < 2; ++adam) {
    CpuMlp cpu(f.shape);
    CudaMlp gpu(f.shape, 0, false);
    std::vector<float> after[2];
    Model* models[2] = {&cpu, &gpu};
    for (int k = 0; k < 2; ++k) {
      Model& m = *models[k];
      float loss;
      f.grads(m, &loss);
      auto s1 = m.allocBuffer(m.numParams()), s2 = m.allocBuffer(m.numParams());
      if (adam) {
        m.adamwUpdate({0.01f, 0.9f, 0.999f, 1e-3f, 0.01f, 1}, s1.get(), s2.get());  // eps 1e-3: no sign flips of ~0 grads
      } else {
        m.sgdUpdate({0.1f, 0.9f, 0.0f, false}, s1.get());
      }
      after[k].resize(m.numParams());
      m.synchronize();
      m.download(m.params(), after[k].data(), after[k].size());
    }
    for (std::size_t i = 0; i < after[0].size(); ++i) {
      REQUIRE(after[1][i] == Approx(after[0][i]).margin(adam ? 2e-4 : 1e-5));
    }
  }
}
