// StoreFailover: no single point of failure without a daemon. When the agent that hosts the
// rendezvous store (c10d self-hosted, static, or under Slurm: node 0's agent) dies, the survivors
// move the store to the lowest surviving node and carry on as after a peer loss.
//
// Who may fail over: an agent whose store is an agent-hosted store of its own run (the store holds
// rendezvousOwnerKey() = this run id and rendezvousHostKey() = "<host>|<pid>" of the hosting
// agent from the moment it listens), and which does not host it itself. With a ddprund, etcd or
// an in-process store nothing changes: losing the store ends the job as before.
//
// How the survivors agree on the successor without a store: the standby list. On an agent-hosted
// store, node ranks 0 .. kStandbyCandidates - 1 of every round publish a round record "standby"
// ("<host>|<pid>|<advertised address>") before the preflight checks and every member reads those
// records after them (publishStandby(), readStandbys(): O(1) per agent, no roster). A member's
// standby endpoint is its advertised address (the MASTER_ADDR the others already reach) on the
// job's rendezvous port, on which only the successor listens. The succession order is the list
// by node rank, the dead host left out (successionOrder()). A survivor walks the order: the first member that is itself hosts the new
// store; for any other it connects within failoverBound() (refused connections are retried, as
// the successor may notice the loss later than this node) and moves on to the next member when
// it does not answer — it is taken as dead.
//
// Death, not a partition: before moving, a survivor reconnects to the lost endpoint once (for at
// most a keep-alive interval, at most 1 s); if the same host still answers there, its own
// connection broke, not the store, and it fails as before. A survivor that cannot reach any
// successor fails cleanly (exit 1, "rendezvous failed"). A successor cut off from the others
// hosts a store nobody joins: its round never reaches min_nodes and its join times out, so no
// second world forms unless two partitions both hold min_nodes (min_nodes > max_nodes / 2 rules
// that out).
//
// Seeding: the successor hosts a fresh store on the rendezvous port holding its own snapshot's
// keys (seedKeys(): incarnation, next round = generation + 1, restarts, failure records), the
// owner key (the run id moves with the store) and itself as host. The other survivors report
// their snapshots; the successor merges them (highest generation and restart count, failure
// records united) before anybody joins (store_failover_exchange.hpp). Then every survivor makes a
// fresh Rendezvous over the new store and joins the next round: a peer loss, no restart spent;
// its heartbeats and ON_CLOSE run on the new store; the worker store of the next generation is
// hosted by the new node rank 0 as usual.
//
// Not covered: an agent that was a member of no round yet (it waited to join) has no standby list
// to find the successor by and fails as before; so does everybody when the host dies before the
// first round's standby list was read, and when all kStandbyCandidates candidates are gone.
//
// Thread safety: the agent's thread only.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <spdlog/spdlog.h>

#include "launcher/config/launch_config.hpp"
#include "launcher/rendezvous/rendezvous_setup.hpp"
#include "rendezvous/algorithm/job_snapshot.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"

namespace ddp {

// An agent: host name and pid, as in NodeDescriptor and thisAgentId().
struct AgentId {
  std::string host;
  int pid = 0;
  bool operator==(const AgentId&) const = default;
};
// "<host>|<pid>" -> AgentId; nullopt when malformed.
std::optional<AgentId> parseAgentId(const std::string& text);

// One entry of the standby list: a member that may host the store, and where.
struct Standby {
  int nodeRank = 0;
  AgentId agent;
  std::string addr;  // its advertised address
  bool operator==(const Standby&) const = default;
};
// How many of a round's lowest node ranks are on the standby list.
inline constexpr int kStandbyCandidates = 4;
// "<host>|<pid>|<addr>" and back (nullopt when malformed).
std::string encodeStandby(const NodeDescriptor& self);
std::optional<Standby> decodeStandby(int nodeRank, const std::string& value);

// The standby list's exchange in `round` (see above). publishStandby: node ranks below
// kStandbyCandidates publish theirs (two store calls), the others nothing. readStandbys: the
// entries published within `timeout` (a missing or malformed one is left out), or RoundEnded.
// Throw what the rendezvous calls throw.
void publishStandby(Rendezvous& rdzv, const RendezvousResult& round, const NodeDescriptor& self);
std::variant<std::vector<Standby>, RoundEnded> readStandbys(Rendezvous& rdzv,
                                                            const RendezvousResult& round,
                                                            std::chrono::milliseconds timeout);

// The standbys that may host the store after `deadHost` died, in the order every survivor tries
// them: by node rank, the dead host left out (all of them when it is not on the list).
std::vector<Standby> successionOrder(std::vector<Standby> standbys,
                                     const std::optional<AgentId>& deadHost);

// How long a survivor waits for a successor to answer, and the successor for the others'
// reports: two heartbeat timeouts and a keep-alive interval (a survivor notices the loss at once
// when a call fails, or up to heartbeat_timeout + one interval later through its heartbeats).
std::chrono::milliseconds failoverBound(const RendezvousSettings& settings);

class StoreFailover {
 public:
  explicit StoreFailover(const LaunchConfig& config);

  // Reads who hosts the store `handle` opened (two store calls; nothing for in-process or etcd
  // stores). Failover is enabled when it is an agent-hosted store of this run hosted by another
  // agent. Never throws: a store that cannot be read leaves failover disabled.
  void learnHost(const RendezvousStoreHandle& handle);
  bool enabled() const { return host_.has_value(); }
  // The standby list of this node's newest round (readStandbys()).
  void setStandbys(std::vector<Standby> standbys) { standbys_ = std::move(standbys); }

  // The store is lost (`why`: the error or event that said so). Finds or becomes the successor as
  // described above and returns the new store's handle, seeded and released (every survivor that
  // reported in time may call next()). Throws NetworkError when the store still answers or no
  // successor could be reached or hosted, TimeoutError when the successor never seeded its store.
  RendezvousStoreHandle failOver(const JobSnapshot& snapshot, const RendezvousStoreHandle& lost,
                                 const std::string& why);

 private:
  bool stillAnswers(const RendezvousStoreHandle& lost) const;
  RendezvousStoreHandle host(const JobSnapshot& snapshot, int expected);
  std::optional<RendezvousStoreHandle> follow(const Standby& successor,
                                              const JobSnapshot& snapshot, int expected);

  const LaunchConfig& config_;
  const AgentId self_;
  std::optional<AgentId> host_;  // who hosts the store now (set: failover enabled)
  uint16_t port_ = 0;            // the rendezvous port every standby endpoint uses
  std::vector<Standby> standbys_;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace ddp

namespace ddp {

// A StoreConnector whose target can be replaced: the status publisher keeps the one it was given
// at start, and after a failover its next connection goes to the new store. Thread safety:
// connect() and set() from any thread.
class ConnectorSwitch {
 public:
  void set(StoreConnector connector) {
    std::lock_guard lock(mutex_);
    connector_ = std::move(connector);
  }
  // A connector that opens a connection to whichever store set() named last. Throws what that
  // connector throws; NetworkError when none was set.
  StoreConnector connector() {
    return [this](std::chrono::milliseconds budget) {
      StoreConnector current;
      {
        std::lock_guard lock(mutex_);
        current = connector_;
      }
      if (!current) throw NetworkError("no rendezvous store to connect to");
      return current(budget);
    };
  }

 private:
  std::mutex mutex_;
  StoreConnector connector_;
};

}  // namespace ddp
