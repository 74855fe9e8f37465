// SignalReceiver: the agent's handled signals as io_context events, each with who sent it.
//
// A SA_SIGINFO handler (any thread may take the signal) writes one fixed-size record per signal
// into a self-pipe — signal, si_code, sender pid, and whether the sender is another process of
// this process group (a relay, see signal_rules.hpp) — and the io_context reads the pipe. Only
// async-signal-safe calls run in the handler (getpid, getpgrp, getpgid, write).
//
// Signals ignored when ddprun started stay ignored: a signal whose disposition is SIG_IGN when the
// receiver is made (SIGHUP under nohup, SIGINT/SIGQUIT of a background job of a script) gets no
// handler unless it is in `named` (the user's own --signals-to-handle). An ignored signal is
// inherited ignored by the workers, as the shell meant.
//
// Thread safety: one receiver per process at a time; construct, use and destroy it on the
// io_context's thread. The destructor restores the dispositions it found.
#pragma once

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <functional>
#include <utility>
#include <vector>

#include "launcher/workers/signal_rules.hpp"

namespace ddp {

class SignalReceiver {
 public:
  using Handler = std::function<void(const ReceivedSignal&)>;

  // Handles `signals` from now on; `handler` runs on the io_context for each copy, in arrival
  // order. Throws Error when another receiver exists or a handler cannot be installed.
  SignalReceiver(boost::asio::io_context& io, const std::vector<int>& signals,
                 const std::vector<int>& named, Handler handler);
  ~SignalReceiver();
  SignalReceiver(const SignalReceiver&) = delete;
  SignalReceiver& operator=(const SignalReceiver&) = delete;

  // Runs the handler now, in arrival order, for every signal received and not handled yet (a
  // signal that came while the io_context ran something else). Non-blocking; the io_context's
  // thread.
  void poll() { drain(); }

  // The signals that got a handler, and those left ignored because they were ignored at start.
  const std::vector<int>& handled() const { return handled_; }
  const std::vector<int>& leftIgnored() const { return leftIgnored_; }

 private:
  void arm();
  void drain();
  void release();  // restores the dispositions, closes the pipe; idempotent

  boost::asio::posix::stream_descriptor pipe_;
  int writeFd_ = -1;
  Handler handler_;
  std::vector<int> handled_;
  std::vector<int> leftIgnored_;
  std::vector<std::pair<int, struct sigaction>> previous_;
};

}  // namespace ddp
