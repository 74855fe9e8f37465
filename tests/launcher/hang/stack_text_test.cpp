// What hang detection makes of collected stacks: gdb's chatter dropped and the main thread first,
// Python's dump without its noise, trimming, and "waiting for its peers" from the frames.
#include "launcher/hang/stack_text.hpp"

#include <catch2/catch.hpp>

namespace ddp {

namespace {

const char* kGdb = R"(
[Thread debugging using libthread_db enabled]
Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".
0x00007f in clock_nanosleep () from /lib/x86_64-linux-gnu/libc.so.6

Thread 2 (Thread 0x7f1 (LWP 11) "train"):
#0  epoll_wait (epfd=...) at epoll_wait.c:30
#1  gloo::transport::tcp::Loop::run() () from /lib/libgloo.so.0

Thread 1 (Thread 0x7f0 (LWP 10) "train"):
#0  __GI___clock_nanosleep (clock_id=...) at clock_nanosleep.c:48
#1  ddp::(anonymous namespace)::injectedHang (rank=..., step=...) at trainer.cpp:45
[Inferior 1 (process 10) detached]
)";

}  // namespace

TEST_CASE("gdb's output keeps threads and frames, the main thread first", "[stacks]") {
  const std::string clean = cleanGdbStacks(kGdb);
  CHECK(clean.find("libthread_db") == std::string::npos);
  CHECK(clean.find("detached") == std::string::npos);
  const auto main = clean.find("Thread 1 (");
  const auto other = clean.find("Thread 2 (");
  REQUIRE(main != std::string::npos);
  REQUIRE(other != std::string::npos);
  CHECK(main < other);
  CHECK(clean.find("injectedHang") < other);
}

TEST_CASE("after the main thread come the threads waiting for peers", "[stacks]") {
  const std::string gdb =
      "Thread 3 (LWP 12):\n#0 futex_wait ()\n#1 ddp::GlooCommunicator::allreduce ()\n"
      "Thread 2 (LWP 11):\n#0 epoll_wait ()\n#1 gloo::transport::tcp::Loop::run() ()\n"
      "Thread 1 (LWP 10):\n#0 futex_wait ()\n#1 ddp::Reducer::finish ()\n";
  const std::string clean = cleanGdbStacks(gdb);
  CHECK(clean.find("Thread 1") < clean.find("Thread 3"));
  CHECK(clean.find("Thread 3") < clean.find("Thread 2"));
}

TEST_CASE("the trainer's shared-memory allreduce counts as waiting for peers", "[stacks]") {
  const std::string gdb =
      "Thread 3 (LWP 12):\n#0 syscall ()\n#1 ddp::ShmAllreduce::waitForPeer ()\n"
      "Thread 2 (LWP 11):\n#0 epoll_wait ()\n#1 gloo::transport::tcp::Loop::run() ()\n"
      "Thread 1 (LWP 10):\n#0 futex_wait ()\n#1 ddp::Reducer::finish ()\n";
  const std::string clean = cleanGdbStacks(gdb);
  CHECK(clean.find("Thread 3") < clean.find("Thread 2"));
}

TEST_CASE("gdb's output without frames is kept as it is (it says why)", "[stacks]") {
  const std::string error = "ptrace: Operation not permitted.\n";
  CHECK(cleanGdbStacks(error) == error);
}

TEST_CASE("a Python dump loses the abort headline and the module list", "[stacks]") {
  const std::string dump =
      "Fatal Python error: Aborted\n\nCurrent thread 0x7f (most recent call first):\n"
      "  File \"w.py\", line 4 in just_sleep\n\nExtension modules: torch._C, numpy (total: 2)\n";
  CHECK(cleanPythonDump(dump) ==
        "Current thread 0x7f (most recent call first):\n  File \"w.py\", line 4 in just_sleep\n\n");
}

TEST_CASE("trimming keeps the first lines and says where the rest is", "[stacks]") {
  CHECK(trimStacks("a\nb\n", 5, "/x/stacks.txt") == "a\nb\n");
  CHECK(trimStacks("a\nb\nc\nd\n", 2, "/x/stacks.txt") == "a\nb\n... 2 more line(s) in /x/stacks.txt\n");
}

TEST_CASE("waiting for peers: collectives and store waits, not Gloo's idle loop", "[stacks]") {
  CHECK_FALSE(waitsForPeer(cleanGdbStacks(kGdb)));
  CHECK(waitsForPeer("#3  ddp::GlooCommunicator::allreduce (this=...) at gloo_communicator.cpp:133\n"));
  CHECK(waitsForPeer("#2  gloo::transport::tcp::UnboundBuffer::waitRecv(int*, ...) ()\n"));
  CHECK(waitsForPeer("#5  c10d::ProcessGroupNCCL::WorkNCCL::wait(...)\n"));
  CHECK(waitsForPeer(
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1536 "
      "in all_reduce\n"));
  CHECK_FALSE(waitsForPeer("  File \"w.py\", line 4 in just_sleep\n"));
}

}  // namespace ddp
