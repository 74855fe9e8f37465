// Socket scans for aborting Gloo (worker_runtime/gloo_communicator.hpp, elastic_group.hpp): Gloo
// does not expose its pairs' descriptors, so the connections a communicator opened are the TCP
// sockets that appeared while it was built, less those to the worker store.
//
// Thread safety: any thread. A descriptor listed here stays its owner's: shutDown() never closes
// one, so a blocked peer operation fails (as on a closed connection) without a descriptor reused.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddp::detail {

// This process's sockets: descriptor -> the socket's inode (from /proc/self/fd; empty when it
// cannot be read). "Opened since" compares inodes, never descriptor numbers: a number is reused as
// soon as it is closed (the lowest free one), so a pair socket of a build that got the number of
// one the previous communicator closed meanwhile (on its retiring thread) would be taken for an
// old one and never shut down: the build then waited its whole budget for a peer that was gone.
using SocketTable = std::map<int, uint64_t>;
SocketTable socketDescriptors();

// The connected TCP sockets opened since `before` (a socketDescriptors() result) with
// `storePort` at neither end (the store client's connections, and the server's ends of them where
// this process hosts the store). (Another thread's connection opened meanwhile is listed too; shutting it
// down at worst fails that connection as well.) Shutting down one that Gloo has not yet taken as
// connected can make Gloo's device thread throw (getpeername on a closed socket), so only once
// the connections had time to be taken.
std::vector<int> connectionsOpenedSince(const SocketTable& before, uint16_t storePort);

// The listening TCP sockets opened since `before`: Gloo's pairs waiting for their peer to connect.
// shutdown(2) of one fails its pending accept, which Gloo reports as that pair's error: safe at
// any time.
std::vector<int> listenersOpenedSince(const SocketTable& before);

// Shuts down the TCP sockets opened since `before` whose connect is still in progress (SYN-SENT)
// though their SYN was sent again at least once: a peer that answers nothing (a frozen host, one
// whose accept queue is full: a stopped process) leaves Gloo's connect waiting through every SYN
// retry (tcp_syn_retries: ~2 min), and neither listenersOpenedSince() nor
// connectionsOpenedSince() lists such a socket. shutdown(2) fails the connect with ECONNRESET,
// which Gloo reports as that pair's error. Only after a retransmission: a connect that is about to
// complete (the peer answers within microseconds on loopback, and only right after a SYN was sent)
// must not be shut down, or Gloo's device thread finds it closed as it takes it as connected
// (getpeername). The state is read right before each shutdown. Returns how many.
int shutDownStalledConnects(const SocketTable& before) noexcept;

// The TCP states of the sockets opened since `before`, for a log line: "ESTABLISHED 2, SYN-SENT 1"
// ("none" when there are none).
std::string tcpStatesOpenedSince(const SocketTable& before);

// shutdown(2) of each, reads and writes.
void shutDown(const std::vector<int>& fds) noexcept;

// `fds` with the inode of the socket each holds now (those that hold none are left out): what
// shutDownSame() checks before it shuts one down, for a list kept until later.
SocketTable identify(const std::vector<int>& fds);

// shutdown(2) of each descriptor of `sockets` that still holds the same socket (its inode): one
// closed meanwhile and its number reused (by another thread's connection, or another rank's build
// in a process of several ranks) is left alone.
void shutDownSame(const SocketTable& sockets) noexcept;

}  // namespace ddp::detail
