#include "rendezvous/store/detail/connect_attempts.hpp"

#include <algorithm>

#include "rendezvous/store/detail/store_connection.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp::detail {
namespace {

constexpr std::size_t kKindsShown = 4;

std::chrono::milliseconds since(ConnectAttempts::Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(ConnectAttempts::Clock::now() - start);
}

}  // namespace

ConnectAttempts::ConnectAttempts(const TcpStoreClientOptions& options, std::string endpoint)
    : options_(options), endpoint_(std::move(endpoint)), start_(Clock::now()), nextReport_(start_) {}

void ConnectAttempts::failed(const std::string& target, const std::string& reason,
                             bool overloaded) {
  ++attempts_;
  last_ = target + ": " + reason;
  if (overloaded) overload_ = last_;
  auto kind = std::find_if(kinds_.begin(), kinds_.end(), [&](auto& k) { return k.first == last_; });
  if (kind == kinds_.end()) kinds_.emplace_back(last_, 1);
  else ++kind->second;
  if (!options_.onConnectProgress || Clock::now() < nextReport_) return;
  nextReport_ = Clock::now() + std::max(options_.connectProgressInterval, std::chrono::milliseconds(1));
  options_.onConnectProgress(
      ConnectProgress{endpoint_, attempts_, since(start_), options_.connectTimeout, last_});
}

std::string ConnectAttempts::summary() const {
  std::string out = std::to_string(attempts_) + (attempts_ == 1 ? " attempt" : " attempts");
  for (std::size_t i = 0; i < kinds_.size() && i < kKindsShown; ++i)
    out += (i == 0 ? ": " : "; ") + std::to_string(kinds_[i].second) + "x " + kinds_[i].first;
  if (kinds_.size() > kKindsShown)
    out += "; " + std::to_string(kinds_.size() - kKindsShown) + " other kinds of failure";
  return out;
}

void ConnectAttempts::giveUp(bool resolved) const {
  const std::string budget = durationText(options_.connectTimeout);
  if (!resolved)
    throw NetworkError("could not resolve the host of " + endpoint_ + " within " + budget + " (" +
                       summary() + ")");
  if (!overload_.empty()) {
    throw OverloadedError("timed out after " + budget + " connecting to " + overload_ + " (" +
                          summary() + ")");
  }
  throw TimeoutError("timed out after " + budget + " connecting to " + endpoint_ + " (" +
                     summary() + ")");
}

}  // namespace ddp::detail
