// What hang detection reads about a worker's processes from /proc (on a timer tick, only while
// --hang-timeout is on; never in a loop of its own).
//
// Thread safety: reentrant functions; each reads /proc afresh.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

// CPU time (clock ticks, user + system) of `root` and everything below it: root's own and its
// reaped children's (cutime, cstime), plus every live descendant's. nullopt when root is gone.
// Non-blocking.
std::optional<uint64_t> treeCpuTicks(pid_t root);

// Time (ns) the threads of `root` and of every live process below it have spent runnable but
// waiting for a CPU (/proc/<pid>/task/<tid>/schedstat, run_delay). A worker starved of CPU on a
// loaded machine accrues this instead of CPU time; a blocked one accrues neither. 0 when unreadable
// (a kernel without schedstats). Non-blocking.
uint64_t treeRunDelayNs(pid_t root);

// `root` and every live process below it, root first. A process's children come from its threads'
// /proc/<pid>/task/<tid>/children where the kernel has them (CONFIG_PROC_CHILDREN), else from a
// pass over every /proc/<pid>/stat (process_tree.hpp). Just root when it is gone. Non-blocking.
std::vector<pid_t> processTree(pid_t root);

// The threads of `pid` (/proc/<pid>/task); empty once it is gone. Non-blocking.
std::vector<pid_t> threadsOf(pid_t pid);

// True when `pid` is `worker`, in the worker's process group, or below it (its parent chain
// reaches the worker). Non-blocking.
bool belongsToWorker(pid_t pid, pid_t worker);

// True when `pid` runs a Python interpreter (/proc/<pid>/exe is python*). Non-blocking.
bool isPythonProcess(pid_t pid);

// The fields of /proc/<pid>/stat after the command name ("S ppid pgrp ..."), "" when unreadable.
std::string statFields(pid_t pid);

}  // namespace ddp
