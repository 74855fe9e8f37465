#include "launcher/rendezvous/store_failover_exchange.hpp"

#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

const std::string kReports = "rdzv/_failover/reports";
const std::string kArrived = "rdzv/_failover/arrived";
const std::string kAll = "rdzv/_failover/all";
const std::string kSeeded = "rdzv/_failover/seeded";

}  // namespace

void reportToNewHost(Store& store, const JobSnapshot& own, int expected,
                     std::chrono::milliseconds timeout) {
  store.append(kReports, detail::frameRecord(encodeSnapshot(own)));
  if (store.add(kArrived, 1) == expected) store.set(kAll, "1");
  store.wait({kSeeded}, timeout);
}

JobSnapshot seedFromReports(Store& store, const JobSnapshot& own, int expected,
                            std::chrono::milliseconds timeout) {
  if (expected > 0) {
    try {
      store.wait({kAll}, timeout);
    } catch (const TimeoutError&) {
      // Those that did not report in time died or lost their way: go on without them.
    }
  }
  JobSnapshot merged = own;
  if (auto reports = detail::peek(store, kReports)) {
    for (const auto& report : detail::unframeRecords(*reports)) {
      merged = mergeSnapshots(std::move(merged), decodeSnapshot(report));
    }
  }
  std::vector<std::string> keys;
  std::vector<std::string> values;
  for (auto& [key, value] : seedKeys(merged)) {
    keys.push_back(key);
    values.push_back(value);
  }
  keys.push_back(kSeeded);
  values.push_back("1");
  store.multiSet(keys, values);
  return merged;
}

}  // namespace ddp
