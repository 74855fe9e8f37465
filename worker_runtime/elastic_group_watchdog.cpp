// ElasticGroup's watchdog thread (worker_runtime/elastic_group.hpp): what it does to a build or a
// collective of a quorum the agent superseded, so that no rank waits on a peer that moved on.
#include <chrono>
#include <mutex>
#include <string>

#include <spdlog/spdlog.h>

#include "rendezvous/base/logging.hpp"
#include "rendezvous/quorum/quorum_board.hpp"
#include "worker_runtime/detail/socket_scan.hpp"
#include "worker_runtime/elastic_group.hpp"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kStuckGrace = std::chrono::seconds(2);

}  // namespace

void ElasticGroup::watchdog() {
  Clock::time_point stuckSince{};
  uint32_t stuckOp = kIdle;  // the operation (its quorum's epoch) stuckSince etc. are about
  bool seen = false;         // stuckOp was seen superseded: stuckSince holds when
  bool aborted = false;
  bool warned = false;
  while (!stop_.load()) {
    board_->waitForChange(board_->epoch(), std::chrono::milliseconds(200));
    const uint32_t op = opEpoch_.load(std::memory_order_acquire);
    if (op == kIdle || board_->epoch() == op || op != stuckOp) {
      // Idle, current, or another operation than the one seen stuck (the training thread moved
      // on to a newer quorum between two looks, which may be superseded in turn): start over.
      seen = false;
      aborted = false;
      warned = false;
      stuckOp = op;
      if (op == kIdle || board_->epoch() == op) continue;
    }
    const bool firstLook = !seen;
    if (firstLook) stuckSince = Clock::now();
    seen = true;
    freeSupersededBuild(op, firstLook);
    const auto stuck = Clock::now() - stuckSince;
    if (!aborted) {
      aborted = abortSuperseded(op, /*buildToo=*/stuck >= kStuckGrace);
    } else if (!warned && stuck >= 2 * kStuckGrace) {
      reportWedged(op, stuck);
      warned = true;
    }
  }
}

void ElasticGroup::freeSupersededBuild(uint32_t op, bool firstLook) {
  // A build for a superseded quorum is of no use. Its pairs still waiting for a peer to connect
  // (Gloo waits its whole budget for one that died or moved on) fail at once, and a connect to a
  // peer that answers nothing (its SYN dropped: a stopped process's full accept queue, a frozen
  // host) as soon as its SYN was retransmitted: Gloo would retry it for minutes.
  std::lock_guard<std::mutex> lock(commMutex_);
  if (!building_ || opEpoch_.load(std::memory_order_acquire) != op) return;
  if (firstLook) {
    const auto listeners = detail::listenersOpenedSince(buildSockets_);
    if (!listeners.empty()) {
      logger("worker")->info("rank {}: the agent published a newer quorum while this rank built "
                             "its communicator; closing the {} pair(s) still waiting for a peer",
                             view_.rank, listeners.size());
      detail::shutDown(listeners);
    }
  }
  const int connects = detail::shutDownStalledConnects(buildSockets_);
  if (connects > 0) {
    logger("worker")->info("rank {}: the agent published a newer quorum while this rank built "
                           "its communicator; failing the {} connect(s) to a peer that has not "
                           "answered", view_.rank, connects);
  }
}

bool ElasticGroup::abortSuperseded(uint32_t op, bool buildToo) {
  // A collective of a superseded quorum cannot be of use (every rank rebuilds, and the state is
  // agreed again), and it may not end by itself: a peer that vanished without closing its
  // connections (a network cut, a frozen host), or one killed or frozen halfway through a message
  // (Gloo waits for the rest of it however the connection ends), holds it for its whole budget.
  // It is aborted as soon as it is seen superseded. A build's connections only kStuckGrace later:
  // a connection Gloo has not yet taken as connected must not be shut down while it may still be.
  std::lock_guard<std::mutex> lock(commMutex_);
  if (opEpoch_.load(std::memory_order_acquire) != op) return true;
  if (building_ && !buildToo) return false;
  if (building_) {
    logger("worker")->warn("rank {}: the build of the communicator of quorum {} is still blocked "
                           "{} s after the agent published a newer quorum; aborting it",
                           view_.rank, toString(view_.id),
                           std::chrono::duration_cast<std::chrono::seconds>(kStuckGrace).count());
    detail::shutDown(
        detail::connectionsOpenedSince(buildSockets_, static_cast<uint16_t>(storeEndpoint_.port)));
  } else if (comm_) {
    logger("worker")->info("rank {}: a collective of quorum {} was still running when the agent "
                           "published a newer quorum; aborting it", view_.rank, toString(view_.id));
    comm_->abort();
  }
  return true;
}

void ElasticGroup::reportWedged(uint32_t op, Clock::duration stuck) {
  // The abort fails every wait of the communicator, and every connection, listening pair and
  // unanswered connect of a build, so this rank is wedged itself (a thread that does not come
  // back from outside Gloo): it keeps its process (a healthy rank's memory, data and CUDA
  // context are worth more than a few seconds), and hang detection (ddprun --hang-timeout)
  // replaces it if it makes no progress.
  std::lock_guard<std::mutex> lock(commMutex_);
  if (opEpoch_.load(std::memory_order_acquire) != op) return;
  logger("worker")->warn("rank {}: {} of quorum {} is still blocked {} s after the agent "
                         "published a newer quorum, though aborted{}; left to hang detection",
                         view_.rank, building_ ? "the build of the communicator" : "a collective",
                         toString(view_.id),
                         std::chrono::duration_cast<std::chrono::seconds>(stuck).count(),
                         building_ ? " (its sockets: " +
                                         detail::tcpStatesOpenedSince(buildSockets_) + ")"
                                   : std::string());
}

}  // namespace ddp
