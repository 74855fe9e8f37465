// libFuzzer harness: the TCPStore wire codec and the server's connection state machine
// (SessionProtocol: RequestDecoder + StoreState + memory budget) fed arbitrary byte streams on
// several connections at once. Run by scripts/fuzz.sh (ctest: 60 s, label fuzz).
//
// Input layout (tests/fuzz/make_corpus.py writes the seed corpus in it):
//   byte 0      configuration: bits 0-1 legacy dialect (auto, 1.13, 2.1, auto), bit 2 tight limits
//               (small keys/values/budget, so limit and budget paths run), bit 3 replies are left
//               unwritten (backlog) instead of drained after each step, bit 4 the server
//               requires a token (requests before HELLO with it are refused, docs/security.md),
//               bit 7 also decode the stream as replies to every op (the client half of the codec)
//   then records: u8 tag = connection (bits 0-1) | length << 2 (0..63), then `length` bytes
//               delivered to that connection as one read. Length 0 is an event: a connection
//               waiting out the v1 opcode-8 grace resolves it; any other closes (ON_CLOSE fires)
//               and is replaced by a fresh one.
// Checked beyond "no crash, no leak, no UB": the reply bytes a connection queues are what its
// gather list writes, and once every connection has closed and the store is cleared, the memory
// budget is back to zero (nothing charged is lost or charged twice).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>

#include "rendezvous/base/logging.hpp"
#include "rendezvous/server/detail/server_core.hpp"
#include "rendezvous/server/detail/session_protocol.hpp"
#include "rendezvous/wire/wire_codec.hpp"

namespace {

using ddp::detail::ServerCore;
using ddp::detail::SessionProtocol;

constexpr int kConnections = 4;

class FuzzConnection : public SessionProtocol {
 public:
  explicit FuzzConnection(std::shared_ptr<ServerCore> core)
      : SessionProtocol(std::move(core), "fuzz") {}
  bool ambiguous = false;
};

ddp::StoreServerOptions optionsFor(uint8_t config) {
  ddp::StoreServerOptions o;
  o.name = "fuzz";
  o.legacyDialect = static_cast<ddp::wire::LegacyDialect>((config & 3) == 3 ? 0 : config & 3);
  if (config & 16) o.token = "fuzz-token";
  if (config & 4) {
    o.limits.maxKeyBytes = 64;
    o.limits.maxValueBytes = 4096;
    o.limits.maxKeysPerRequest = 16;
    o.limits.maxRequestBytes = 16384;
    o.maxMemoryBytes = 64 * 1024;
  } else {
    o.limits.maxRequestBytes = 1 << 20;
    o.limits.maxValueBytes = 256 * 1024;
    o.maxMemoryBytes = 8 << 20;
  }
  return o;
}

// Writes the connection's queued replies out the way StoreSession does, checking the gather list.
void drain(FuzzConnection& c) {
  std::vector<boost::asio::const_buffer> buffers;
  c.output().collect(buffers);
  std::size_t total = 0;
  for (const auto& b : buffers) total += b.size();
  if (total != c.output().size()) std::abort();
  c.output().clear();
}

// The executor of the core's timers (the bounds on unauthenticated connections); never run: the
// fuzzer drives the protocol, not the transport.
boost::asio::io_context& timers() {
  static boost::asio::io_context io;
  return io;
}

struct Harness {
  explicit Harness(uint8_t config)
      : core(std::make_shared<ServerCore>(optionsFor(config), timers().get_executor())) {
    for (auto& c : conns) c = std::make_unique<FuzzConnection>(core);
  }

  void reopen(int i) {
    conns[i]->disconnect(true);
    conns[i] = std::make_unique<FuzzConnection>(core);
  }

  // Delivers `bytes` to connection i as reads of whatever room it offers.
  void deliver(int i, const uint8_t* bytes, std::size_t size, bool drainAfter) {
    FuzzConnection& c = *conns[i];
    c.ambiguous = false;
    while (size > 0) {
      auto room = c.readBuffer();
      if (!room) return reopen(i);
      const std::size_t n = std::min(size, room->size());
      std::memcpy(room->data(), bytes, n);
      bytes += n;
      size -= n;
      const auto outcome = c.received(n);
      if (outcome == SessionProtocol::Outcome::kClose) return reopen(i);
      if (outcome == SessionProtocol::Outcome::kCloseWhenWritten) {
        drain(c);  // the refusal reply is written, then the connection closes
        return reopen(i);
      }
      c.ambiguous = outcome == SessionProtocol::Outcome::kAmbiguous;
      if (drainAfter) drain(c);
    }
  }

  void event(int i, bool drainAfter) {
    FuzzConnection& c = *conns[i];
    if (!c.ambiguous) return reopen(i);
    c.ambiguous = false;
    const auto outcome = c.resolveAmbiguity();
    if (outcome == SessionProtocol::Outcome::kClose) return reopen(i);
    if (outcome == SessionProtocol::Outcome::kCloseWhenWritten) {
      drain(c);
      return reopen(i);
    }
    if (drainAfter) drain(c);
  }

  std::shared_ptr<ServerCore> core;
  std::unique_ptr<FuzzConnection> conns[kConnections];
};

void decodeAsReplies(const uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (int op = 0; op <= static_cast<int>(ddp::wire::Op::kRequestId); ++op) {
    (void)ddp::wire::decodeReply(bytes, static_cast<ddp::wire::Op>(op), size % 7, 1 << 20);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ddp::logger("store")->set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const uint8_t config = data[0];
  if (config & 0x80) decodeAsReplies(data + 1, size - 1);
  const bool drainAfter = (config & 8) == 0;
  {
    Harness h(config);
    std::size_t at = 1;
    while (at < size) {
      const uint8_t tag = data[at++];
      const int conn = tag & 3;
      const std::size_t len = std::min<std::size_t>(tag >> 2, size - at);
      if (len == 0) {
        h.event(conn, drainAfter);
      } else {
        h.deliver(conn, data + at, len, drainAfter);
        at += len;
      }
    }
    for (auto& c : h.conns) c.reset();  // closes: ON_CLOSE registrations fire
    h.core->state.clear();
    if (h.core->budget.used() != 0) std::abort();  // a charge was lost or taken twice
  }
  return 0;
}
