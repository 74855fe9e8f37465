// GlooCommunicator: every collective with 1-4 ranks as threads over an InMemoryStore and real
// loopback TCP pairs, fp32 and bf16, sum and avg, checked exactly; timeouts instead of hangs.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "tests/worker_runtime/rank_threads.hpp"
#include "worker_runtime/bfloat16.hpp"
#include "worker_runtime/gloo_communicator.hpp"

using namespace std::chrono_literals;
using ddp::DataType;
using ddp::ReduceOp;
using ddp::test::firstError;
using ddp::test::glooOptions;
using ddp::test::runRanks;

namespace {

// Small integers, so every sum is exact in float32 and in bfloat16.
float valueAt(int rank, std::size_t i) { return static_cast<float>((rank + 1) * (i % 5 + 1)); }

float expectedSum(int size, std::size_t i) {
  return static_cast<float>(size * (size + 1) / 2 * (i % 5 + 1));
}

float expectedReduced(int size, std::size_t i, ReduceOp op) {
  float sum = expectedSum(size, i);
  return op == ReduceOp::kSum ? sum : sum / static_cast<float>(size);
}

// A buffer of `count` elements of `type` holding f(i), and its float view.
struct TypedBuffer {
  DataType type;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;

  TypedBuffer(DataType t, std::size_t count) : type(t) {
    if (t == DataType::kFloat32) f32.resize(count); else bf16.resize(count);
  }
  void* data() { return type == DataType::kFloat32 ? static_cast<void*>(f32.data()) : bf16.data(); }
  std::size_t size() const { return type == DataType::kFloat32 ? f32.size() : bf16.size(); }
  void set(std::size_t i, float v) {
    if (type == DataType::kFloat32) f32[i] = v; else bf16[i] = ddp::floatToBf16(v);
  }
  float get(std::size_t i) const {
    return type == DataType::kFloat32 ? f32[i] : ddp::bf16ToFloat(bf16[i]);
  }
};

float rounded(DataType type, float v) {
  return type == DataType::kFloat32 ? v : ddp::bf16ToFloat(ddp::floatToBf16(v));
}

// Per rank: the number of elements that differ from the expectation.
using Mismatches = std::vector<std::size_t>;

}  // namespace

TEST_CASE("allreduce sums and averages fp32 and bf16 exactly", "[gloo][allreduce]") {
  for (int size : {2, 3, 4}) {
    for (DataType type : {DataType::kFloat32, DataType::kBFloat16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        for (std::size_t count : {std::size_t{1}, std::size_t{1001}, std::size_t{300000}}) {
          Mismatches bad(size, 0);
          auto errors = runRanks(size, glooOptions(), [&](ddp::Communicator& comm) {
            TypedBuffer buf(type, count);
            // Twice on the same buffer: the second call reuses the cached Gloo set-up.
            for (int round = 0; round < 2; ++round) {
              for (std::size_t i = 0; i < count; ++i) buf.set(i, valueAt(comm.rank(), i));
              comm.allreduce(buf.data(), count, type, op);
              for (std::size_t i = 0; i < count; ++i) {
                if (buf.get(i) != rounded(type, expectedReduced(size, i, op))) ++bad[comm.rank()];
              }
            }
          });
          INFO("size " << size << " type " << int(type) << " op " << int(op) << " count " << count);
          REQUIRE(firstError(errors) == "");
          CHECK(bad == Mismatches(size, 0));
        }
      }
    }
  }
}

TEST_CASE("broadcast delivers the root's bytes to every rank", "[gloo][broadcast]") {
  const int size = 3;
  for (int root = 0; root < size; ++root) {
    for (std::size_t bytes : {std::size_t{1}, std::size_t{100003}}) {
      Mismatches bad(size, 0);
      auto errors = runRanks(size, glooOptions(), [&](ddp::Communicator& comm) {
        std::vector<uint8_t> buf(bytes, static_cast<uint8_t>(0xA0 + comm.rank()));
        if (comm.rank() == root) {
          for (std::size_t i = 0; i < bytes; ++i) buf[i] = static_cast<uint8_t>(i * 7 + root);
        }
        comm.broadcast(buf.data(), bytes, root);
        for (std::size_t i = 0; i < bytes; ++i) {
          if (buf[i] != static_cast<uint8_t>(i * 7 + root)) ++bad[comm.rank()];
        }
      });
      INFO("root " << root << " bytes " << bytes);
      REQUIRE(firstError(errors) == "");
      CHECK(bad == Mismatches(size, 0));
    }
  }
}

TEST_CASE("barrier lets nobody through before everybody arrived", "[gloo][barrier]") {
  const int size = 4;
  std::atomic<int> arrived{0};
  std::vector<int> seen(size, -1);
  auto errors = runRanks(size, glooOptions(), [&](ddp::Communicator& comm) {
    arrived.fetch_add(1);
    comm.barrier();
    seen[comm.rank()] = arrived.load();
    comm.barrier();  // a second barrier on the same communicator works too
  });
  REQUIRE(firstError(errors) == "");
  CHECK(seen == std::vector<int>(size, size));
}

