#include "worker_runtime/failure_sequence.hpp"

#include <csignal>
#include <charconv>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>

#include "rendezvous/base/logging.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/store/worker_store_keys.hpp"
#include "worker_runtime/error_file.hpp"
#include "worker_runtime/progress.hpp"

namespace ddp {
namespace {

std::optional<int64_t> envInteger(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  int64_t value = 0;
  const char* end = text + std::char_traits<char>::length(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

struct Claim {
  std::mutex mutex;
  bool attempted = false;  // Guarded by mutex
  std::optional<int64_t> number;  // Guarded by mutex
};

Claim& claim() {
  static Claim instance;
  return instance;
}

bool hasWorkerStore() {
  const char* addr = std::getenv("MASTER_ADDR");
  const auto port = envInteger("MASTER_PORT");
  return addr != nullptr && *addr != '\0' && port && *port >= 1 && *port <= 65535;
}

std::optional<int64_t> takeNumber(std::chrono::milliseconds budget) {
  const char* addr = std::getenv("MASTER_ADDR");
  const auto port = envInteger("MASTER_PORT");
  const int64_t generation = envInteger("TORCHELASTIC_RESTART_COUNT").value_or(0);
  try {
    TcpStoreClientOptions options;
    options.endpoint = {addr, static_cast<uint16_t>(*port)};
    options.connectTimeout = budget;
    options.timeout = budget;
    TcpStoreClient store(options);
    return store.add(failureSequenceKey(generation), 1);
  } catch (const std::exception& e) {
    logger("worker")->warn("could not take a failure sequence number from the worker store at "
                           "{}:{} within {} ms: {}",
                           addr, *port, budget.count(), e.what());
    return std::nullopt;
  }
}

// The placeholder runWorkerMain replaces; it matters only when the worker dies before that.
void writePlaceholder(int64_t number) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0') return;
  try {
    writeErrorFile(path,
                   "ddp::Error: the worker failed (failure #" + std::to_string(number) +
                       ") and exited before it could describe the failure",
                   "", std::time(nullptr), number, lastReportedStep());
  } catch (const std::exception& e) {
    logger("worker")->warn("{}", e.what());
  }
}

}  // namespace

std::optional<int64_t> claimFailureSequence(std::chrono::milliseconds budget) {
  Claim& c = claim();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.attempted || !hasWorkerStore()) return c.number;
  c.attempted = true;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) std::signal(sig, SIG_IGN);
  c.number = takeNumber(budget);
  if (c.number) writePlaceholder(*c.number);
  return c.number;
}

std::optional<int64_t> claimedFailureSequence() {
  Claim& c = claim();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.number;
}

}  // namespace ddp
