// StoreStats: what a StoreServer counts while it serves (connections, requests by op, bytes, the
// time requests take), and StoreSnapshot, the copy of its state the status pages read
// (rendezvous/http/). Both are plain values: the counters are updated and the snapshot is
// taken on the server's io thread, and only the copy crosses to another thread
// (StoreServer::snapshot), so serving pays no atomic or lock for them.
//
// Request time is measured per read: from the moment a read completed to the moment every request
// it completed was applied and its replies queued (one clock read before and one after the
// batch; each request of the batch is counted in the batch's bucket). A WAIT or BARRIER counts
// its registration, not the time it stays parked.
//
// Thread safety: plain values; see above for who touches them.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rendezvous/wire/wire_codec.hpp"

namespace ddp {

inline constexpr std::size_t kOpCount = static_cast<std::size_t>(wire::Op::kOnCloseClear) + 1;

// Upper bounds (seconds) of the request-time histogram's buckets; the last bucket is +Inf.
inline constexpr std::array<double, 12> kRequestSecondsBounds = {
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 1e-1, 1.0};

struct StoreStats {
  uint64_t connectionsAccepted = 0;
  uint64_t connectionsRefused = 0;  // over --max-connections
  uint64_t outOfDescriptors = 0;    // accepts that failed for want of a file descriptor
  uint64_t bytesReceived = 0;
  uint64_t bytesSent = 0;
  std::array<uint64_t, kOpCount> requests{};  // by wire::Op
  // Request-time histogram: counts per bucket (not cumulative; the last is +Inf), and the sum.
  std::array<uint64_t, kRequestSecondsBounds.size() + 1> requestBuckets{};
  double requestSecondsSum = 0;

  void countRequest(wire::Op op) { ++requests[static_cast<std::size_t>(op)]; }
  // Adds `count` requests that took `seconds` each.
  void observeRequests(double seconds, uint64_t count) {
    std::size_t i = 0;
    while (i < kRequestSecondsBounds.size() && seconds > kRequestSecondsBounds[i]) ++i;
    requestBuckets[i] += count;
    requestSecondsSum += seconds * static_cast<double>(count);
  }
};

// A copy of a server's state for the status pages, taken on its io thread.
struct StoreSnapshot {
  StoreStats stats;
  std::size_t connections = 0;  // open now
  std::size_t connectionLimit = 0;  // the most it holds (--max-connections, or its default)
  std::size_t unauthenticated = 0;        // open now and not yet authenticated (token servers)
  uint64_t unauthenticatedClosed = 0;     // closed for it (no token in time, a cap reached)
  std::size_t keys = 0;         // keys and queues held
  // Every rendezvous key (rdzv/...) with its value, in name order, until the byte budget ran out.
  std::vector<std::pair<std::string, std::string>> entries;
  bool truncated = false;
  // When each heartbeat key among `entries` last changed (the server's steady clock); keys the
  // server saw no ADD on since it started are missing.
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> heartbeatTimes;
  std::chrono::steady_clock::time_point takenAt{};
  // How long the io thread spent taking it.
  std::chrono::nanoseconds cost{0};
};

}  // namespace ddp
