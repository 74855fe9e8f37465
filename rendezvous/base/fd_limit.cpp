#include "rendezvous/base/fd_limit.hpp"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace ddp {
namespace {

// What raiseFdLimit() found at its first call (written once, before threads; read by forked
// children).
struct Inherited {
  bool saved = false;
  rlimit limit{};
};
Inherited inherited;

uint64_t asCount(rlim_t value) {
  return value == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(value);
}

// The largest soft limit the kernel takes when the hard limit is infinite.
rlim_t nrOpen() {
  std::ifstream in("/proc/sys/fs/nr_open");
  uint64_t value = 0;
  if (in >> value && value > 0) return static_cast<rlim_t>(value);
  return 1 << 20;
}

}  // namespace

std::string FdLimit::describe() const {
  auto count = [](uint64_t v) { return v == UINT64_MAX ? std::string("unlimited") : std::to_string(v); };
  if (soft >= hard) {
    return count(soft) + (raised() ? " (raised from " + count(before) + " to the hard limit)"
                                   : " (the hard limit)");
  }
  return count(soft) + (raised() ? " (raised from " + count(before) + ")" : "") +
         "; hard limit " + count(hard) + (error.empty() ? "" : ": " + error);
}

FdLimit currentFdLimit() {
  FdLimit out;
  rlimit now{};
  if (::getrlimit(RLIMIT_NOFILE, &now) != 0) {
    out.error = std::string("getrlimit: ") + std::strerror(errno);
    return out;
  }
  out.soft = asCount(now.rlim_cur);
  out.hard = asCount(now.rlim_max);
  out.before = inherited.saved ? asCount(inherited.limit.rlim_cur) : out.soft;
  return out;
}

FdLimit raiseFdLimit() {
  rlimit now{};
  if (::getrlimit(RLIMIT_NOFILE, &now) != 0) return currentFdLimit();
  if (!inherited.saved) {
    inherited.limit = now;
    inherited.saved = true;
  }
  const rlim_t target = now.rlim_max == RLIM_INFINITY ? nrOpen() : now.rlim_max;
  std::string error;
  if (now.rlim_cur != RLIM_INFINITY && now.rlim_cur < target) {
    rlimit raised = now;
    raised.rlim_cur = target;
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
      error = std::string("setrlimit: ") + std::strerror(errno);
    }
  }
  FdLimit out = currentFdLimit();
  out.error = error;
  return out;
}

void restoreInheritedFdLimit() noexcept {
  if (!inherited.saved) return;
  rlimit now{};
  if (::getrlimit(RLIMIT_NOFILE, &now) != 0) return;
  rlimit back = now;
  back.rlim_cur = std::min(inherited.limit.rlim_cur, now.rlim_max);
  (void)::setrlimit(RLIMIT_NOFILE, &back);
}

std::size_t fdReserve(uint64_t limit) {
  return static_cast<std::size_t>(std::clamp<uint64_t>(limit / 16, 16, 256));
}

std::size_t connectionRoom(uint64_t limit) {
  const uint64_t reserve = fdReserve(limit);
  if (limit <= reserve) return 1;
  const uint64_t room = limit - reserve;
  return room > SIZE_MAX ? SIZE_MAX : static_cast<std::size_t>(room);
}

std::size_t openFdCount() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  std::size_t n = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n > 0 ? n - 1 : 0;  // the directory's own descriptor
}

std::mutex& spareDescriptorMutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace ddp