TEST_CASE("allgather places rank r's block at r * count", "[gloo][allgather]") {
  const int size = 3;
  const std::size_t count = 1001;
  for (DataType type : {DataType::kFloat32, DataType::kBFloat16}) {
    for (bool inPlace : {false, true}) {
      Mismatches bad(size, 0);
      auto errors = runRanks(size, glooOptions(), [&](ddp::Communicator& comm) {
        TypedBuffer send(type, count);
        TypedBuffer recv(type, count * size);
        for (std::size_t i = 0; i < count; ++i) send.set(i, valueAt(comm.rank(), i));
        const void* from = send.data();
        if (inPlace) {
          for (std::size_t i = 0; i < count; ++i) recv.set(comm.rank() * count + i, send.get(i));
          from = static_cast<char*>(recv.data()) +
                 comm.rank() * count * (type == DataType::kFloat32 ? 4 : 2);
        }
        comm.allgather(from, recv.data(), count, type);
        for (int r = 0; r < size; ++r) {
          for (std::size_t i = 0; i < count; ++i) {
            if (recv.get(r * count + i) != valueAt(r, i)) ++bad[comm.rank()];
          }
        }
      });
      INFO("type " << int(type) << " in place " << inPlace);
      REQUIRE(firstError(errors) == "");
      CHECK(bad == Mismatches(size, 0));
    }
  }
}

TEST_CASE("reduceScatter gives each rank its reduced block", "[gloo][reduce_scatter]") {
  for (int size : {2, 4}) {
    for (DataType type : {DataType::kFloat32, DataType::kBFloat16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        for (std::size_t count : {std::size_t{1}, std::size_t{777}}) {
          Mismatches bad(size, 0);
          auto errors = runRanks(size, glooOptions(), [&](ddp::Communicator& comm) {
            TypedBuffer send(type, count * size);
            TypedBuffer recv(type, count);
            for (std::size_t i = 0; i < send.size(); ++i) send.set(i, valueAt(comm.rank(), i));
            comm.reduceScatter(send.data(), recv.data(), count, type, op);
            for (std::size_t i = 0; i < count; ++i) {
              std::size_t global = comm.rank() * count + i;
              if (recv.get(i) != rounded(type, expectedReduced(size, global, op))) {
                ++bad[comm.rank()];
              }
            }
          });
          INFO("size " << size << " type " << int(type) << " op " << int(op) << " count " << count);
          REQUIRE(firstError(errors) == "");
          CHECK(bad == Mismatches(size, 0));
        }
      }
    }
  }
}

TEST_CASE("a group of one runs every collective locally", "[gloo]") {
  auto errors = runRanks(1, glooOptions(), [&](ddp::Communicator& comm) {
    std::vector<float> buf{1.5f, 2.5f};
    comm.allreduce(buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kAvg);
    comm.broadcast(buf.data(), sizeof(float) * buf.size(), 0);
    comm.barrier();
    std::vector<float> out(2);
    comm.allgather(buf.data(), out.data(), 2, DataType::kFloat32);
    std::vector<float> one(2);
    comm.reduceScatter(out.data(), one.data(), 2, DataType::kFloat32, ReduceOp::kSum);
    if (one != std::vector<float>{1.5f, 2.5f}) throw std::runtime_error("wrong local result");
  });
  CHECK(firstError(errors) == "");
}

TEST_CASE("the factory builds Gloo with the requested rank, size and loopback binding", "[gloo]") {
  std::vector<std::string> bound(2);
  auto errors = runRanks(2, glooOptions(), [&](ddp::Communicator& comm) {
    if (comm.backend() != ddp::CommBackend::kGloo || comm.size() != 2) {
      throw std::runtime_error("wrong backend or size");
    }
    bound[comm.rank()] = dynamic_cast<ddp::GlooCommunicator&>(comm).bindAddress();
  });
  REQUIRE(firstError(errors) == "");
  CHECK(bound == std::vector<std::string>{"127.0.0.1", "127.0.0.1"});
  CHECK(ddp::resolveBackend(ddp::CommBackend::kGloo) == ddp::CommBackend::kGloo);
}

TEST_CASE("a bad broadcast root is a ConfigError, not a hang", "[gloo][broadcast]") {
  auto errors = runRanks(1, glooOptions(), [&](ddp::Communicator& comm) {
    char byte = 0;
    comm.broadcast(&byte, 1, 1);
  });
  CHECK_THAT(firstError(errors), Catch::Contains("broadcast root 1"));
}

