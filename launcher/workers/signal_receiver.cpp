#include "launcher/workers/signal_receiver.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

struct Record {
  int signo;
  int code;
  int sender;
  int relay;
};

std::atomic<int> gWriteFd{-1};

bool sentByProcess(int code) { return code == SI_USER || code == SI_QUEUE || code == SI_TKILL; }

void onSignal(int signo, siginfo_t* info, void*) {
  const int savedErrno = errno;
  Record r{signo, info->si_code, 0, 0};
  if (sentByProcess(info->si_code)) {
    r.sender = info->si_pid;
    // A relay: another process of our own process group (a wrapper forwarding to its group).
    r.relay = info->si_pid > 0 && info->si_pid != ::getpid() && ::getpgid(info->si_pid) == ::getpgrp();
  }
  const int fd = gWriteFd.load();
  if (fd >= 0) (void)!::write(fd, &r, sizeof(r));  // atomic (< PIPE_BUF); dropped if the pipe is full
  errno = savedErrno;
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

SignalReceiver::SignalReceiver(boost::asio::io_context& io, const std::vector<int>& signals,
                               const std::vector<int>& named, Handler handler)
    : pipe_(io), handler_(std::move(handler)) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error(std::string("cannot create the signal pipe: ") + std::strerror(errno));
  }
  int expected = -1;
  if (!gWriteFd.compare_exchange_strong(expected, fds[1])) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error("only one SignalReceiver may exist at a time");
  }
  pipe_.assign(fds[0]);
  writeFd_ = fds[1];
  for (int sig : signals) {
    if (contains(handled_, sig) || contains(leftIgnored_, sig)) continue;
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    if (old.sa_handler == SIG_IGN && !contains(named, sig)) {
      leftIgnored_.push_back(sig);
      continue;
    }
    struct sigaction sa {};
    sa.sa_sigaction = onSignal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (::sigaction(sig, &sa, nullptr) != 0) {
      const int e = errno;
      release();
      throw Error("cannot handle signal " + std::to_string(sig) + ": " + std::strerror(e));
    }
    previous_.emplace_back(sig, old);
    handled_.push_back(sig);
  }
  arm();
}

SignalReceiver::~SignalReceiver() { release(); }

void SignalReceiver::release() {
  for (const auto& [sig, old] : previous_) ::sigaction(sig, &old, nullptr);
  previous_.clear();
  boost::system::error_code ignored;
  pipe_.cancel(ignored);
  pipe_.close(ignored);
  if (writeFd_ >= 0) {
    gWriteFd.store(-1);
    ::close(writeFd_);
    writeFd_ = -1;
  }
}

void SignalReceiver::arm() {
  pipe_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                   [this](const boost::system::error_code& ec) {
                     if (ec) return;  // cancelled: the receiver is going away
                     drain();
                     arm();
                   });
}

void SignalReceiver::drain() {
  Record records[64];
  for (;;) {
    const ssize_t n = ::read(pipe_.native_handle(), records, sizeof(records));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    for (std::size_t i = 0; i < static_cast<std::size_t>(n) / sizeof(Record); ++i) {
      const Record& r = records[i];
      handler_(ReceivedSignal{r.signo, r.code, static_cast<pid_t>(r.sender), r.relay != 0});
    }
  }
}

}  // namespace ddp
