#include "trainer/metrics.hpp"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {

MetricsSink::MetricsSink(const std::filesystem::path& jsonl,
                         const std::filesystem::path& tensorboardDir, double progressSeconds)
    : jsonlPath_(jsonl), progressSeconds_(progressSeconds) {
  if (!jsonl.empty()) {
    if (jsonl.has_parent_path()) std::filesystem::create_directories(jsonl.parent_path());
    jsonl_.open(jsonl, std::ios::app);
    if (!jsonl_) throw Error("metrics: cannot open " + jsonl.string() + " for appending");
  }
  if (!tensorboardDir.empty()) tensorboard_ = std::make_unique<TensorBoardWriter>(tensorboardDir);
  lastProgress_ = std::chrono::steady_clock::now();
}

namespace {
constexpr std::chrono::milliseconds kPublishInterval{200};
}  // namespace

void MetricsSink::publishTo(std::function<void(const std::string& point)> publish) {
  publish_ = std::move(publish);
}

void MetricsSink::skipLoggedSteps() {
  if (jsonlPath_.empty()) return;
  std::ifstream in(jsonlPath_, std::ios::binary);
  if (!in) return;
  // The last complete line is within the last few KiB (a line is ~200 bytes).
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 8192);
  in.seekg(from);
  std::string tail(std::size_t(size - from), '\0');
  in.read(tail.data(), std::streamsize(tail.size()));
  tail.resize(std::size_t(std::max<std::streamsize>(0, in.gcount())));
  const std::size_t end = tail.rfind('\n');
  if (end == std::string::npos || end == 0) return;
  const std::size_t previous = tail.rfind('\n', end - 1);
  const std::size_t begin = previous == std::string::npos ? 0 : previous + 1;
  const std::string line = tail.substr(begin, end - begin);
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("step") && j["step"].is_number_integer()) {
    lastLogged_ = std::max(lastLogged_, j["step"].get<int64_t>());
  }
}

void MetricsSink::log(const StepMetrics& m, bool last) {
  if (m.step <= lastLogged_) return;
  lastLogged_ = m.step;
  const double wall = std::chrono::duration<double>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  const auto now = std::chrono::steady_clock::now();
  rateSum_ += m.samplesPerS;
  ++rates_;
  if (publish_ && (last || now - lastPublished_ >= kPublishInterval)) {
    lastPublished_ = now;
    const double rate = rateSum_ / rates_;
    rateSum_ = 0;
    rates_ = 0;
    const nlohmann::json point = {{"step", m.step}, {"epoch", m.epoch}, {"loss", m.loss},
                                  {"lr", m.lr}, {"samples_per_s", rate}, {"time", wall}};
    try {
      publish_(point.dump());
    } catch (const std::exception& e) {
      logger("trainer")->warn("metric points for the status page stop: {}", e.what());
      publish_ = nullptr;
    }
  }
  if (jsonl_.is_open()) {
    nlohmann::json j = {{"step", m.step}, {"epoch", m.epoch}, {"loss", m.loss}, {"lr", m.lr},
                        {"samples_per_s", m.samplesPerS}, {"world_size", m.worldSize},
                        {"generation", m.generation}, {"grad_norm", m.gradNorm}, {"time", wall}};
    jsonl_ << j.dump() << "\n";
    jsonl_.flush();
  }
  if (tensorboard_) {
    tensorboard_->addScalars(m.step, {{"train/loss", m.loss},
                                      {"train/lr", m.lr},
                                      {"train/samples_per_s", float(m.samplesPerS)},
                                      {"train/grad_norm", m.gradNorm}});
  }
}

void MetricsSink::progress(const StepMetrics& m, bool force) {
  auto now = std::chrono::steady_clock::now();
  if (startStep_ < 0) {
    startStep_ = m.step;
    start_ = now;
  }
  if (!force && std::chrono::duration<double>(now - lastProgress_).count() < progressSeconds_) return;
  lastProgress_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  int64_t done = m.step - startStep_;
  double eta = done > 0 ? elapsed / double(done) * double(m.totalSteps - m.step) : 0.0;
  std::printf("[train] epoch %lld step %lld/%lld loss %.4f lr %.3g samples/s %.0f eta %.0fs\n",
              static_cast<long long>(m.epoch), static_cast<long long>(m.step),
              static_cast<long long>(m.totalSteps), m.loss, m.lr, m.samplesPerS, eta);
  std::fflush(stdout);
}

}  // namespace ddp
