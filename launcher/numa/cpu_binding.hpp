// CpuBinding: a worker's CPU affinity and NUMA memory policy in the kernel's own formats, built in
// the agent before fork and applied by the worker's guardian to itself right before it starts the
// worker (both are inherited across fork and exec, so the worker and everything it starts run
// under them).
//
// Memory policy: "preferred" on the given nodes (MPOL_PREFERRED_MANY, Linux 5.15+; older kernels
// get MPOL_PREFERRED on the first of them). Allocations come from those nodes while they have free
// memory and from the others after that, like `numactl --preferred`, never an out-of-memory kill
// because one node filled up, as a strict bind (`numactl --membind`) would risk.
//
// Thread safety: applyCpuBinding affects the calling thread only and makes raw system calls only
// (no allocation, no locks): it is async-signal-safe, for a child forked from the multi-threaded
// agent. The other functions may be called from any thread.
#pragma once

#include <vector>

#include "launcher/numa/numa_binding.hpp"

namespace ddp {

struct CpuBinding {
  std::vector<unsigned long> cpuMask;        // bit i = CPU i; empty: the CPUs are left alone
  std::vector<unsigned long> nodeMask;       // bit i = NUMA node i; empty: memory is left alone
  std::vector<unsigned long> firstNodeMask;  // the first node of nodeMask (older kernels)
};

// The binding for `cpus` (empty: none) and `memNodes` (empty: none). Does not block or throw.
CpuBinding makeCpuBinding(const IndexList& cpus, const IndexList& memNodes);

// Applies `binding` to the calling thread: sched_setaffinity, then set_mempolicy. Returns 0, or
// the errno of the call that failed (nothing is undone). Async-signal-safe.
int applyCpuBinding(const CpuBinding& binding) noexcept;

// The CPUs the calling thread may run on (its affinity mask). Empty when it cannot be read.
IndexList currentCpuAffinity();

// The NUMA nodes the calling process may allocate memory from (its cpuset's mems, through
// get_mempolicy(MPOL_F_MEMS_ALLOWED)). Empty when it cannot be read.
IndexList allowedMemoryNodes();

}  // namespace ddp
