#include "trainer/shm_allreduce.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kSeqStride = 64;  // one cache line per rank's sequence word
// How long a rank spins on a peer's sequence word before it sleeps on the futex. With as many
// ranks as cores a futex sleep costs a context switch each way, and the rank that arrives second
// is usually a few to tens of microseconds behind: with 2 ranks on 2 cores, a 3 us spin (the old
// count of 200 pauses) gave 15% less throughput than 50 us when the reducer has a communication
// thread, 1% less without one (scripts/bench/trainer_vs_pytorch.sh's job). Bounded by time, not by
// a count of pauses: a pause takes 13 ns on this project's 2-core machine, ~40 ns on other CPUs.
constexpr auto kSpinBudget = std::chrono::microseconds(50);
constexpr std::size_t kNameBytes = 64;

// What must be equal on every rank for them to share a segment, and this rank's pid.
struct Identity {
  char host[120] = {};
  int32_t pid = 0;
  int32_t pad = 0;
};
static_assert(sizeof(Identity) % sizeof(float) == 0);

std::string firstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string nsLink(const char* path) {
  char buf[64] = {};
  const ssize_t n = readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, std::size_t(n)) : std::string("?");
}

Identity myIdentity(const std::string& hostKey) {
  Identity id;
  const std::string host = !hostKey.empty() ? hostKey
                                            : firstLine("/proc/sys/kernel/random/boot_id") + " " +
                                                  nsLink("/proc/self/ns/ipc") + " " +
                                                  nsLink("/proc/self/ns/pid");
  std::strncpy(id.host, host.c_str(), sizeof id.host - 1);
  id.pid = int32_t(getpid());
  return id;
}

std::size_t headerBytes(int ranks) {
  return (std::size_t(ranks) * kSeqStride + 4095) / 4096 * 4096;
}

std::size_t segmentBytes(int ranks, std::size_t chunkFloats) {
  return headerBytes(ranks) + std::size_t(ranks + 1) * chunkFloats * sizeof(float);
}

