// The handover in a fresh rendezvous store after a store failover (store_failover.hpp): the
// survivors tell the new host what they know of the job before anybody joins a round, so the job
// carries on from the highest generation and restart count any of them knew, with every failure
// record any of them had.
//
// Keys (only in the fresh store, which lives for the rest of the job):
//   rdzv/_failover/reports   each survivor's encodeSnapshot(), framed, appended
//   rdzv/_failover/arrived   how many survivors reported (add)
//   rdzv/_failover/all       set by the survivor whose report was the last one expected
//   rdzv/_failover/seeded    set by the new host once the merged state is written: nobody calls
//                            Rendezvous::next() on the new store before it exists
//
// A survivor reports, then waits for `seeded`. The new host waits for `all` (up to its bound:
// a survivor that died meanwhile is not waited for), merges the reports into its own snapshot
// (mergeSnapshots), writes seedKeys() of the result, then sets `seeded`. A survivor that reports
// after that is too late to count; it joins the next round all the same.
//
// Thread safety: free functions over the Store given. Blocking as said per function.
#pragma once

#include <chrono>

#include "rendezvous/algorithm/job_snapshot.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp {

// A survivor that is not the new host: reports `own`, and blocks until the new host seeded the
// store or `timeout` passed. `expected`: how many survivors report (the new host not counted).
// Throws TimeoutError (the new host never seeded it), NetworkError.
void reportToNewHost(Store& store, const JobSnapshot& own, int expected,
                     std::chrono::milliseconds timeout);

// The new host: waits up to `timeout` for `expected` reports, merges them into `own`, writes the
// merged job state and releases the survivors. Returns the merged snapshot. Throws NetworkError,
// ProtocolError (a malformed report).
JobSnapshot seedFromReports(Store& store, const JobSnapshot& own, int expected,
                            std::chrono::milliseconds timeout);

}  // namespace ddp
