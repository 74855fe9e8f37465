// FailureSequencer: the agent's side of the job-wide failure order (failure_summary.hpp).
//
// A worker linking worker_runtime numbers its own failure from the generation's counter in the
// worker store (rendezvous/store/worker_store_keys.hpp) before it exits. For a failed worker that did
// not (torch workers, a signal, a crash), the agent takes the next number of the same counter when
// it reaps the worker: later than the exit, but in the one order every node shares. The store is
// the one the workers were given (MASTER_ADDR:MASTER_PORT of their environment), which every
// agent of the generation can reach.
//
// Thread safety: use from one thread (the supervisor's io thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>


namespace ddp {

class Store;

class FailureSequencer {
 public:
  // For workers started with `env` (MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT);
  // nullptr when those are missing or malformed. Does not connect.
  static std::unique_ptr<FailureSequencer> forWorkers(
      const std::map<std::string, std::string>& env, std::chrono::milliseconds budget);

  FailureSequencer(std::string addr, uint16_t port, int64_t generation,
                   std::chrono::milliseconds budget);
  ~FailureSequencer();
  FailureSequencer(const FailureSequencer&) = delete;
  FailureSequencer& operator=(const FailureSequencer&) = delete;

  // The next number of the generation's failure counter. Connects on first use. Blocks up to
  // `budget` per call; nullopt (logged once) when the store does not answer in time — then it
  // stops trying for this generation. Never throws.
  std::optional<int64_t> next();

 private:
  std::string addr_;
  uint16_t port_;
  int64_t generation_;
  std::chrono::milliseconds budget_;
  std::unique_ptr<Store> store_;
  bool failed_ = false;
};

}  // namespace ddp