TEST_CASE("send and recv carry bytes between two ranks, in order, beside collectives",
          "[gloo][p2p]") {
  // Rank 0 sends three messages to rank 3 and rank 3 one back; ranks 1 and 2 take no part in them
  // and go straight to the allreduce after (its slots must not meet the messages').
  const int size = 4;
  std::vector<std::vector<uint8_t>> got(3);
  std::vector<uint8_t> back;
  std::vector<float> sums(size, 0);
  auto errors = runRanks(size, glooOptions(), [&](ddp::Communicator& comm) {
    if (comm.rank() == 0) {
      for (std::size_t i = 0; i < 3; ++i) {
        std::vector<uint8_t> message(100003 * (i + 1), static_cast<uint8_t>(0x10 + i));
        comm.send(message.data(), message.size(), 3);
      }
      uint8_t reply = 0;
      comm.recv(&reply, 1, 3);
      back = {reply};
    } else if (comm.rank() == 3) {
      for (std::size_t i = 0; i < 3; ++i) {
        got[i].assign(100003 * (i + 1), 0);
        comm.recv(got[i].data(), got[i].size(), 0);
      }
      const uint8_t reply = 0x5A;
      comm.send(&reply, 1, 0);
    }
    float v = float(comm.rank());
    comm.allreduce(&v, 1, DataType::kFloat32, ReduceOp::kSum);
    sums[comm.rank()] = v;
  });
  REQUIRE(firstError(errors) == "");
  for (std::size_t i = 0; i < 3; ++i) {
    INFO("message " << i);
    CHECK(got[i] == std::vector<uint8_t>(100003 * (i + 1), static_cast<uint8_t>(0x10 + i)));
  }
  CHECK(back == std::vector<uint8_t>{0x5A});
  CHECK(sums == std::vector<float>(size, 6.0f));
}

TEST_CASE("a send to itself or outside the group is a ConfigError, not a hang", "[gloo][p2p]") {
  for (int peer : {0, 2, -1}) {
    auto errors = runRanks(2, glooOptions(), [&](ddp::Communicator& comm) {
      if (comm.rank() != 0) return;
      char byte = 0;
      comm.send(&byte, 1, peer);
    });
    INFO("peer " << peer);
    CHECK_THAT(firstError(errors), Catch::Contains("peer " + std::to_string(peer) +
                                                   " is not another rank"));
  }
}

TEST_CASE("a receive from a peer that leaves fails within the budget instead of hanging",
          "[gloo][p2p]") {
  auto errors = runRanks(2, glooOptions(std::chrono::seconds(20)), [&](ddp::Communicator& comm) {
    if (comm.rank() != 0) return;  // rank 1 destroys its communicator: its pair closes
    char byte = 0;
    comm.recv(&byte, 1, 1);
  });
  CHECK_THAT(firstError(errors), Catch::Contains("receive of 1 bytes from rank 1"));
}

// A message cut halfway (its sender died or froze with the rest unsent): Gloo wakes the waits of
// the messages it has queued when a pair fails, not the one it is reading, so only abort() can
// end this receive before its budget.
TEST_CASE("abort() ends a receive whose message stopped halfway on the wire", "[gloo][p2p]") {
  constexpr std::size_t kHalf = std::size_t(4) << 20;
  // As ElasticGroup does: Gloo's writes to a pair the other side closed fail instead.
  ::signal(SIGPIPE, SIG_IGN);
  std::vector<char> into(2 * kHalf, 0);
  std::string receiveError, laterError;
  std::chrono::steady_clock::duration blocked{};
  auto errors = runRanks(2, glooOptions(20s), [&](ddp::Communicator& comm) {
    if (comm.rank() == 0) {
      // Its second half cannot be read: the writev of the message fails there (EFAULT) and the
      // pair closes, with the first half on the wire.
      void* mem = ::mmap(nullptr, 2 * kHalf, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
      if (mem == MAP_FAILED) throw std::runtime_error("mmap failed");
      std::memset(mem, 1, kHalf);
      ::mprotect(static_cast<char*>(mem) + kHalf, kHalf, PROT_NONE);
      dynamic_cast<ddp::GlooCommunicator&>(comm).setTimeout(500ms);
      try {
        comm.send(mem, 2 * kHalf, 1);
      } catch (const ddp::CommError&) {
      }
      ::munmap(mem, 2 * kHalf);
      return;
    }
    // Aborted once the first bytes of the message arrived (Gloo writes them into `into`).
    std::thread aborter([&] {
      while (__atomic_load_n(&into[0], __ATOMIC_ACQUIRE) == 0) std::this_thread::yield();
      comm.abort();
    });
    const auto start = std::chrono::steady_clock::now();
    try {
      comm.recv(into.data(), into.size(), 0);
      receiveError = "no error";
    } catch (const ddp::CommError& e) {
      receiveError = e.what();
    }
    blocked = std::chrono::steady_clock::now() - start;
    aborter.join();
    // Every later operation fails too, at once (the error is sticky).
    try {
      comm.barrier();
      laterError = "no error";
    } catch (const ddp::CommError& e) {
      laterError = e.what();
    }
  });
  REQUIRE(firstError(errors) == "");
  CHECK_THAT(receiveError, Catch::Contains("receive of 8388608 bytes from rank 0") &&
                               Catch::Contains("aborted"));
  CHECK(laterError == receiveError);
  // Well inside the 20 s budget the receive would otherwise wait.
  CHECK(blocked < 10s);
}
