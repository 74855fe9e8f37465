// Reading rendezvous key names back: which run an incarnation counter belongs to, and whether a
// key is a heartbeat counter. rendezvous/algorithm/detail/rendezvous_keys.hpp builds the names
// (that table is the layout); this header only recognises the two shapes the store server and the
// status pages need, so that the server — which does not link the rendezvous algorithm — can tell
// heartbeats apart on its io thread. tests/rendezvous/store/rendezvous_key_names_test.cpp checks
// both against the names RendezvousKeys builds.
//
//   rdzv/<runId>/inc                      the run's incarnation counter: one per run id
//   rdzv/<runId>/<N>/r/<g>/hb/<rank>      a node's heartbeat counter in round g
//
// A run id may contain '/': the counter is recognised by its ends.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string_view>

namespace ddp {

inline constexpr std::string_view kRendezvousKeyRoot = "rdzv/";

// The run id of an incarnation counter key, or nullopt for any other key.
inline std::optional<std::string_view> runIdOfIncarnationKey(std::string_view key) {
  constexpr std::string_view kTail = "/inc";
  if (!key.starts_with(kRendezvousKeyRoot) || !key.ends_with(kTail)) return std::nullopt;
  if (key.size() <= kRendezvousKeyRoot.size() + kTail.size()) return std::nullopt;
  return key.substr(kRendezvousKeyRoot.size(),
                    key.size() - kRendezvousKeyRoot.size() - kTail.size());
}

// True for rdzv/.../r/<digits>/hb/<digits>. Cheap enough for every ADD the server applies: a
// key outside rdzv/ costs one five-byte comparison.
inline bool isHeartbeatKey(std::string_view key) {
  if (!key.starts_with(kRendezvousKeyRoot)) return false;
  auto digitsBefore = [&](std::size_t end) {  // start of the digit run ending at `end`
    std::size_t i = end;
    while (i > 0 && key[i - 1] >= '0' && key[i - 1] <= '9') --i;
    return i < end ? std::optional<std::size_t>(i) : std::nullopt;
  };
  const auto rank = digitsBefore(key.size());
  if (!rank || !key.substr(0, *rank).ends_with("/hb/")) return false;
  const auto round = digitsBefore(*rank - 4);
  return round && key.substr(0, *round).ends_with("/r/");
}

}  // namespace ddp