// MAP_POPULATE: the page tables are filled here, in one call, instead of by a fault per page in
// the first allreduce (on a loaded VM ~10 us each: ~10 ms of the first step after a recovery).
void* mapFd(int fd, std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Rank 0: creates, sizes (allocating the pages now, so a full /dev/shm fails here and not with
// SIGBUS later) and maps the segment. Returns its name, or "" on failure.
std::string createSegment(std::size_t bytes, void** base) {
  std::random_device rd;
  const std::string name = "/ddprun-allreduce-" + std::to_string(getpid()) + "-" +
                           std::to_string((uint64_t(rd()) << 32) | rd());
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return "";
  const bool sized = ftruncate(fd, off_t(bytes)) == 0 && posix_fallocate(fd, 0, off_t(bytes)) == 0;
  *base = sized ? mapFd(fd, bytes) : nullptr;
  close(fd);
  if (!*base) {
    shm_unlink(name.c_str());
    return "";
  }
  return name;
}

void* openSegment(const std::string& name, std::size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return nullptr;
  struct stat st {};
  void* base = fstat(fd, &st) == 0 && std::size_t(st.st_size) == bytes ? mapFd(fd, bytes) : nullptr;
  close(fd);
  return base;
}

int openPidfd(int pid) {
#ifdef SYS_pidfd_open
  if (pid == getpid()) return -1;  // ranks as threads of one process (tests)
  return int(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

bool reached(uint32_t value, uint32_t target) { return int32_t(value - target) >= 0; }

}  // namespace

std::unique_ptr<ShmAllreduce> ShmAllreduce::tryCreate(Communicator& inner,
                                                      ShmAllreduceOptions options) {
  const int n = inner.size(), me = inner.rank();
  constexpr std::size_t kIdFloats = sizeof(Identity) / sizeof(float);
  Identity mine = myIdentity(options.hostKey);
  std::vector<Identity> all(static_cast<std::size_t>(n));
  inner.allgather(&mine, all.data(), kIdFloats, DataType::kFloat32);
  for (const auto& id : all) {
    if (std::strncmp(id.host, all[0].host, sizeof id.host) != 0) return nullptr;
  }
  options.chunkFloats = std::max<std::size_t>(options.chunkFloats, 64);
  const std::size_t bytes = segmentBytes(n, options.chunkFloats);
  void* base = nullptr;
  char name[kNameBytes] = {};
  if (me == 0) std::strncpy(name, createSegment(bytes, &base).c_str(), kNameBytes - 1);
  // The name goes once every rank has it mapped (or gave up), and whenever a peer's failure throws
  // out of the collectives below (then any rank that knows it removes it: rank 0 may be the one
  // that died). A name left behind holds its memory in /dev/shm until the next boot.
  struct Unlink {
    const char* name;
    bool owner;
    ~Unlink() {
      if (name[0] != '\0' && (owner || std::uncaught_exceptions() > 0)) shm_unlink(name);
    }
  } unlink{name, me == 0};
  inner.broadcast(name, kNameBytes, 0);
  if (name[0] == '\0') return nullptr;
  if (me != 0) base = openSegment(name, bytes);
  float mapped = base ? 1.0f : 0.0f;
  inner.allreduce(&mapped, 1, DataType::kFloat32, ReduceOp::kSum);
  if (mapped < float(n)) {
    if (base) munmap(base, bytes);
    return nullptr;
  }
  std::vector<Peer> peers(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    peers[std::size_t(r)].pid = all[std::size_t(r)].pid;
    if (r != me) peers[std::size_t(r)].pidfd = openPidfd(all[std::size_t(r)].pid);
  }
  return std::unique_ptr<ShmAllreduce>(
      new ShmAllreduce(inner, std::move(options), base, bytes, std::move(peers)));
}

ShmAllreduce::ShmAllreduce(Communicator& inner, ShmAllreduceOptions options, void* base,
                           std::size_t bytes, std::vector<Peer> peers)
    : inner_(inner), options_(std::move(options)), base_(base), bytes_(bytes),
      peers_(std::move(peers)) {}

ShmAllreduce::~ShmAllreduce() {
  // A rank that leaves when done says so, so a peer still waiting for it fails now instead of at
  // the end of its budget. A peer that finished the same collectives saw every phase already and
  // never looks at the flag. A rank unwinding from its own error does not: its failure must be
  // recorded (error file, failure sequence number) before a peer's collateral CommError, so its
  // peers learn of it from its exit (pidfd), which comes after that record.
  if (std::uncaught_exceptions() == 0) {
    std::atomic_ref<uint32_t>(*leftWord(rank())).store(1, std::memory_order_release);
    syscall(SYS_futex, seqWord(rank()), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
  for (const auto& p : peers_) {
    if (p.pidfd >= 0) close(p.pidfd);
  }
  munmap(base_, bytes_);
}

uint32_t* ShmAllreduce::seqWord(int r) const {
  return reinterpret_cast<uint32_t*>(static_cast<char*>(base_) + std::size_t(r) * kSeqStride);
}

uint32_t* ShmAllreduce::leftWord(int r) const { return seqWord(r) + 1; }

float* ShmAllreduce::slot(int r) const {
  return reinterpret_cast<float*>(static_cast<char*>(base_) + headerBytes(size())) +
         std::size_t(r) * options_.chunkFloats;
}

float* ShmAllreduce::result() const { return slot(size()); }

void ShmAllreduce::allreduce(void* buf, std::size_t count, DataType type, ReduceOp op) {
  if (error_) std::rethrow_exception(error_);
  if (type != DataType::kFloat32) return inner_.allreduce(buf, count, type, op);
  auto* data = static_cast<float*>(buf);
  try {
    for (std::size_t done = 0; done < count; done += options_.chunkFloats) {
      allreduceChunk(data + done, std::min(options_.chunkFloats, count - done),
                     op == ReduceOp::kAvg);
    }
  } catch (const CommError&) {
    error_ = std::current_exception();
    throw;
  }
}

void ShmAllreduce::allreduceChunk(float* buf, std::size_t count, bool average) {
  const int n = size();
  std::memcpy(slot(rank()), buf, count * sizeof(float));
  phaseBarrier();
  // This rank's share, in 16-float (one cache line) steps so no two ranks write one line.
  const std::size_t share = ((count + std::size_t(n) - 1) / std::size_t(n) + 15) & ~std::size_t(15);
  const std::size_t lo = std::min(count, share * std::size_t(rank()));
  const std::size_t hi = std::min(count, lo + share);
  float* __restrict out = result();
  std::memcpy(out + lo, slot(0) + lo, (hi - lo) * sizeof(float));
  for (int r = 1; r < n; ++r) {  // rank order: the same sum whoever computes it
    const float* __restrict in = slot(r);
    for (std::size_t i = lo; i < hi; ++i) out[i] += in[i];
  }
  if (average) {
    for (std::size_t i = lo; i < hi; ++i) out[i] /= float(n);
  }
  phaseBarrier();
  // The next writes to the result (or to this rank's slot being read above) come after the next
  // phaseBarrier, which every rank reaches only after this copy: no third barrier needed.
  std::memcpy(buf, out, count * sizeof(float));
}

void ShmAllreduce::phaseBarrier() {
  ++seq_;
  uint32_t* word = seqWord(rank());
  std::atomic_ref<uint32_t>(*word).store(seq_, std::memory_order_release);
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  const auto deadline = Clock::now() + options_.timeout;
  for (int r = 0; r < size(); ++r) {
    if (r != rank()) waitForPeer(r, seq_, deadline);
  }
}

void ShmAllreduce::waitForPeer(int peer, uint32_t target, Clock::time_point deadline) {
  std::atomic_ref<uint32_t> word(*seqWord(peer));
  const auto spinUntil = Clock::now() + kSpinBudget;
  do {
    for (int i = 0; i < 16; ++i) {  // reading the clock costs ~20 ns: once per 16 pauses
      if (reached(word.load(std::memory_order_acquire), target)) return;
      _mm_pause();
    }
  } while (Clock::now() < spinUntil);
  for (;;) {
    const uint32_t seen = word.load(std::memory_order_acquire);
    if (reached(seen, target)) return;
    const timespec slice{0, 10'000'000};  // wake up to check the peer and the budget
    syscall(SYS_futex, seqWord(peer), FUTEX_WAIT, seen, &slice, nullptr, 0);
    if (reached(word.load(std::memory_order_acquire), target)) return;
    checkPeerAlive(peer);
    if (options_.quorumEpoch != nullptr &&
        options_.quorumEpoch->load(std::memory_order_acquire) != options_.quorumEpochSeen) {
      throw CommError("shared-memory allreduce on rank " + std::to_string(rank()) + " of " +
                      std::to_string(size()) + ": the agent published a new quorum while this rank "
                      "waited for rank " + std::to_string(peer) + "; the communicator is now unusable");
    }
    if (Clock::now() >= deadline) {
      throw CommError("shared-memory allreduce on rank " + std::to_string(rank()) + " of " +
                      std::to_string(size()) + ": rank " + std::to_string(peer) + " (pid " +
                      std::to_string(peers_[std::size_t(peer)].pid) + ") did not arrive within " +
                      std::to_string(options_.timeout.count()) + " ms (phase " +
                      std::to_string(target) + "); the communicator is now unusable");
    }
  }
}

void ShmAllreduce::checkPeerAlive(int peer) {
  const Peer& p = peers_[std::size_t(peer)];
  if (std::atomic_ref<uint32_t>(*leftWord(peer)).load(std::memory_order_acquire) != 0) {
    throw CommError("shared-memory allreduce on rank " + std::to_string(rank()) + " of " +
                    std::to_string(size()) + ": rank " + std::to_string(peer) + " (pid " +
                    std::to_string(p.pid) + ") left the group mid-collective; the communicator "
                    "is now unusable");
  }
  if (p.pidfd < 0) return;
  pollfd pfd{p.pidfd, POLLIN, 0};
  if (poll(&pfd, 1, 0) > 0) {
    throw CommError("shared-memory allreduce on rank " + std::to_string(rank()) + " of " +
                    std::to_string(size()) + ": rank " + std::to_string(peer) + " (pid " +
                    std::to_string(p.pid) + ") exited mid-collective; the communicator is now "
                    "unusable");
  }
}

void ShmAllreduce::broadcast(void* buf, std::size_t bytes, int root) {
  inner_.broadcast(buf, bytes, root);
}

void ShmAllreduce::barrier() { inner_.barrier(); }

void ShmAllreduce::send(const void* buf, std::size_t bytes, int peer) {
  inner_.send(buf, bytes, peer);
}

void ShmAllreduce::recv(void* buf, std::size_t bytes, int peer) { inner_.recv(buf, bytes, peer); }

void ShmAllreduce::allgather(const void* send, void* recv, std::size_t countPerRank, DataType type) {
  inner_.allgather(send, recv, countPerRank, type);
}

void ShmAllreduce::reduceScatter(const void* send, void* recv, std::size_t countPerRank,
                                 DataType type, ReduceOp op) {
  inner_.reduceScatter(send, recv, countPerRank, type, op);
}

}  // namespace ddp
