// EtcdWatch: one `POST /v3/watch` stream on its own HTTP connection, used by EtcdStore::wait/get
// to sleep until a key under the store's prefix changes instead of polling.
//
// The gateway answers with a chunked body of newline-separated JSON messages: first
// {"result":{"created":true,...}}, then {"result":{"events":[{"kv":{"key":...}}, ...]}} per change
// (etcd's v3 JSON gateway). Events from `startRevision` on are replayed, so a change
// between the caller's last read and the watch's creation is not lost.
//
// Thread safety: one thread at a time; each wait creates its own watch.
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "rendezvous/store/detail/etcd_client.hpp"

namespace ddp::detail {

class EtcdWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects to `endpoint` and starts watching keys in [key, rangeEnd) from `startRevision`.
  // Blocks until etcd confirms or `deadline`. Throws NetworkError (cannot connect, stream broken,
  // watch canceled, e.g. compacted), TimeoutError at the deadline.
  // `tls` serves an https endpoint (EtcdClient::tlsContext()).
  EtcdWatch(const EtcdEndpoint& endpoint, std::shared_ptr<boost::asio::ssl::context> tls,
            const std::string& key, const std::string& rangeEnd, int64_t startRevision,
            Clock::time_point deadline);
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  // Blocks until an event for one of `keys` (full keys) arrives (true) or `deadline` (false).
  // Throws NetworkError when the stream breaks or etcd cancels the watch.
  bool waitForAny(const std::set<std::string>& keys, Clock::time_point deadline);

 private:
  class Stream;
  std::unique_ptr<Stream> stream_;
};

}  // namespace ddp::detail
