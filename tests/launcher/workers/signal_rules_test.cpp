// What each copy of a signal means (SignalTally), and the SignalReceiver's view of it: who sent
// it, whether that sender is a relay in our own process group, and dispositions ignored at start.
#include "launcher/workers/signal_rules.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <vector>

#include "launcher/workers/signal_receiver.hpp"

namespace ddp {
namespace {

ReceivedSignal fromOutside(int signo) { return {signo, SI_USER, 4242, false}; }
ReceivedSignal relayed(int signo) { return {signo, SI_USER, 4343, true}; }
ReceivedSignal fromTerminal(int signo) { return {signo, SI_KERNEL, 0, false}; }

// Runs `io` until `handler` saw a signal or 10 s passed.
std::optional<ReceivedSignal> receiveOne(boost::asio::io_context& io,
                                         std::optional<ReceivedSignal>& got) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!got && std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(50));
    io.restart();
  }
  return got;
}

// A child sends `signo` to us, from our process group or from its own; returns its pid (reaped
// only after the signal arrived, so that its process group can still be looked up).
pid_t sendFromChild(int signo, bool ownGroup) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (ownGroup) ::setpgid(0, 0);
    ::kill(parent, signo);
    ::_exit(0);
  }
  return pid;
}

}  // namespace

TEST_CASE("two Ctrl-C on a terminal: stop, then kill now", "[signals]") {
  SignalTally t;
  CHECK(t.onSignal(fromTerminal(SIGINT), false) == SignalAction::kStop);
  CHECK(t.onSignal(fromTerminal(SIGINT), true) == SignalAction::kKillNow);
}

TEST_CASE("one Ctrl-C relayed by a wrapper in our group counts once, in any order", "[signals]") {
  SignalTally a;
  CHECK(a.onSignal(fromOutside(SIGINT), false) == SignalAction::kStop);
  CHECK(a.onSignal(relayed(SIGINT), true) == SignalAction::kDrop);
  CHECK(a.onSignal(relayed(SIGINT), true) == SignalAction::kDrop);
  SignalTally b;
  CHECK(b.onSignal(relayed(SIGINT), false) == SignalAction::kStop);
  CHECK(b.onSignal(fromTerminal(SIGINT), true) == SignalAction::kDrop);  // the same press
  CHECK(b.onSignal(relayed(SIGINT), true) == SignalAction::kDrop);
  CHECK(b.onSignal(fromTerminal(SIGINT), true) == SignalAction::kKillNow);  // a second press
}

TEST_CASE("stop signals reach the workers once; notices each time unless relayed", "[signals]") {
  SignalTally t;
  CHECK(t.onSignal(fromOutside(SIGUSR1), false) == SignalAction::kForward);
  CHECK(t.onSignal(relayed(SIGUSR1), false) == SignalAction::kDrop);
  CHECK(t.onSignal(fromOutside(SIGUSR1), false) == SignalAction::kForward);
  CHECK(t.onSignal(fromOutside(SIGTERM), false) == SignalAction::kStop);
  CHECK(t.onSignal(fromOutside(SIGTERM), true) == SignalAction::kDrop);
  CHECK(t.onSignal(fromOutside(SIGHUP), true) == SignalAction::kForward);
  SignalTally failing;  // stopping after a worker failure: the first SIGINT is only forwarded
  CHECK(failing.onSignal(fromOutside(SIGINT), true) == SignalAction::kForward);
  CHECK(failing.onSignal(fromOutside(SIGINT), true) == SignalAction::kKillNow);
}

TEST_CASE("only TERM, INT, HUP and QUIT ask to stop", "[signals]") {
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) CHECK(asksToStop(s));
  for (int s : {SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, SIGALRM}) CHECK_FALSE(asksToStop(s));
}

TEST_CASE("the receiver tells a relay in our process group from a sender outside it",
          "[signals]") {
  boost::asio::io_context io;
  std::optional<ReceivedSignal> got;
  SignalReceiver receiver(io, {SIGUSR2}, {}, [&](const ReceivedSignal& s) { got = s; });
  REQUIRE(receiver.handled() == std::vector<int>{SIGUSR2});
  for (bool ownGroup : {false, true}) {
    got.reset();
    const pid_t child = sendFromChild(SIGUSR2, ownGroup);
    const auto s = receiveOne(io, got);
    ::waitpid(child, nullptr, 0);
    REQUIRE(s);
    CHECK(s->signo == SIGUSR2);
    CHECK(s->code == SI_USER);
    CHECK(s->sender == child);
    CHECK(s->relay == !ownGroup);
  }
  got.reset();
  ::kill(::getpid(), SIGUSR2);  // our own copy is not a relay
  const auto self = receiveOne(io, got);
  REQUIRE(self);
  CHECK_FALSE(self->relay);
}

TEST_CASE("poll() handles a signal that came while the io_context ran nothing", "[signals]") {
  boost::asio::io_context io;
  std::vector<int> got;
  SignalReceiver receiver(io, {SIGUSR2}, {},
                          [&](const ReceivedSignal& s) { got.push_back(s.signo); });
  REQUIRE(::raise(SIGUSR2) == 0);  // its handler ran: the record waits in the pipe
  CHECK(got.empty());
  receiver.poll();
  CHECK(got == std::vector<int>{SIGUSR2});
  receiver.poll();  // nothing more
  CHECK(got.size() == 1);
}

TEST_CASE("a signal ignored at start stays ignored unless named", "[signals]") {
  boost::asio::io_context io;
  ::signal(SIGUSR2, SIG_IGN);
  {
    SignalReceiver receiver(io, {SIGUSR2, SIGUSR1}, {}, [](const ReceivedSignal&) {});
    CHECK(receiver.leftIgnored() == std::vector<int>{SIGUSR2});
    CHECK(receiver.handled() == std::vector<int>{SIGUSR1});
  }
  {
    SignalReceiver receiver(io, {SIGUSR2}, {SIGUSR2}, [](const ReceivedSignal&) {});
    CHECK(receiver.handled() == std::vector<int>{SIGUSR2});
    struct sigaction now {};
    ::sigaction(SIGUSR2, nullptr, &now);
    CHECK(now.sa_handler != SIG_IGN);
  }
  struct sigaction restored {};
  ::sigaction(SIGUSR2, nullptr, &restored);
  CHECK(restored.sa_handler == SIG_IGN);  // the receiver put back what it found
  ::signal(SIGUSR2, SIG_DFL);
}

}  // namespace ddp
