// CRC-32C, TensorBoard event framing and file names, metrics JSON lines (and their order against
// checkpoints), config parsing, checkpoint damage and leftover temporaries.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "rendezvous/base/error.hpp"
#include "tests/trainer/test_support.hpp"
#include "trainer/checkpoint.hpp"
#include "trainer/crc32c.hpp"
#include "trainer/make_data.hpp"
#include "trainer/metrics.hpp"
#include "trainer/train_config.hpp"
#include "trainer/trainer.hpp"

using namespace ddp;
namespace fs = std::filesystem;

namespace {

uint64_t le(const std::string& s, std::size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

// Splits a TFRecord stream into records, checking both masked CRCs.
std::vector<std::string> readRecords(const std::string& bytes) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < bytes.size()) {
    REQUIRE(at + 12 <= bytes.size());
    uint64_t len = le(bytes, at, 8);
    REQUIRE(le(bytes, at + 8, 4) == maskedCrc32c(bytes.data() + at, 8));
    REQUIRE(at + 12 + len + 4 <= bytes.size());
    std::string data = bytes.substr(at + 12, len);
    REQUIRE(le(bytes, at + 12 + len, 4) == maskedCrc32c(data.data(), data.size()));
    out.push_back(data);
    at += 12 + len + 4;
  }
  return out;
}

}  // namespace

TEST_CASE("crc32c matches the standard check value", "[metrics]") {
  REQUIRE(crc32c("123456789", 9) == 0xE3069283u);
  REQUIRE(crc32c("", 0) == 0u);
}

TEST_CASE("scalar events are valid protobuf in TFRecord frames", "[metrics]") {
  auto event = TensorBoardWriter::encodeScalars(1.5, 300, {{"train/loss", 0.25f}});
  // wall_time (field 1, fixed64) 1.5
  REQUIRE(static_cast<unsigned char>(event[0]) == 0x09);
  double wall;
  std::memcpy(&wall, event.data() + 1, 8);
  REQUIRE(wall == 1.5);
  // step (field 2, varint) 300 = 0xAC 0x02
  REQUIRE(event.substr(9, 3) == std::string("\x10\xAC\x02", 3));
  // summary (field 5) { value (field 1) { tag (1) "train/loss", simple_value (2) 0.25f } }
  std::string value = std::string("\x0A\x0Atrain/loss\x15", 13) + std::string("\x00\x00\x80\x3E", 4);
  REQUIRE(event.substr(12) == std::string("\x2A", 1) + char(value.size() + 2) + "\x0A" +
                                  char(value.size()) + value);

  auto dir = test::scratchDir("tb");
  {
    TensorBoardWriter w(dir);
    w.addScalars(1, {{"train/loss", 2.0f}, {"train/lr", 0.1f}});
    w.addScalars(2, {{"train/loss", 1.0f}});
  }
  std::vector<fs::path> files(fs::directory_iterator(dir), fs::directory_iterator{});
  REQUIRE(files.size() == 1);
  REQUIRE(files[0].filename().string().rfind("events.out.tfevents.", 0) == 0);
  std::ifstream in(files[0], std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto records = readRecords(bytes);
  REQUIRE(records.size() == 3);
  REQUIRE(records[0].find("brain.Event:2") != std::string::npos);
  REQUIRE(records[1].find("train/lr") != std::string::npos);
}

TEST_CASE("metrics JSON lines carry the documented fields", "[metrics]") {
  auto dir = test::scratchDir("jsonl");
  {
    MetricsSink sink(dir / "m.jsonl", "", 1e9);
    sink.log({10, 1, 100, 0.5f, 0.01f, 2.0f, 1234.0, 2, 1});
    sink.log({20, 1, 100, 0.4f, 0.01f, 2.0f, 1234.0, 2, 1});
  }
  std::ifstream in(dir / "m.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    for (auto key : {"step", "epoch", "loss", "lr", "samples_per_s", "world_size", "generation"}) {
      REQUIRE(j.contains(key));
    }
    REQUIRE(j["world_size"] == 2);
    REQUIRE(j["generation"] == 1);
    ++lines;
  }
  REQUIRE(lines == 2);
}

