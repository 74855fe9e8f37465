// An agent host of the rendezvous_scale benchmark: one process running `count` agents as threads,
// each with its own TcpStoreClient connection (a real ddprun agent's rendezvous connection).
//
// The benchmark spreads N agents over several such processes because a TcpStoreClient holds 5
// file descriptors (its socket, its wake eventfd, and the epoll, eventfd and timerfd of its
// io_context) and the hard open-file limit of one process (20000 here) fits ~3900 of them.
// Timestamps are CLOCK_MONOTONIC (steady_clock), comparable across the processes of one machine.
//
// Protocol with the parent over two pipes (binary, host byte order):
//   host -> parent   double connect_ms, once every agent connected and its thread is parked
//   parent -> host   one byte: go (every host's agents call next() now)
//   host -> parent   int32 failures, int32 n, int64 steady-clock ns at which each next() returned,
//                    int64 CPU ns this process spent from go until its last next() returned
//   parent -> host   one byte: tear down (so that no agent stops heartbeating while others join)
//
// Thread safety: runs in a forked child before it starts any thread of its own.
#pragma once

#include <chrono>
#include <string>

#include "rendezvous/algorithm/rendezvous.hpp"

namespace bench {

struct HostSpec {
  std::string host = "127.0.0.1";    // ddprund address
  int port = 0;                       // ddprund port
  int firstAgent = 0;                 // index of this host's first agent (names, pids)
  int count = 0;                      // agents in this process
  ddp::RendezvousSettings settings;   // every agent's
};

// Runs the host protocol above on file descriptors `toParent` / `fromParent`. Returns the
// process exit code (0: every agent joined).
int runAgentHost(const HostSpec& spec, int toParent, int fromParent);

// The descriptor of agent `i` (a distinct host name and pid per agent, 8 workers each).
ddp::NodeDescriptor benchNode(int i);

// Whole-buffer pipe I/O; false on EOF or error.
bool writeAll(int fd, const void* data, size_t size);
bool readAll(int fd, void* data, size_t size);

}  // namespace bench
