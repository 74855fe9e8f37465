#include "trainer/train_config.hpp"

#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

using Setter = std::function<void(TrainConfig&, const nlohmann::json&)>;

template <typename T, typename F>
Setter set(F field) {
  return [field](TrainConfig& c, const nlohmann::json& v) { field(c) = v.get<T>(); };
}

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = {
      {"data", set<std::string>([](TrainConfig& c) -> auto& { return c.data; })},
      {"hidden", set<std::vector<int>>([](TrainConfig& c) -> auto& { return c.hidden; })},
      {"device",
       [](TrainConfig& c, const nlohmann::json& v) { c.device = parseTrainDevice(v.get<std::string>()); }},
      {"bf16", set<bool>([](TrainConfig& c) -> auto& { return c.bf16; })},
      {"seed", set<uint64_t>([](TrainConfig& c) -> auto& { return c.seed; })},
      {"epochs", set<int64_t>([](TrainConfig& c) -> auto& { return c.epochs; })},
      {"max_steps", set<int64_t>([](TrainConfig& c) -> auto& { return c.maxSteps; })},
      {"batch_size", set<int>([](TrainConfig& c) -> auto& { return c.batchSize; })},
      {"grad_accum", set<int>([](TrainConfig& c) -> auto& { return c.gradAccum; })},
      {"shuffle", set<bool>([](TrainConfig& c) -> auto& { return c.shuffle; })},
      {"drop_last", set<bool>([](TrainConfig& c) -> auto& { return c.dropLast; })},
      {"optimizer", set<std::string>([](TrainConfig& c) -> auto& { return c.optimizer.type; })},
      {"lr", set<float>([](TrainConfig& c) -> auto& { return c.optimizer.lr; })},
      {"momentum", set<float>([](TrainConfig& c) -> auto& { return c.optimizer.momentum; })},
      {"nesterov", set<bool>([](TrainConfig& c) -> auto& { return c.optimizer.nesterov; })},
      {"weight_decay", set<float>([](TrainConfig& c) -> auto& { return c.optimizer.weightDecay; })},
      {"beta1", set<float>([](TrainConfig& c) -> auto& { return c.optimizer.beta1; })},
      {"beta2", set<float>([](TrainConfig& c) -> auto& { return c.optimizer.beta2; })},
      {"eps", set<float>([](TrainConfig& c) -> auto& { return c.optimizer.eps; })},
      {"lr_scaling", set<std::string>([](TrainConfig& c) -> auto& { return c.optimizer.lrScaling; })},
      {"base_world_size", set<int>([](TrainConfig& c) -> auto& { return c.optimizer.baseWorldSize; })},
      {"warmup_steps", set<int64_t>([](TrainConfig& c) -> auto& { return c.optimizer.warmupSteps; })},
      {"clip_grad_norm", set<float>([](TrainConfig& c) -> auto& { return c.optimizer.clipGradNorm; })},
      {"bucket_mb", set<double>([](TrainConfig& c) -> auto& { return c.bucketMb; })},
      {"shm_allreduce", set<bool>([](TrainConfig& c) -> auto& { return c.shmAllreduce; })},
      {"comm_overlap", set<std::string>([](TrainConfig& c) -> auto& { return c.commOverlap; })},
      {"check_params_every", set<int64_t>([](TrainConfig& c) -> auto& { return c.checkParamsEvery; })},
      {"backend",
       [](TrainConfig& c, const nlohmann::json& v) { c.backend = parseCommBackend(v.get<std::string>()); }},
      {"comm_timeout_s", set<double>([](TrainConfig& c) -> auto& { return c.commTimeoutS; })},
      {"checkpoint_dir", set<std::string>([](TrainConfig& c) -> auto& { return c.checkpointDir; })},
      {"checkpoint_every", set<int64_t>([](TrainConfig& c) -> auto& { return c.checkpointEvery; })},
      {"metrics", set<std::string>([](TrainConfig& c) -> auto& { return c.metrics; })},
      {"tensorboard_dir", set<std::string>([](TrainConfig& c) -> auto& { return c.tensorboardDir; })},
      {"log_every", set<int64_t>([](TrainConfig& c) -> auto& { return c.logEvery; })},
      {"progress_seconds", set<double>([](TrainConfig& c) -> auto& { return c.progressSeconds; })},
  };
  return table;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw ConfigError("config: " + what);
}

}  // namespace

