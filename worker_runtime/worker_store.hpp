// Worker store: the TCPStore-compatible key-value store the workers of one restart generation
// share, at MASTER_ADDR:MASTER_PORT (docs/running.md#worker-environment-exactly-torchruns).
//
// With TORCHELASTIC_USE_AGENT_STORE=True (what ddprun always sets) every rank, rank 0 included,
// connects as a client to the store the agent hosts. Otherwise (torch 1.13's c10d rendezvous) rank
// 0 hosts the server on MASTER_PORT itself and every rank connects to it; the server lives as long
// as the returned store. Either way keys live under "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>/",
// as with torch's env:// rendezvous, so a store shared across restarts never mixes generations.
//
// Thread safety: the returned store is thread-safe (TcpStoreClient serialises callers).
#pragma once

#include <chrono>
#include <memory>

#include "rendezvous/store/store.hpp"
#include "worker_runtime/worker_env.hpp"

namespace ddp {

// Connects to (or, see above, hosts and connects to) the worker store. Blocks until connected or
// `timeout` passes; the returned store's own timeout for get/wait is also `timeout`.
// Throws TimeoutError listing the connect attempts, ConfigError when MASTER_ADDR does not resolve,
// NetworkError when rank 0 cannot bind MASTER_PORT.
std::unique_ptr<Store> connectWorkerStore(const WorkerEnv& env, std::chrono::milliseconds timeout);

// The connection behind a store connectWorkerStore() returned, without its key prefix: for the
// keys agents and workers share (rendezvous/store/worker_store_keys.hpp), on the same connection.
// Valid as long as `workerStore`. Throws std::bad_cast for a store connectWorkerStore() did not
// return.
Store& unprefixed(Store& workerStore);

}  // namespace ddp
