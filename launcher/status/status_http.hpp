// AgentStatusPages: the agent's own status pages (--http-port): /, /status and /metrics of its
// job (rendezvous/http/http_status_routes.hpp), so that a --standalone run, which has no
// ddprund, gets the page too.
//
// Requests read the job's keys through the agent's own connection to the rendezvous store (opened
// on the first request, again after a failure; 2 s budget a call), at most every 500 ms
// (requests in between reuse the last view). Heartbeat ages are measured on the agent's clock
// from when its status side first saw each counter's value: exact once the counter moved while
// someone looked, else a lower bound.
//
// Thread safety: requests run on the HTTP server's thread; construct and destroy on one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "rendezvous/algorithm/rendezvous.hpp"
#include "rendezvous/http/http_server.hpp"
#include "rendezvous/http/http_status_routes.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp {

class AgentStatusPages {
 public:
  // Starts serving at once. Throws NetworkError when `http` cannot be bound.
  AgentStatusPages(StoreConnector connect, std::string runId, std::string host,
                   HttpServerOptions http);
  ~AgentStatusPages();
  AgentStatusPages(const AgentStatusPages&) = delete;
  AgentStatusPages& operator=(const AgentStatusPages&) = delete;

  uint16_t port() const;
  std::string address() const;

 private:
  StatusContent read();

  StoreConnector connect_;
  std::string runId_;
  std::string host_;
  // HTTP thread only.
  std::unique_ptr<Store> store_;
  std::map<std::string, std::pair<std::string, std::chrono::steady_clock::time_point>> seen_;
  std::optional<StatusContent> last_;
  std::chrono::steady_clock::time_point lastAt_{};
  std::unique_ptr<HttpServer> http_;  // last: stops before the fields above go
};

}  // namespace ddp