TEST_CASE("a step is logged once, also by a process that takes rank 0 over", "[metrics]") {
  auto dir = test::scratchDir("jsonl_once");
  const fs::path file = dir / "m.jsonl";
  {
    MetricsSink sink(file, "", 1e9);
    sink.log({1, 0, 100, 0.5f, 0.01f, 2.0f, 1234.0, 2, 0});
    sink.log({2, 0, 100, 0.5f, 0.01f, 2.0f, 1234.0, 2, 0});
    sink.log({2, 0, 100, 0.5f, 0.01f, 2.0f, 1234.0, 2, 0});  // finished again after a recovery
  }
  {
    MetricsSink next(file, "", 1e9);  // the replacement of rank 0
    next.skipLoggedSteps();
    next.log({2, 0, 100, 0.5f, 0.01f, 2.0f, 1234.0, 2, 0});
    next.log({3, 0, 100, 0.5f, 0.01f, 2.0f, 1234.0, 2, 0});
  }
  {
    MetricsSink fresh(file, "", 1e9);  // a new job appending: nothing is skipped
    fresh.log({1, 0, 100, 0.5f, 0.01f, 2.0f, 1234.0, 2, 0});
  }
  std::ifstream in(file);
  std::vector<int64_t> steps;
  for (std::string line; std::getline(in, line);) {
    steps.push_back(nlohmann::json::parse(line)["step"].get<int64_t>());
  }
  REQUIRE(steps == std::vector<int64_t>{1, 2, 3, 1});
}

TEST_CASE("config keys parse and bad configs are clear errors", "[config]") {
  auto c = parseTrainConfig(R"({"data": "d", "hidden": [8], "optimizer": "sgd", "lr": 0.5,
                                "lr_scaling": "linear", "_comment": "ignored"})", "t.json");
  REQUIRE(c.hidden == std::vector<int>{8});
  REQUIRE(c.optimizer.type == "sgd");
  REQUIRE(c.optimizer.lr == 0.5f);
  REQUIRE_THROWS_WITH(parseTrainConfig(R"({"batchsize": 3})", "t.json"),
                      Catch::Contains("unknown key 'batchsize'"));
  REQUIRE_THROWS_WITH(parseTrainConfig(R"({"epochs": "many"})", "t.json"),
                      Catch::Contains("'epochs' has the wrong type"));
  REQUIRE_THROWS_AS(loadTrainConfig("/nonexistent/config.json"), ConfigError);
  REQUIRE(parseTrainConfig(R"({"comm_overlap": "off"})", "t.json").commOverlap == "off");
  TrainConfig overlap;
  overlap.data = "d";
  overlap.commOverlap = "yes";
  REQUIRE_THROWS_WITH(validateTrainConfig(overlap),
                      Catch::Contains("comm_overlap must be auto, on or off (got 'yes')"));
  TrainConfig bad;
  bad.data = "d";
  bad.batchSize = 0;
  REQUIRE_THROWS_WITH(validateTrainConfig(bad), Catch::Contains("batch_size"));
}

TEST_CASE("device and backend: parsed into enums, auto resolved once", "[config]") {
  auto parsed = parseTrainConfig(R"({"device": "cuda", "backend": "nccl"})", "t.json");
  CHECK(parsed.device == TrainDevice::kCuda);
  CHECK(parsed.backend == CommBackend::kNccl);
  CHECK_THROWS_WITH(parseTrainConfig(R"({"device": "tpu"})", "t.json"),
                    Catch::Contains("device must be auto, cpu or cuda (got 'tpu')"));
  CHECK_THROWS_WITH(parseCommBackend("mpi"), Catch::Contains("backend must be auto, gloo or nccl (got 'mpi')"));
  const auto resolved = [](TrainDevice d, CommBackend b, bool cuda) {
    TrainConfig c;
    c.device = d;
    c.backend = b;
    resolveDeviceAndBackend(c, cuda);
    return std::make_pair(c.device, c.backend);
  };
  using P = std::pair<TrainDevice, CommBackend>;
  CHECK(resolved(TrainDevice::kAuto, CommBackend::kAuto, true) == P{TrainDevice::kCuda, CommBackend::kNccl});
  CHECK(resolved(TrainDevice::kAuto, CommBackend::kAuto, false) == P{TrainDevice::kCpu, CommBackend::kGloo});
  CHECK(resolved(TrainDevice::kCpu, CommBackend::kAuto, true) == P{TrainDevice::kCpu, CommBackend::kGloo});
  CHECK(resolved(TrainDevice::kAuto, CommBackend::kNccl, false) == P{TrainDevice::kCuda, CommBackend::kNccl});
  CHECK(resolved(TrainDevice::kAuto, CommBackend::kGloo, true) == P{TrainDevice::kCpu, CommBackend::kGloo});
  CHECK_THROWS_WITH(resolved(TrainDevice::kCpu, CommBackend::kNccl, true),
                    Catch::Contains("device 'cpu' cannot use backend 'nccl'"));
}

