// AdmissionProbe: whether node rank 0's worker store serves this node, asked the way its workers
// will ask — one TCP connection from this host, a TCPStore VALIDATE + PING (the v2 dialect's
// handshake, answered by every dialect of the worker store), the nonce echoed back.
//
// A store that refuses a connection by its allowlist (store_access.hpp) closes it before reading
// a byte (rendezvous/server/detail/admission.hpp), so "connected, then closed without an answer"
// is a refusal; the workers of a refused node see only "Broken pipe" or "Connection reset", and
// the agent says why instead (refusalAdvice()).
//
// Thread safety: pure functions apart from the socket they open and close (blocking, bounded).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ddp {

enum class AdmissionOutcome {
  kServed,       // the store answered
  kRefused,      // it closed the connection without answering: its allowlist refused this node
  kUnreachable,  // no connection, or no answer within the budget (the preflight table tells more)
};

struct AdmissionProbe {
  AdmissionOutcome outcome = AdmissionOutcome::kUnreachable;
  std::string sourceAddr;  // this end of the connection, as this host sent it ("" before connecting)
  std::string detail;      // what happened, for kUnreachable and logs
};

// Connects to `addr`:`port` (an address or a name) and asks as above, all within `budget`.
// Blocks at most `budget`. Never throws.
AdmissionProbe probeAdmission(const std::string& addr, uint16_t port,
                              std::chrono::milliseconds budget);

// The error line for a refused probe of the worker store at `target` ("host:port"): who refused,
// the address this node connects from, and how to widen the allowlist.
std::string refusalAdvice(const AdmissionProbe& probe, const std::string& target);

}  // namespace ddp
