// Test helper: N ranks of one communicator group as N threads of this process, sharing an
// InMemoryStore. Catch2 assertions are not thread-safe, so rank bodies record results and the test
// checks them on the main thread after every rank finished.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/store/in_memory_store.hpp"
#include "rendezvous/store/store.hpp"
#include "worker_runtime/communicator.hpp"
#include "worker_runtime/worker_env.hpp"

namespace ddp::test {

inline WorkerEnv loopbackEnv(int rank, int size) {
  WorkerEnv env;
  env.rank = rank;
  env.localRank = rank;
  env.worldSize = size;
  env.localWorldSize = size;
  env.master.host = "127.0.0.1";
  env.master.port = 29500;  // only used to find the route; nothing listens there
  return env;
}

inline CommOptions glooOptions(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  CommOptions options;
  options.backend = CommBackend::kGloo;
  options.timeout = timeout;
  return options;
}

// Runs body(rank, store) on `size` threads and returns each rank's escaped exception (or null).
inline std::vector<std::exception_ptr> runThreads(int size,
                                                  const std::function<void(int, Store&)>& body) {
  InMemoryStore store(std::chrono::seconds(60));
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank, store);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Builds one communicator per rank with `options` and runs body(comm) on it.
inline std::vector<std::exception_ptr> runRanks(int size, const CommOptions& options,
                                                const std::function<void(Communicator&)>& body) {
  return runThreads(size, [&](int rank, Store& store) {
    auto comm = makeCommunicator(loopbackEnv(rank, size), store, options);
    body(*comm);
  });
}

// "" when no rank failed, else "rank r: what()" of the first failure.
inline std::string firstError(const std::vector<std::exception_ptr>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      return "rank " + std::to_string(r) + ": " + e.what();
    } catch (...) {
      return "rank " + std::to_string(r) + ": unknown exception";
    }
  }
  return "";
}

// A countdown that can be waited on with a deadline (std::latch cannot).
class Countdown {
 public:
  explicit Countdown(int count) : count_(count) {}
  void arrive() {
    std::lock_guard lock(mutex_);
    if (--count_ <= 0) cv_.notify_all();
  }
  bool waitFor(std::chrono::milliseconds budget) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, budget, [&] { return count_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_;  // Guarded by mutex_
};

}  // namespace ddp::test
