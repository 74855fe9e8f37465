// ConnectAttempts: the record of a connect loop's failed attempts, for progress reports while it
// waits and one summarised line when it gives up.
//
// Each failure is "<target>: <reason>" (target: an address, or "resolving 'host'"); equal ones are
// counted together, so the final error stays one short line however long the loop ran:
//   timed out after 60 s connecting to 10.0.0.1:29400 (57 attempts: 57x 10.0.0.1:29400:
//   Connection refused)
// Progress goes to TcpStoreClientOptions::onConnectProgress after the first failure, then every
// connectProgressInterval.
//
// Thread safety: one connect loop (one thread) owns it.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/store/tcp_store_client.hpp"

namespace ddp::detail {

class ConnectAttempts {
 public:
  using Clock = std::chrono::steady_clock;

  // `endpoint` is "host:port" as shown to users; the options give the budget and the callback.
  ConnectAttempts(const TcpStoreClientOptions& options, std::string endpoint);

  // Records one failed attempt and reports progress when due (calls the callback; never throws
  // unless the callback does).
  // `overloaded`: the server answered with a busy notice (wire_codec.hpp).
  void failed(const std::string& target, const std::string& reason, bool overloaded = false);

  // "57 attempts: 57x 10.0.0.1:29400: Connection refused" (at most 4 kinds of failure listed).
  std::string summary() const;

  // The error for a loop that ran out of budget: NetworkError when the host name never resolved
  // (a DNS failure is not a usage error: the name may be right and the DNS late), TimeoutError
  // otherwise — OverloadedError, "... connecting to X: store overloaded: <reason> (...)", when an
  // attempt met a busy notice (the server is alive: later attempts that ran out of time do not
  // make it lost). All one line, naming the endpoint, the budget and summary().
  [[noreturn]] void giveUp(bool resolved) const;

 private:
  const TcpStoreClientOptions& options_;
  std::string endpoint_;
  Clock::time_point start_;
  Clock::time_point nextReport_;
  int attempts_ = 0;
  std::string last_;
  std::string overload_;  // the last failure that was a busy notice ("" = none)
  std::vector<std::pair<std::string, int>> kinds_;  // failure text -> count, first seen first
};

}  // namespace ddp::detail
