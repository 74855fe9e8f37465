// State agreement: which rank's training state a newly built quorum continues from
// (docs/recovery.md, "State from a peer").
//
// When a quorum forms in place, every rank reports its last applied step and a hash of its state
// (parameters, optimizer state, data position). The *donor* is the lowest rank with the highest
// step; every rank whose digest differs from the donor's (a replacement process, a rank that had
// not applied the interrupted step yet) takes the donor's state. The interrupted step is then
// redone, so a job whose world size did not change ends bit-identical to one without the fault.
//
// A digest travels as four float32 words (the Communicator moves float32 and bfloat16 buffers):
// packDigest() / unpackDigest() keep the 16 bytes exactly.
//
// Thread safety: pure functions over values.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace ddp {

struct StateDigest {
  int64_t step = -1;  // last applied step; -1: no state (a process that just started)
  uint64_t hash = 0;
  bool operator==(const StateDigest&) const = default;
};

struct StateAgreement {
  int donor = 0;              // lowest rank with the highest step
  StateDigest state;          // the donor's digest
  std::vector<int> differ;    // ranks whose digest differs from the donor's, ascending
};

// `digests[r]` is rank r's. Throws ConfigError when `digests` is empty.
StateAgreement agreeOnState(const std::vector<StateDigest>& digests);

inline constexpr std::size_t kDigestFloats = 4;
std::array<float, kDigestFloats> packDigest(const StateDigest& digest);
StateDigest unpackDigest(const float* words);

}  // namespace ddp