TrainConfig parseTrainConfig(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("config " + source + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw ConfigError("config " + source + " must be a JSON object");
  TrainConfig config;
  for (const auto& [key, value] : j.items()) {
    if (key.rfind("_", 0) == 0) continue;  // "_comment" and friends
    auto it = setters().find(key);
    if (it == setters().end()) throw ConfigError("config " + source + ": unknown key '" + key + "'");
    try {
      it->second(config, value);
    } catch (const nlohmann::json::exception&) {
      throw ConfigError("config " + source + ": key '" + key + "' has the wrong type: " + value.dump());
    }
  }
  return config;
}

TrainConfig loadTrainConfig(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw ConfigError("config file " + file.string() + " not found");
  std::stringstream text;
  text << in.rdbuf();
  return parseTrainConfig(text.str(), file.string());
}

void validateTrainConfig(const TrainConfig& c) {
  require(!c.data.empty(), "'data' (dataset directory) is required (or pass --data)");
  require(c.batchSize >= 1, "batch_size must be >= 1");
  require(c.gradAccum >= 1, "grad_accum must be >= 1");
  require(c.epochs >= 1, "epochs must be >= 1");
  require(c.maxSteps >= 0, "max_steps must be >= 0");
  require(c.bucketMb > 0, "bucket_mb must be > 0");
  require(c.optimizer.lr > 0, "lr must be > 0");
  require(c.logEvery >= 1, "log_every must be >= 1");
  require(c.checkpointEvery >= 0, "checkpoint_every must be >= 0");
  require(c.commTimeoutS > 0, "comm_timeout_s must be > 0");
  require(c.commOverlap == "auto" || c.commOverlap == "on" || c.commOverlap == "off",
          "comm_overlap must be auto, on or off (got '" + c.commOverlap + "')");
}

TrainDevice parseTrainDevice(const std::string& name) {
  if (name == "auto") return TrainDevice::kAuto;
  if (name == "cpu") return TrainDevice::kCpu;
  if (name == "cuda") return TrainDevice::kCuda;
  throw ConfigError("config: device must be auto, cpu or cuda (got '" + name + "')");
}

CommBackend parseCommBackend(const std::string& name) {
  if (name == "auto") return CommBackend::kAuto;
  if (name == "gloo") return CommBackend::kGloo;
  if (name == "nccl") return CommBackend::kNccl;
  throw ConfigError("config: backend must be auto, gloo or nccl (got '" + name + "')");
}

std::string deviceName(TrainDevice device) {
  switch (device) {
    case TrainDevice::kAuto: return "auto";
    case TrainDevice::kCpu: return "cpu";
    case TrainDevice::kCuda: return "cuda";
  }
  return "?";
}

std::string backendName(CommBackend backend) {
  switch (backend) {
    case CommBackend::kAuto: return "auto";
    case CommBackend::kGloo: return "gloo";
    case CommBackend::kNccl: return "nccl";
  }
  return "?";
}

void resolveDeviceAndBackend(TrainConfig& c, bool cudaPresent) {
  if (c.backend == CommBackend::kAuto && c.device != TrainDevice::kAuto) {
    c.backend = c.device == TrainDevice::kCuda ? CommBackend::kNccl : CommBackend::kGloo;
  }
  if (c.backend == CommBackend::kAuto) {
    c.backend = cudaPresent ? CommBackend::kNccl : CommBackend::kGloo;
  }
  if ((c.device == TrainDevice::kCuda && c.backend == CommBackend::kGloo) ||
      (c.device == TrainDevice::kCpu && c.backend == CommBackend::kNccl)) {
    throw ConfigError("config: device '" + deviceName(c.device) + "' cannot use backend '" +
                      backendName(c.backend) + "' (cuda needs nccl, cpu needs gloo)");
  }
  if (c.device == TrainDevice::kAuto) {
    c.device = c.backend == CommBackend::kNccl ? TrainDevice::kCuda : TrainDevice::kCpu;
  }
}

}  // namespace ddp
