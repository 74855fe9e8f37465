#include "launcher/numa/cpu_binding.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace ddp {
namespace {

// The kernel's memory policy modes (linux/mempolicy.h; not every libc header has the newest).
constexpr int kMpolPreferred = 1;
constexpr int kMpolPreferredMany = 5;
constexpr int kMpolFMemsAllowed = 1 << 2;

constexpr unsigned kBitsPerWord = sizeof(unsigned long) * CHAR_BIT;
// Masks read from the kernel: large enough for any machine Linux supports (8192 CPUs / nodes).
constexpr unsigned kMaxIndex = 8192;

std::vector<unsigned long> toMask(const IndexList& indices) {
  std::vector<unsigned long> mask;
  for (unsigned i : indices) {
    if (mask.size() <= i / kBitsPerWord) mask.resize(i / kBitsPerWord + 1, 0);
    mask[i / kBitsPerWord] |= 1UL << (i % kBitsPerWord);
  }
  return mask;
}

IndexList fromMask(const std::vector<unsigned long>& mask, std::size_t words) {
  IndexList out;
  for (std::size_t w = 0; w < words && w < mask.size(); ++w)
    for (unsigned b = 0; b < kBitsPerWord; ++b)
      if ((mask[w] >> b) & 1UL) out.push_back(static_cast<unsigned>(w * kBitsPerWord + b));
  return out;
}

// set_mempolicy's maxnode counts one past the highest node bit it reads.
long setMemPolicy(int mode, const std::vector<unsigned long>& mask) {
  return ::syscall(SYS_set_mempolicy, mode, mask.data(),
                   static_cast<unsigned long>(mask.size() * kBitsPerWord + 1));
}

}  // namespace

CpuBinding makeCpuBinding(const IndexList& cpus, const IndexList& memNodes) {
  CpuBinding b;
  b.cpuMask = toMask(cpus);
  b.nodeMask = toMask(memNodes);
  if (!memNodes.empty()) b.firstNodeMask = toMask({memNodes.front()});
  return b;
}

int applyCpuBinding(const CpuBinding& binding) noexcept {
  if (!binding.cpuMask.empty() &&
      ::syscall(SYS_sched_setaffinity, 0, binding.cpuMask.size() * sizeof(unsigned long),
                binding.cpuMask.data()) != 0) {
    return errno;
  }
  if (binding.nodeMask.empty()) return 0;
  if (setMemPolicy(kMpolPreferredMany, binding.nodeMask) == 0) return 0;
  if (errno != EINVAL) return errno;
  // Before Linux 5.15 there is no MPOL_PREFERRED_MANY: prefer the first node.
  return setMemPolicy(kMpolPreferred, binding.firstNodeMask) == 0 ? 0 : errno;
}

IndexList currentCpuAffinity() {
  std::vector<unsigned long> mask(kMaxIndex / kBitsPerWord, 0);
  const long bytes = ::syscall(SYS_sched_getaffinity, 0, mask.size() * sizeof(unsigned long),
                               mask.data());
  if (bytes <= 0) return {};
  return fromMask(mask, static_cast<std::size_t>(bytes) / sizeof(unsigned long));
}

IndexList allowedMemoryNodes() {
  std::vector<unsigned long> mask(kMaxIndex / kBitsPerWord, 0);
  if (::syscall(SYS_get_mempolicy, nullptr, mask.data(),
                static_cast<unsigned long>(mask.size() * kBitsPerWord), nullptr,
                kMpolFMemsAllowed) != 0) {
    return {};
  }
  return fromMask(mask, mask.size());
}

}  // namespace ddp
