#include "worker_runtime/state_agreement.hpp"

#include <cstring>

#include "rendezvous/base/error.hpp"

namespace ddp {

StateAgreement agreeOnState(const std::vector<StateDigest>& digests) {
  if (digests.empty()) throw ConfigError("state agreement: no rank reported");
  StateAgreement out;
  for (int r = 1; r < int(digests.size()); ++r) {
    if (digests[std::size_t(r)].step > digests[std::size_t(out.donor)].step) out.donor = r;
  }
  out.state = digests[std::size_t(out.donor)];
  for (int r = 0; r < int(digests.size()); ++r) {
    if (!(digests[std::size_t(r)] == out.state)) out.differ.push_back(r);
  }
  return out;
}

std::array<float, kDigestFloats> packDigest(const StateDigest& digest) {
  static_assert(sizeof(StateDigest) == kDigestFloats * sizeof(float));
  std::array<float, kDigestFloats> words{};
  std::memcpy(words.data(), &digest.step, sizeof digest.step);
  std::memcpy(words.data() + 2, &digest.hash, sizeof digest.hash);
  return words;
}

StateDigest unpackDigest(const float* words) {
  StateDigest digest;
  std::memcpy(&digest.step, words, sizeof digest.step);
  std::memcpy(&digest.hash, words + 2, sizeof digest.hash);
  return digest;
}

}  // namespace ddp
