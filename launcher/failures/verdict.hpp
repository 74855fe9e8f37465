// Verdict: when restarting again is hopeless — the judgement behind the restart policy's verdict
// row (restart_policy.hpp), a pure function of the job's failure records (docs/running.md "A
// verdict instead of a loop"; --verdict-after N, 0 = off: the default, so that --max-restarts is
// honoured exactly, as torchrun does).
//
// A generation counts when it ended because of a failure that is the job's own fault: it has
// failure records (FailureLedger::failureRecords(); records of recoveries in place are attempts of
// their own, below), and their root cause (failure_summary.hpp: the failure order, collateral left out) is a worker that
// failed by itself — not one ddprun stopped, not a communication failure (a lost peer, the network:
// isCommunicationFailure), not a worker ended by a signal that comes from outside the job
// (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL: pre-emption, the user, the OOM
// killer's or an operator's kill; also as a wrapper's exit code 128 + S). A generation without
// records — ended by a lost node, a scale-up, a lost store — or whose root cause does not count
// breaks the run: nothing before it is compared. A recovery record counts the same way.
//
// An *attempt* is one try of the job's code: a generation's end (its failure records), or a
// replacement in place (a recovery record, --restart-scope=failed): in order, each generation's
// recoveries by quorum number, then its end. The verdict fires, for the generation `generation`
// being reported, when
//   1. the last N attempts all count and their root causes are the same failure: the same global
//      rank, the same exit code or signal, the same error text (the error file's message; "" for
//      none), and the same step (the step the worker reported last, -1 when unknown — PyTorch
//      scripts report none and are compared without one): replacements in place that fail the
//      same way are judged as restarts are; or
//   2. the last N generations (generation - N + 1 .. generation, consecutive numbers) all count
//      and none made step progress: each reached a known step (the furthest step any failure of the
//      generation reported) no further than the furthest step of every generation before it
//      (generation N - 1 before the run included, so the run needs N + 1 generations with steps).
// A verdict is one line, naming the repeated cause:
//   the same failure in 3 generations in a row: rank 1 exit 1 'Error: injected failure: ...' at
//   step 3; stopping instead of restarting
//   the same failure 3 times in a row (2 of them replaced in place): rank 1 exit 2 '...'; stopping
//   instead of restarting
//   no step progress in 3 generations in a row (the furthest step stays 40; last: rank 1 exit 1
//   '...' at step 12); stopping instead of restarting
//
// Every agent of the job reads the same records; the one whose report would spend the
// generation's restart applies the verdict (FailureLedger::reportVerdict), so there is one verdict
// for the whole job. A verdict only takes away restarts the budget still has: when its report
// finds the budget spent, the job fails as it would without one (the root cause's exit code), and
// the summary shows the verdict as a line (budgetSpentNote).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/failures/failure_summary.hpp"
#include "rendezvous/algorithm/failure_ledger.hpp"

namespace ddp {

// The verdict for `generation` (see above), or nullopt. `records`: every record of the job and
// this node's record of `generation` (the current one need not be published yet), any order.
// `after` < 1: never.
std::optional<std::string> judgeGenerations(const std::vector<FailureRecord>& records,
                                            int64_t generation, int after);

// The verdict on the job's attempts with `failures` as node `record.nodeRank`'s record of
// `record.generation` (the current one need not be published yet): judgeGenerations over every
// record `ledger` holds plus this one. "" when none, when `after` < 1 (no store call then), or when
// the records cannot be read (logged on the `agent` logger). One store call
// (FailureLedger::failureRecords); blocks as that does. Never throws.
std::string judgeWithLedger(FailureLedger& ledger, FailureRecord record, int after);

// The summary's line for a verdict that fired on the generation whose failure spent the restart
// budget: the verdict's judgement, "; the restart budget is spent as well: the exit code is the
// root cause's" in place of "; stopping instead of restarting".
std::string budgetSpentNote(const std::string& verdict);

// True when `failure`, as a generation's root cause, is the job's own fault (see above).
bool countsForVerdict(const WorkerFailure& failure);

// "rank 1 exit 1 'Error: ...' at step 3" (signal: "rank 1 SIGSEGV"; no step: no " at step").
std::string causeText(const WorkerFailure& failure);

}  // namespace ddp
