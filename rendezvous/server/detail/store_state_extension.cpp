// StoreState: ddprun's extension (HELLO, ON_CLOSE, ON_CLOSE_CLEAR) and disconnect(), which applies
// the ON_CLOSE registrations of a connection that went away.
#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "rendezvous/server/detail/store_state.hpp"

namespace ddp::detail {

namespace {

std::size_t onCloseCost(std::string_view key, std::string_view expected,
                        std::string_view desired) {
  return kTableEntryBytes + key.size() + expected.size() + desired.size();
}

}  // namespace

std::vector<AppliedOnClose> StoreState::disconnect(ServerConnection& client, bool applyOnClose) {
  waits_.unpark(client);
  std::vector<AppliedOnClose> applied;
  const std::vector<OnCloseAction> actions = std::move(client.onClose_);
  client.onClose_.clear();
  client.onCloseCharges_.clear();
  if (!applyOnClose) return applied;
  std::string reason;
  for (const auto& action : actions) {
    const Blob* current = table_.find(action.key);
    const bool swaps = current == nullptr ? action.expected.empty()
                                          : current->view() == action.expected;
    const bool stored =
        compareSet(action.key, action.expected, action.desired, nullptr, nullptr, reason);
    applied.push_back({action, swaps && stored, !stored});
  }
  return applied;
}

std::string StoreState::newInstanceId() {
  std::random_device device;
  return fmt::format("{:08x}{:08x}", device(), device());
}

void StoreState::hello(OutputQueue& out) const {
  // Every client gets every capability; a server's token is checked before, by the session
  // (session_auth.hpp).
  const std::string_view fields[] = {"server", "ddprun store", "instance", instance_};
  const uint64_t capabilities = wire::kCapOnClose | wire::kCapRequestId |
                                (journal_ != nullptr ? wire::kCapDurable : 0);
  out.encode([&](std::string& bytes) {
    wire::encodeHelloReply(bytes, wire::kHelloAccepted, capabilities, fields);
  });
}

bool StoreState::onClose(const wire::Request& r, ServerConnection& client, OutputQueue& out,
                         std::string& reason) {
  auto& actions = client.onClose_;
  auto it = std::find_if(actions.begin(), actions.end(),
                         [&](const OnCloseAction& a) { return a.key == r.key; });
  if (it == actions.end() && actions.size() >= kMaxOnClosePerClient) {
    out.putI64(wire::kOnCloseRefused);
    return true;
  }
  const std::size_t cost = onCloseCost(r.key, r.value, r.desired);
  auto charge = Charge::tryTake(budget_, cost);
  if (!charge) return refuse(reason, "an ON_CLOSE registration", cost);
  if (it != actions.end()) {
    const auto index = static_cast<std::size_t>(it - actions.begin());
    it->expected.assign(r.value);
    it->desired.assign(r.desired);
    client.onCloseCharges_[index] = std::move(*charge);
  } else {
    actions.push_back({std::string(r.key), std::string(r.value), std::string(r.desired)});
    client.onCloseCharges_.push_back(std::move(*charge));
  }
  out.putI64(static_cast<int64_t>(actions.size()));
  return true;
}

void StoreState::onCloseClear(const wire::Request& r, ServerConnection& client,
                              OutputQueue& out) const {
  auto& actions = client.onClose_;
  auto& charges = client.onCloseCharges_;
  const std::size_t before = actions.size();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const bool drop =
        r.keys.empty() || std::find(r.keys.begin(), r.keys.end(), actions[i].key) != r.keys.end();
    if (drop) continue;
    if (kept != i) {
      actions[kept] = std::move(actions[i]);
      charges[kept] = std::move(charges[i]);
    }
    ++kept;
  }
  actions.resize(kept);
  charges.resize(kept);
  out.putI64(static_cast<int64_t>(before - actions.size()));
}

}  // namespace ddp::detail
