#include "worker_runtime/worker_store.hpp"

#include <optional>
#include <string>
#include <vector>

#include "rendezvous/base/logging.hpp"
#include "rendezvous/store/prefix_store.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"

namespace ddp {
namespace {

// Owns the connection (and, when this rank hosts it, the server) behind a PrefixStore view.
class WorkerStore final : public Store {
 public:
  WorkerStore(std::unique_ptr<StoreServerThread> server, std::unique_ptr<Store> client,
              std::string prefix)
      : server_(std::move(server)), client_(std::move(client)), view_(std::move(prefix), *client_) {}

  void set(const std::string& key, const std::string& value) override { view_.set(key, value); }
  std::string get(const std::string& key) override { return view_.get(key); }
  int64_t add(const std::string& key, int64_t delta) override { return view_.add(key, delta); }
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override {
    return view_.compareSet(key, expected, desired);
  }
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    view_.wait(keys, timeout);
  }
  bool check(const std::vector<std::string>& keys) override { return view_.check(keys); }
  bool deleteKey(const std::string& key) override { return view_.deleteKey(key); }
  int64_t numKeys() override { return view_.numKeys(); }
  std::vector<std::string> multiGet(const std::vector<std::string>& keys) override {
    return view_.multiGet(keys);
  }
  void multiSet(const std::vector<std::string>& keys,
                const std::vector<std::string>& values) override {
    view_.multiSet(keys, values);
  }
  void append(const std::string& key, const std::string& value) override {
    view_.append(key, value);
  }
  std::chrono::milliseconds timeout() const override { return view_.timeout(); }
  void setTimeout(std::chrono::milliseconds timeout) override { view_.setTimeout(timeout); }
  Store& client() { return *client_; }

 private:
  // Declared first so the client disconnects before the server stops.
  std::unique_ptr<StoreServerThread> server_;
  std::unique_ptr<Store> client_;
  PrefixStore view_;
};

}  // namespace

Store& unprefixed(Store& workerStore) { return dynamic_cast<WorkerStore&>(workerStore).client(); }

std::unique_ptr<Store> connectWorkerStore(const WorkerEnv& env, std::chrono::milliseconds timeout) {
  std::unique_ptr<StoreServerThread> server;
  if (!env.useAgentStore && env.rank == 0) {
    StoreServerOptions serverOptions;
    serverOptions.port = static_cast<uint16_t>(env.master.port);
    serverOptions.name = "worker-store (rank 0)";
    server = std::make_unique<StoreServerThread>(serverOptions);
    logger("worker")->info("rank 0 hosts the worker store on port {}", server->port());
  }
  TcpStoreClientOptions options;
  options.endpoint = env.master;
  options.connectTimeout = timeout;
  options.timeout = timeout;
  auto client = std::make_unique<TcpStoreClient>(options);
  // torch's env:// rendezvous namespaces the agent's store per attempt; do the same so a store
  // shared across restarts never hands a new generation an old generation's keys.
  std::string prefix = "/worker/attempt_" + std::to_string(env.restartCount);
  return std::make_unique<WorkerStore>(std::move(server), std::move(client), std::move(prefix));
}

}  // namespace ddp