TEST_CASE("checkpoints round-trip and damage is detected", "[checkpoint]") {
  auto dir = test::scratchDir("ckpt");
  REQUIRE_FALSE(loadCheckpoint(dir));
  Checkpoint c;
  c.state.epoch = 2;
  c.state.step = 77;
  c.state.consumed = 640;
  c.optimizer = "adamw";
  c.shape = {4, {3}, 2};
  c.params = {1, 2, 3, 4};
  c.optimizerState = {{5, 6, 7, 8}, {9, 10, 11, 12}};
  saveCheckpoint(dir, c);
  auto back = loadCheckpoint(dir);
  REQUIRE(back);
  REQUIRE(back->state.step == 77);
  REQUIRE(back->state.consumed == 640);
  REQUIRE(back->params == c.params);
  REQUIRE(back->optimizerState == c.optimizerState);
  REQUIRE(back->shape.hidden == std::vector<int>{3});
  std::vector<fs::path> files(fs::directory_iterator(dir), fs::directory_iterator{});
  REQUIRE(files.size() == 1);  // no temporary left behind
  {
    std::fstream f(checkpointPath(dir), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-6, std::ios::end);
    f.write("\x7f", 1);
  }
  REQUIRE_THROWS_WITH(loadCheckpoint(dir), Catch::Contains("CRC mismatch"));
}

TEST_CASE("two event writers starting in the same second get files of their own", "[metrics]") {
  auto dir = test::scratchDir("tb-two");
  {
    TensorBoardWriter a(dir), b(dir);
    REQUIRE(a.path() != b.path());
    a.addScalars(20, {{"train/loss", 1.0f}});
    b.addScalars(20, {{"train/loss", 2.0f}});
  }
  std::vector<fs::path> files(fs::directory_iterator(dir), fs::directory_iterator{});
  REQUIRE(files.size() == 2);
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    CHECK(readRecords(bytes).size() == 2);  // its own version record and its own step 20
  }
}

TEST_CASE("temporaries of killed checkpoint writers are removed at start", "[checkpoint]") {
  auto dir = test::scratchDir("ckpt-tmp");
  Checkpoint c;
  c.optimizer = "sgd";
  c.shape = {1, {1}, 1};
  c.params = {1};
  saveCheckpoint(dir, c);
  for (const char* name : {"checkpoint.bin.tmp.111", "checkpoint.bin.tmp.222", "notes.txt"}) {
    std::ofstream(dir / name) << "x";
  }
  CHECK(removeStaleTemporaries(dir) == 2);
  CHECK(fs::exists(dir / "checkpoint.bin"));
  CHECK(fs::exists(dir / "notes.txt"));
  CHECK_FALSE(fs::exists(dir / "checkpoint.bin.tmp.111"));
  CHECK(removeStaleTemporaries(dir / "missing") == 0);
}

namespace {

TrainConfig smallRun(const fs::path& dir) {
  makeSyntheticData({dir / "data", 128, 4, 2, 1, 1});
  TrainConfig c;
  c.data = (dir / "data").string();
  c.hidden = {4};
  c.device = TrainDevice::kCpu;
  c.maxSteps = 8;
  c.batchSize = 8;
  c.logEvery = 4;
  c.checkpointEvery = 4;
  c.progressSeconds = 1e9;
  c.metrics = (dir / "metrics.jsonl").string();
  return c;
}

std::vector<int64_t> loggedSteps(const fs::path& metrics) {
  std::vector<int64_t> steps;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) steps.push_back(nlohmann::json::parse(line).at("step"));
  return steps;
}

}  // namespace

TEST_CASE("a step's metrics line is written before its checkpoint", "[metrics][checkpoint]") {
  auto dir = test::scratchDir("metrics-first");
  TrainConfig c = smallRun(dir);
  std::ofstream(dir / "blocker") << "a file where the checkpoint folder would go";
  c.checkpointDir = (dir / "blocker" / "ckpt").string();  // the first checkpoint write fails
  RunContext single{0, 1, 0, 0, -1, -1};
  CHECK_THROWS_WITH(train(c, single, nullptr), Catch::Contains("checkpoint"));
  CHECK(loggedSteps(c.metrics) == std::vector<int64_t>{4});
}

TEST_CASE("rank 0 removes leftover checkpoint temporaries when training starts", "[checkpoint]") {
  auto dir = test::scratchDir("ckpt-start");
  TrainConfig c = smallRun(dir);
  c.checkpointDir = (dir / "ckpt").string();
  fs::create_directories(c.checkpointDir);
  std::ofstream(fs::path(c.checkpointDir) / "checkpoint.bin.tmp.4242") << "torn";
  RunContext single{0, 1, 0, 0, -1, -1};
  train(c, single, nullptr);
  std::vector<fs::path> files(fs::directory_iterator(c.checkpointDir), fs::directory_iterator{});
  REQUIRE(files.size() == 1);
  CHECK(files[0].filename() == "checkpoint.bin");
  CHECK(loggedSteps(c.metrics) == std::vector<int64_t>{4, 8});
}
