// DdprundStatus: ddprund's status pages (http_status_routes.hpp) for every job in its store.
//
// Each request that shows jobs uses a StoreSnapshot of the rendezvous keys (rdzv/...) that the
// store's io thread copied (StoreServer::snapshot: O(rendezvous keys), not O(all keys)); the HTTP
// thread waits for it (at most 2 s; then the previous one is used, or 503) and builds the job
// views from the copy. The io thread takes a snapshot at most every max(250 ms, 50 × what the
// last one cost it), whatever the number of scrapers, so the status pages never take more than
// 2% of the store's io thread; requests in between reuse the last copy. Heartbeat ages come from the io thread's own record of each
// heartbeat key's last ADD (store_state.hpp), so they are exact to the store's clock.
//
// Thread safety: construct and destroy on the thread that owns `store`; requests run on the
// HTTP server's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "rendezvous/http/http_server.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/server/store_stats.hpp"

namespace ddp {

class DdprundStatus {
 public:
  // Starts serving at once. Throws NetworkError when `http` cannot be bound.
  DdprundStatus(StoreServer& store, HttpServerOptions http);
  ~DdprundStatus();
  DdprundStatus(const DdprundStatus&) = delete;
  DdprundStatus& operator=(const DdprundStatus&) = delete;

  uint16_t port() const;
  std::string address() const;

 private:
  HttpReply handle(const std::string& target);
  std::shared_ptr<const StoreSnapshot> snapshot();

  StoreServer& store_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  // HTTP thread only.
  std::shared_ptr<const StoreSnapshot> last_;
  std::unique_ptr<HttpServer> http_;  // last: stops (and joins) before the fields above go
};

}  // namespace ddp
