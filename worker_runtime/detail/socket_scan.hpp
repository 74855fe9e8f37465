// Socket scans for aborting Gloo (worker_runtime/gloo_communicator.hpp, elastic_group.hpp): Gloo
// does not expose its pairs' descriptors, so the connections a communicator opened are the TCP
// sockets that appeared while it was built, less those to the worker store.
//
// Thread safety: any thread. A descriptor listed here stays its owner's: shutDown() never closes
// one, so a blocked peer operation fails (as on a closed connection) without a descriptor reused.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

namespace ddp::detail {

// This process's socket descriptors (from /proc/self/fd; empty when it cannot be read).
std::set<int> socketDescriptors();

// The connected TCP sockets opened since `before` (a socketDescriptors() result) whose peer port
// is not `storePort`. (Another thread's connection opened meanwhile is listed too; shutting it
// down at worst fails that connection as well.) Shutting down one that Gloo has not yet taken as
// connected can make Gloo's device thread throw (getpeername on a closed socket), so only once
// the connections had time to be taken.
std::vector<int> connectionsOpenedSince(const std::set<int>& before, uint16_t storePort);

// The listening TCP sockets opened since `before`: Gloo's pairs waiting for their peer to connect.
// shutdown(2) of one fails its pending accept, which Gloo reports as that pair's error: safe at
// any time.
std::vector<int> listenersOpenedSince(const std::set<int>& before);

// shutdown(2) of each, reads and writes.
void shutDown(const std::vector<int>& fds) noexcept;

}  // namespace ddp::detail
