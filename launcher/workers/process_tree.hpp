// Process-tree helpers that stay async-signal-safe: they use raw system calls and stack buffers
// only (no allocation, no locks, no stdio), so a process forked from the multi-threaded agent may
// call them for its whole life without exec (the worker guardian, guardian.hpp).
//
// Children are found through /proc: the parent field of every /proc/<pid>/stat (a pass over all
// processes of the machine).
//
// Thread safety: reentrant; nothing is shared between calls.
#pragma once

#include <sys/types.h>

namespace ddp {

// Calls fn(child, ctx) once for every child of `parent` that exists now (zombies included).
// Returns the number of children visited, or -1 when /proc cannot be read. Never blocks beyond the
// /proc reads.
int forEachChild(pid_t parent, void (*fn)(pid_t child, void* ctx), void* ctx);

// SIGKILLs every process below the calling process and reaps them, until it has no child left.
// The caller must be a child subreaper (PR_SET_CHILD_SUBREAPER), so that the children of a killed
// process become its own and are found on the next pass; a process that called setsid() is found
// the same way. Blocks until every child was reaped (milliseconds; longer only for a process in
// uninterruptible sleep). Reaps without keeping statuses: call it after the statuses you need were
// collected.
void killAllDescendants();

// True when the calling process has at least one child (running or not yet reaped).
bool hasChildren();

}  // namespace ddp
