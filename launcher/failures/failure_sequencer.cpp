#include "launcher/failures/failure_sequencer.hpp"

#include <charconv>
#include <utility>

#include "rendezvous/base/logging.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/store/worker_store_keys.hpp"

namespace ddp {
namespace {

std::optional<int64_t> integerIn(const std::map<std::string, std::string>& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  int64_t value = 0;
  const std::string& text = it->second;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::unique_ptr<FailureSequencer> FailureSequencer::forWorkers(
    const std::map<std::string, std::string>& env, std::chrono::milliseconds budget) {
  auto addr = env.find("MASTER_ADDR");
  const auto port = integerIn(env, "MASTER_PORT");
  if (addr == env.end() || addr->second.empty() || !port || *port < 1 || *port > 65535) {
    return nullptr;
  }
  const int64_t generation = integerIn(env, "TORCHELASTIC_RESTART_COUNT").value_or(0);
  return std::make_unique<FailureSequencer>(addr->second, static_cast<uint16_t>(*port),
                                            generation, budget);
}

FailureSequencer::FailureSequencer(std::string addr, uint16_t port, int64_t generation,
                                   std::chrono::milliseconds budget)
    : addr_(std::move(addr)), port_(port), generation_(generation), budget_(budget) {}

FailureSequencer::~FailureSequencer() = default;

std::optional<int64_t> FailureSequencer::next() {
  if (failed_) return std::nullopt;
  try {
    if (!store_) {
      TcpStoreClientOptions options;
      options.endpoint = {addr_, port_};
      options.connectTimeout = budget_;
      options.timeout = budget_;
      store_ = std::make_unique<TcpStoreClient>(options);
    }
    return store_->add(failureSequenceKey(generation_), 1);
  } catch (const std::exception& e) {
    failed_ = true;
    store_.reset();
    logger("agent")->warn("cannot number failures in the worker store {}:{} ({}); failures this "
                          "node reaps from now on in generation {} are ordered after numbered ones",
                          addr_, port_, e.what(), generation_);
    return std::nullopt;
  }
}

}  // namespace ddp
