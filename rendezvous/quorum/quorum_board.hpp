// QuorumBoard: how an agent tells its running workers their newest quorum (quorum_record.hpp)
// without a network round trip (docs/recovery.md).
//
// A small shared-memory file the agent creates (a memfd, so nothing is left behind whatever
// happens to the agent), one slot per local rank. Workers open it by the path the agent exports
// as DDP_QUORUM_BOARD (/proc/<agent pid>/fd/<fd>: reachable by processes of the agent's user while
// the agent lives) and their slot as DDP_QUORUM_SLOT (the local rank). A worker checks the board's
// epoch — one atomic load — at every step boundary and inside its blocking waits; the agent bumps
// it (and wakes futex waiters) after writing new records, so a worker learns of a new quorum within
// a step, or at once when it waits for one.
//
// Layout (native byte order; the two processes share a machine):
//   0     8 bytes    magic "DDPQRM01"
//   8     u32        slots
//   12    u32        slot bytes (kSlotBytes)
//   64    u32        epoch: +1 per publish (a futex word)
//   128   slots x kSlotBytes, slot i for local rank i:
//           u32 sequence (a seqlock: odd while the agent writes the slot)
//           u32 length of the record (0: never written)
//           the record's JSON (encodeQuorumRecord), at most kSlotBytes - 8 bytes
//
// Thread safety: one writer (the agent's thread that owns the board); any number of readers in
// any processes. A reader never blocks the writer; a read that overlaps a write retries.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/quorum/quorum_record.hpp"

namespace ddp {

inline constexpr std::size_t kQuorumSlotBytes = 4096;

// The agent's side.
class QuorumBoard {
 public:
  // Creates a board with `slots` slots (1..4096), every slot empty, epoch 0. Throws Error naming
  // the call when memfd_create, ftruncate or mmap fail.
  explicit QuorumBoard(int slots);
  ~QuorumBoard();
  QuorumBoard(const QuorumBoard&) = delete;
  QuorumBoard& operator=(const QuorumBoard&) = delete;

  // What workers open (DDP_QUORUM_BOARD).
  const std::string& path() const { return path_; }
  int slots() const { return slots_; }
  uint32_t epoch() const;

  // Writes each (slot, record), then bumps the epoch once and wakes every waiter. A record whose
  // encoding does not fit a slot loses its `replaced` list (and says so in its reason). Throws
  // ConfigError for a slot outside the board. Non-blocking.
  void publish(const std::vector<std::pair<int, QuorumRecord>>& records);

 private:
  int slots_;
  int fd_ = -1;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  std::string path_;
};

// A worker's side: one slot of a board another process created.
class QuorumBoardReader {
 public:
  // Opens the board at `path` for slot `slot`. Throws Error when it cannot be opened or mapped,
  // is not a board, or has no such slot.
  QuorumBoardReader(const std::string& path, int slot);
  ~QuorumBoardReader();
  QuorumBoardReader(const QuorumBoardReader&) = delete;
  QuorumBoardReader& operator=(const QuorumBoardReader&) = delete;

  // Changes whenever the agent published. Non-blocking: one atomic load.
  uint32_t epoch() const { return epochWord().load(std::memory_order_acquire); }
  // The epoch word itself, for loops that check it between other waits (never null).
  const std::atomic<uint32_t>& epochWord() const;
  // This slot's record; nullopt while the agent has written none. Throws ProtocolError when the
  // slot holds no valid record. Non-blocking (retries while a write overlaps).
  std::optional<QuorumRecord> read() const;
  // Blocks until the epoch differs from `seen` or `timeout` passes (a futex wait); true when it
  // changed.
  bool waitForChange(uint32_t seen, std::chrono::milliseconds timeout) const;

 private:
  int slot_;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace ddp
