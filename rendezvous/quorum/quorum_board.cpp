#include "rendezvous/quorum/quorum_board.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'Q', 'R', 'M', '0', '1'};
constexpr std::size_t kEpochOffset = 64;
constexpr std::size_t kSlotsOffset = 128;
constexpr std::size_t kSlotHeader = 8;
constexpr int kMaxSlots = 4096;
static_assert(std::atomic<uint32_t>::is_always_lock_free);

std::size_t boardBytes(int slots) { return kSlotsOffset + std::size_t(slots) * kQuorumSlotBytes; }

std::string sysError(const std::string& call) { return call + ": " + std::strerror(errno); }

std::atomic<uint32_t>& word(void* base, std::size_t offset) {
  return *reinterpret_cast<std::atomic<uint32_t>*>(static_cast<char*>(base) + offset);
}

std::size_t slotOffset(int slot) { return kSlotsOffset + std::size_t(slot) * kQuorumSlotBytes; }

// The record as it goes into a slot: without its replaced list when the whole does not fit.
std::string fitted(QuorumRecord record) {
  std::string text = encodeQuorumRecord(record);
  if (text.size() <= kQuorumSlotBytes - kSlotHeader) return text;
  record.reason += " (" + std::to_string(record.replaced.size()) + " ranks replaced)";
  record.replaced.clear();
  text = encodeQuorumRecord(record);
  if (text.size() > kQuorumSlotBytes - kSlotHeader) {
    record.reason = record.reason.substr(0, 256);
    text = encodeQuorumRecord(record);
  }
  return text;
}

}  // namespace

QuorumBoard::QuorumBoard(int slots) : slots_(slots) {
  if (slots < 1 || slots > kMaxSlots) {
    throw ConfigError("quorum board: " + std::to_string(slots) + " slots (1.." +
                      std::to_string(kMaxSlots) + ")");
  }
  fd_ = ::memfd_create("ddprun-quorum", MFD_CLOEXEC);
  if (fd_ < 0) throw Error("quorum board: " + sysError("memfd_create"));
  bytes_ = boardBytes(slots);
  if (::ftruncate(fd_, off_t(bytes_)) != 0) {
    const std::string why = sysError("ftruncate");
    ::close(fd_);
    throw Error("quorum board: " + why);
  }
  base_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (base_ == MAP_FAILED) {
    const std::string why = sysError("mmap");
    ::close(fd_);
    throw Error("quorum board: " + why);
  }
  std::memcpy(base_, kMagic, sizeof kMagic);
  const uint32_t header[2] = {uint32_t(slots), uint32_t(kQuorumSlotBytes)};
  std::memcpy(static_cast<char*>(base_) + 8, header, sizeof header);
  path_ = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd_);
}

QuorumBoard::~QuorumBoard() {
  if (base_ != nullptr && base_ != MAP_FAILED) ::munmap(base_, bytes_);
  if (fd_ >= 0) ::close(fd_);
}

uint32_t QuorumBoard::epoch() const {
  return word(base_, kEpochOffset).load(std::memory_order_acquire);
}

void QuorumBoard::publish(const std::vector<std::pair<int, QuorumRecord>>& records) {
  for (const auto& [slot, record] : records) {
    if (slot < 0 || slot >= slots_) {
      throw ConfigError("quorum board: slot " + std::to_string(slot) + " outside 0.." +
                        std::to_string(slots_ - 1));
    }
  }
  for (const auto& [slot, record] : records) {
    const std::string text = fitted(record);
    char* s = static_cast<char*>(base_) + slotOffset(slot);
    auto& seq = word(base_, slotOffset(slot));
    const uint32_t begin = seq.load(std::memory_order_relaxed) + 1;  // odd: being written
    seq.store(begin, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    const uint32_t length = uint32_t(text.size());
    std::memcpy(s + 4, &length, sizeof length);
    std::memcpy(s + kSlotHeader, text.data(), text.size());
    seq.store(begin + 1, std::memory_order_release);
  }
  word(base_, kEpochOffset).fetch_add(1, std::memory_order_acq_rel);
  ::syscall(SYS_futex, &word(base_, kEpochOffset), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

QuorumBoardReader::QuorumBoardReader(const std::string& path, int slot) : slot_(slot) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw Error("quorum board " + path + ": " + sysError("open"));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || std::size_t(st.st_size) < kSlotsOffset) {
    ::close(fd);
    throw Error("quorum board " + path + ": not a quorum board (too small)");
  }
  bytes_ = std::size_t(st.st_size);
  base_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int mapErrno = errno;
  ::close(fd);
  if (base_ == MAP_FAILED) {
    errno = mapErrno;
    throw Error("quorum board " + path + ": " + sysError("mmap"));
  }
  uint32_t header[2] = {0, 0};
  std::memcpy(header, static_cast<char*>(base_) + 8, sizeof header);
  const bool isBoard = std::memcmp(base_, kMagic, sizeof kMagic) == 0 &&
                       header[1] == kQuorumSlotBytes && boardBytes(int(header[0])) <= bytes_;
  if (!isBoard || slot < 0 || slot >= int(header[0])) {
    ::munmap(base_, bytes_);
    base_ = nullptr;
    throw Error("quorum board " + path + ": " +
                (isBoard ? "no slot " + std::to_string(slot) : std::string("not a quorum board")));
  }
}

QuorumBoardReader::~QuorumBoardReader() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

const std::atomic<uint32_t>& QuorumBoardReader::epochWord() const {
  return word(base_, kEpochOffset);
}

std::optional<QuorumRecord> QuorumBoardReader::read() const {
  const char* s = static_cast<const char*>(base_) + slotOffset(slot_);
  auto& seq = word(base_, slotOffset(slot_));
  std::string text;
  for (long tries = 0;; ++tries) {
    // An agent killed in the middle of a write leaves the slot odd for good.
    if (tries > 10'000'000) throw ProtocolError("quorum board: slot " + std::to_string(slot_) + " is never written whole");
    const uint32_t before = seq.load(std::memory_order_acquire);
    if (before & 1u) continue;  // the agent is writing this slot: a few microseconds
    uint32_t length = 0;
    std::memcpy(&length, s + 4, sizeof length);
    if (length > kQuorumSlotBytes - kSlotHeader) length = 0;  // never written whole
    text.assign(s + kSlotHeader, length);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq.load(std::memory_order_relaxed) == before) break;
  }
  if (text.empty()) return std::nullopt;
  return decodeQuorumRecord(text);
}

bool QuorumBoardReader::waitForChange(uint32_t seen, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto& epoch = word(base_, kEpochOffset);
  while (epoch.load(std::memory_order_acquire) == seen) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{time_t(ns / 1000000000), long(ns % 1000000000)};
    ::syscall(SYS_futex, &epoch, FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
  return true;
}

}  // namespace ddp
