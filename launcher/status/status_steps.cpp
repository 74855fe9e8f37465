// StatusPublisher's straggler tick (status_publisher.hpp; docs/running.md "Straggler detection"):
// this node's figures into its record, the job's median where the records meet (node rank 0),
// the judgement of this node's ranks against it, and a log line for each change.
#include <algorithm>

#include "launcher/status/status_publisher.hpp"
#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {

std::chrono::milliseconds StatusPublisher::stepInterval() const {
  if (!settings_.stragglers) return settings_.relayInterval;
  return std::clamp<std::chrono::milliseconds>(settings_.stragglers->rule().window / 10,
                                               std::chrono::seconds(1), std::chrono::seconds(10));
}

void StatusPublisher::publishSteps(const std::string& runId, int64_t incarnation, NodeStatus& node) {
  StragglerWatch& watch = *settings_.stragglers;
  const detail::RendezvousKeys keys(runId, incarnation);
  const auto now = std::chrono::steady_clock::now();
  NodeSteps steps;
  steps.computeS = watch.figures(now);
  steps.threshold = watch.rule().threshold;
  steps.windowS = std::chrono::duration<double>(watch.rule().window).count();
  std::optional<double> median;
  if (node.nodeRank == 0) {
    // Every rank's figure: this node's fresh ones, the others' as their last tick wrote them.
    std::vector<double> all;
    for (const auto& f : steps.computeS) {
      if (f) all.push_back(*f);
    }
    for (int n = 1; n < node.nodeCount; ++n) {
      if (const auto record = detail::peek(*store_, keys.status(node.generation, n))) {
        const auto figures = stepFiguresOf(*record);
        all.insert(all.end(), figures.begin(), figures.end());
      }
    }
    median = medianOf(std::move(all));
    steps.jobMedianS = median;
  } else if (const auto record = detail::peek(*store_, keys.status(node.generation, 0))) {
    median = jobMedianOf(*record);
  }
  std::vector<int> ranks(steps.computeS.size(), -1);
  for (const auto& w : node.workers) {
    if (w.localRank >= 0 && std::size_t(w.localRank) < ranks.size()) {
      ranks[std::size_t(w.localRank)] = w.rank;
    }
  }
  const auto judged = watch.judge(steps.computeS, median, ranks, now);
  auto log = logger("agent");
  for (std::size_t i = 0; i < judged.lines.size(); ++i) {
    if (judged.lineIsFlag[i]) {
      log->warn("{}", judged.lines[i]);
    } else {
      log->info("{}", judged.lines[i]);
    }
  }
  for (std::size_t i = 0; i < judged.lines.size() && settings_.onStraggler; ++i) {
    if (!judged.lineIsFlag[i]) continue;
    try {
      settings_.onStraggler({judged.lines[i], incarnation, node.generation, node.nodeRank,
                             node.nodeCount}, *store_);
    } catch (const Error& e) {
      log->warn("acting on a straggler failed: {}", e.what());
    }
  }
  steps.straggler = judged.flagged;
  node.steps = steps;
  std::lock_guard<std::mutex> lock(mutex_);
  if (node_.generation == node.generation) node_.steps = std::move(steps);
}

}  // namespace ddp
