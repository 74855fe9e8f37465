// WireCodec: the c10d TCPStore wire protocol as pure functions (no I/O, no clocks).
//
// Three dialects share one framing (which one a client speaks: docs/ddprund.md):
//   v1a  torch 1.13 / 2.0   SET=0 CAS=1 GET=2 ADD=3 CHECK=4 WAIT=5 NUMKEYS=6 WATCH_KEY=7 DELETE=8
//   v1b  torch 2.1          as v1a for 0..6, then DELETE=7 APPEND=8 MULTI_GET=9 MULTI_SET=10
//                           CANCEL_WAIT=11
//   v2   torch 2.2+         VALIDATE=0 (first message, magic), then SET=1 ... CANCEL_WAIT=12,
//                           PING=13 QUEUE_PUSH=14 QUEUE_POP=15 QUEUE_LEN=16 LIST_KEYS=17 BARRIER=18
//
// Byte layout (all integers little-endian; `str` = u64 length + raw bytes, no NUL):
//   request  = u8 opcode, then per op:
//     VALIDATE     u32 magic 0x3C85F7CE (bytes CE F7 85 3C)          reply: none
//     PING         u32 nonce                                           reply: u32 nonce (echo)
//     SET          str key, str value                                  reply: none
//     COMPARE_SET  str key, str expected, str desired                  reply: str value-after
//     GET          str key                                             reply: str value
//     ADD          str key, i64 delta                                  reply: i64 new value
//     CHECK        u64 n, n x str key                                  reply: u8 0 READY/1 NOT_READY
//     WAIT         u64 n, n x str key                                  reply: u8 0 (maybe later)
//     GETNUMKEYS   -                                                   reply: i64 count
//     WATCH_KEY    str key                                             reply: u8 3
//     DELETE_KEY   str key                                             reply: i64 0 or 1
//     APPEND       str key, str data                                   reply: none
//     MULTI_GET    u64 n, n x str key                                  reply: n x str value
//     MULTI_SET    u64 n, n x (str key, str value)                     reply: none
//     CANCEL_WAIT  -                                                   reply: u8 1
//     QUEUE_PUSH   str key, str value                                  reply: none
//     QUEUE_POP    str key                                 reply: i64 len-before, str value if > 0
//     QUEUE_LEN    str key                                             reply: i64 length
//     LIST_KEYS    -                                                   reply: i64 n, n x str key
//     BARRIER      str key, i64 world_size                             reply: u8 0 (maybe later)
//   Example, v1a SET "/k1"="v1": 00 | 03 00 00 00 00 00 00 00 | 2f 6b 31 | 02 00 .. 00 | 76 31
//   Example, v2 handshake:       00 | ce f7 85 3c   (VALIDATE; the server sends nothing back)
//
// ddprun's extension of v2 (opcodes F0..F2; torch's v2 opcodes end at 18 and a torch server closes
// a connection on an unknown opcode, so a client learns whether the server has the extension from
// HELLO's answer or from the closed connection, and then uses a fresh connection without it):
//     HELLO          F0  u32 version, u64 capabilities, u64 n, n x (str name, str value)
//                        reply: u8 status (0 accepted, 1 refused), u32 version,
//                               u64 capabilities, u64 n, n x (str name, str value)
//     ON_CLOSE       F1  str key, str expected, str desired
//                        reply: i64 registrations this connection holds now, or -1 refused
//     ON_CLOSE_CLEAR F2  u64 n, n x str key (n = 0: every registration of the connection)
//                        reply: i64 registrations removed
//     REQUEST_ID     F3  u64 client id, u64 sequence                  reply: none (see below)
//   HELLO: version is kExtensionVersion (1). The client's capabilities are those it wants, the
//   server's those it has (bit 0 = kCapOnClose: ON_CLOSE and ON_CLOSE_CLEAR; bit 2 = kCapDurable,
//   set only by a server that keeps its data across its restart). Fields are free-form name/value
//   pairs ("client" = "ddprun", "host", "pid", "purpose", "token"; the server answers "server" and
//   "instance", a random id per server process, so a client reconnecting to a server without
//   kCapDurable sees whether it is still the same one); at most WireLimits::maxHelloFields pairs,
//   each string at most maxKeyBytes long.
//   Status 1 (refused): a server with a token (ddprund --token-file) refuses a HELLO whose "token"
//   field is missing or wrong; it names the reason in an "error" field and closes the connection
//   (server/detail/session_auth.hpp).
//   ON_CLOSE: "when this connection closes (the peer's process died, or the connection broke)
//   before clearing the registration, apply COMPARE_SET key expected desired" (waking waiters as
//   a COMPARE_SET does). A registration with the key of an existing one replaces it; a server
//   refuses (-1) more than a handful per connection. Nothing fires when the server itself stops.
//   Example, HELLO from a client that wants ON_CLOSE with one field client=ddprun:
//     f0 | 01 00 00 00 | 01 00 .. 00 | 01 00 .. 00 | 06 00 .. 00 "client" | 06 00 .. 00 "ddprun"
//   Example, ON_CLOSE "k" "" "v":  f1 | 01 00 .. 00 6b | 00 00 .. 00 | 01 00 .. 00 76
//                                  reply 01 00 .. 00 (one registration held)
//   Example, ON_CLOSE_CLEAR all:   f2 | 00 00 .. 00      reply 01 00 .. 00 (one removed)
//   REQUEST_ID (capability bit 1 = kCapRequestId) tags the request that follows it on the
//   connection, so that a client which lost its connection can send it again to a restarted
//   server without it applying twice. The client id is random per client object, the sequence
//   grows by one per tagged request. The server keeps, per client id, the highest sequence it
//   applied and that request's reply bytes (a bounded table, journaled with the mutation under
//   --data-dir): a tagged request whose sequence is at most the kept one is not applied again;
//   if it equals it the kept reply is sent (else no reply: only a request without a reply can be
//   followed by a later one before its client reads anything). Untagged requests, and requests
//   that change nothing (GET, CHECK, WAIT, ...), are applied as usual.
//   Example, REQUEST_ID client 0x0102 sequence 7, then v2 ADD "k" 1:
//     f3 | 02 01 00 00 00 00 00 00 | 07 00 .. 00 | 04 | 01 00 .. 00 6b | 01 00 .. 00
//
// Busy notice (server -> client; ddprund and StoreServer, not torch): a server that cannot serve a
// new connection — out of file descriptors, or at --max-connections — writes, instead of serving
// it, the 8 bytes "DDPRBUSY", one space, its reason (at most kBusyReasonMax printable bytes) and
// "\n", then closes. A client looks for it where it expects the connection's first reply: no PING
// echo can read "DDPR" (0x52504444 is far past any pid), and no first reply of a v1 connection
// starts so (as a length or count it would be about 6e18).
//   Example: "DDPRBUSY ddprund: out of file descriptors (RLIMIT_NOFILE 64)\n"
//
// Dialect detection (RequestDecoder, server side, per connection, §4):
//   * First byte 00 followed by CE F7 85 3C -> v2 (those 5 bytes are VALIDATE). A v1 SET would
//     need a key length whose low bytes are 0x3C85F7CE (~1 GiB), far past any key limit.
//   * Anything else -> v1. With LegacyDialect::kAuto the connection starts "v1, undecided":
//       - opcodes 0..6 are the same in v1a and v1b;
//       - 9, 10, 11 exist only in v1b: the connection is pinned to v1b;
//       - 7 is decoded as v1b DELETE_KEY unless the connection is pinned to v1a (WATCH_KEY is
//         unreachable from torch 1.13 Python, so DELETE_KEY is the useful default);
//       - 8 is v1a DELETE_KEY (`str key`, the client then waits for the reply) or v1b APPEND
//         (`str key, str data`, written in one send()). When bytes follow the key it is APPEND
//         (pin v1b); when the buffer ends exactly after the key the decoder answers NeedMore with
//         `ambiguous` set: the caller waits a short grace period for more bytes and then calls
//         resolveAmbiguityAsV1a() (DELETE_KEY, pin v1a). The grace is paid at most once per
//         connection, because the dialect is pinned afterwards.
//     kTorch113 treats all v1 traffic as v1a (7 = WATCH_KEY, 8 = DELETE_KEY, 9+ malformed);
//     kTorch21 treats it as v1b (7 = DELETE_KEY, 8 = APPEND, 12+ malformed).
//
// Thread safety: free functions are pure and thread-safe; a RequestDecoder is a per-connection
// object used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ddp {

// Hard limits; input past them is Malformed (the server closes that one connection).
struct WireLimits {
  // Longest key accepted, in bytes.
  std::size_t maxKeyBytes = 64 * 1024;
  // Largest value accepted, in bytes (torch's libuv server stops at 8 MiB).
  std::size_t maxValueBytes = 256 * 1024 * 1024;
  // Most keys in one CHECK / WAIT / MULTI_GET / MULTI_SET request.
  std::size_t maxKeysPerRequest = 131072;
  // Largest whole request (bounds a MULTI_SET or COMPARE_SET made of many large strings).
  std::size_t maxRequestBytes = std::size_t{1} << 30;
  // Most name/value fields in one HELLO (ddprun's extension).
  std::size_t maxHelloFields = 64;
};

namespace wire {

// The VALIDATE magic of v2 connections.
inline constexpr uint32_t kValidateMagic = 0x3C85F7CE;

// ddprun's v2 extension (see the layout above).
inline constexpr uint32_t kExtensionVersion = 1;
inline constexpr uint64_t kCapOnClose = 1;        // HELLO capability bit: ON_CLOSE, ON_CLOSE_CLEAR
inline constexpr uint64_t kCapRequestId = 2;      // HELLO capability bit: REQUEST_ID
// HELLO capability bit a server sets, never a client asks for: it keeps its data across its own
// restart (ddprund --data-dir). Without it a client does not wait for a restart (its keys are gone).
inline constexpr uint64_t kCapDurable = 4;
inline constexpr uint8_t kHelloAccepted = 0;      // HELLO reply status
inline constexpr uint8_t kHelloRefused = 1;
inline constexpr int64_t kOnCloseRefused = -1;    // ON_CLOSE reply: registration not taken

// A wire dialect. kV1 means "v1, not yet known whether v1a or v1b" (server side only).
enum class Dialect : uint8_t { kUnknown, kV1, kV1a, kV1b, kV2 };

// How undecided v1 connections are read (ddprund --legacy-dialect=auto|1.13|2.1).
enum class LegacyDialect : uint8_t { kAuto, kTorch113, kTorch21 };

// Dialect-independent operations.
enum class Op : uint8_t {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kGetNumKeys,
  kWatchKey,
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen,
  kListKeys,
  kBarrier,
  // ddprun's extension (v2 only)
  kHello,
  kOnClose,
  kOnCloseClear,
  kRequestId,
};

// The ops that change the store: those a REQUEST_ID tags so that a retried one applies once
// (a retried read is harmless, so reads are simply sent again).
constexpr bool changesStore(Op op) {
  switch (op) {
    case Op::kSet:
    case Op::kCompareSet:
    case Op::kAdd:
    case Op::kDeleteKey:
    case Op::kAppend:
    case Op::kMultiSet:
    case Op::kQueuePush:
    case Op::kQueuePop: return true;
    default: return false;
  }
}

// Reply bytes of CHECK / WAIT / CANCEL_WAIT / BARRIER / WATCH_KEY.
inline constexpr uint8_t kReady = 0;            // CHECK: every key exists
inline constexpr uint8_t kNotReady = 1;         // CHECK: some key is missing
inline constexpr uint8_t kStopWaiting = 0;      // WAIT / BARRIER done
inline constexpr uint8_t kWaitCanceled = 1;     // answer to CANCEL_WAIT
inline constexpr uint8_t kWatchRegistered = 3;  // answer to WATCH_KEY

// "SET", "COMPARE_SET", ... for log lines.
std::string_view opName(Op op);
std::string_view dialectName(Dialect dialect);

// The opcode byte of `op` in `dialect` (kV1a, kV1b or kV2); nullopt when the dialect lacks it.
std::optional<uint8_t> opcodeFor(Dialect dialect, Op op);

// One decoded request. The views point into the bytes given to decode() (and, for `keys`, into
// storage owned by the decoder): valid until those bytes change or decode() is called again.
struct Request {
  Op op = Op::kGetNumKeys;
  std::string_view key;       // single-key ops
  std::string_view value;     // SET/APPEND/QUEUE_PUSH value, COMPARE_SET/ON_CLOSE expected
  std::string_view desired;   // COMPARE_SET/ON_CLOSE desired
  int64_t number = 0;         // ADD delta, BARRIER world size
  uint32_t nonce = 0;         // PING nonce, VALIDATE magic
  uint32_t version = 0;       // HELLO version
  uint64_t capabilities = 0;  // HELLO capabilities
  uint64_t client = 0;        // REQUEST_ID client id
  uint64_t sequence = 0;      // REQUEST_ID sequence number
  // CHECK/WAIT/MULTI_GET/ON_CLOSE_CLEAR keys; MULTI_SET alternates key, value, key, value, ...;
  // HELLO alternates field name, value, ...
  std::span<const std::string_view> keys;
  // Bytes this request occupies, opcode included.
  std::size_t size = 0;
};

// Not enough bytes yet. `atLeast` is the total buffer size known to be needed (a lower bound);
// `ambiguous` marks the v1 opcode-8 case described above.
struct NeedMore {
  std::size_t atLeast = 0;
  bool ambiguous = false;
};

// The bytes break the protocol or a limit; `reason` says which (for the log line).
struct Malformed {
  std::string reason;
};

using DecodeResult = std::variant<Request, NeedMore, Malformed>;

namespace detail {

// The keys of the request being decoded (CHECK, WAIT, MULTI_GET, MULTI_SET, ON_CLOSE_CLEAR, HELLO
// fields) and, for a key list that arrived in part, where parsing resumes.
struct KeyList {
  std::vector<std::string_view> keys;  // views into the request bytes last given to decode()
  bool resuming = false;               // a list's count was read; `next` is its next string
  uint64_t count = 0;                  // strings in the list (keys, or 2 x pairs)
  std::size_t next = 0;                // offset of the next unparsed string
  const char* base = nullptr;          // bytes.data() of the call that parsed `keys`
};

}  // namespace detail

// Incremental request parser for one server-side connection.
class RequestDecoder {
 public:
  explicit RequestDecoder(WireLimits limits = {}, LegacyDialect legacy = LegacyDialect::kAuto);

  // Decodes the first request in `bytes` (the unconsumed input of the connection). Does not
  // consume anything: the caller drops Request::size bytes after handling the request. After
  // NeedMore the next call must pass the same request again, longer (its bytes may have moved):
  // parsing resumes where it stopped, so a request costs O(its size) however it is split. Pure
  // apart from that and pinning the dialect. Never throws (except std::bad_alloc).
  DecodeResult decode(std::string_view bytes);

  // After NeedMore{ambiguous}: decide that the pending opcode 8 is a v1a DELETE_KEY.
  void resolveAmbiguityAsV1a();

  Dialect dialect() const { return dialect_; }
  // Bytes of the pending (incomplete) request already parsed; the next decode() continues there.
  std::size_t resumeOffset() const { return list_.resuming ? list_.next : 0; }
  // Memory the decoder holds for key views (of the request being decoded, or an earlier one).
  std::size_t memoryBytes() const { return list_.keys.capacity() * sizeof(std::string_view); }
  // Gives back the memory of an earlier request's keys. Call between requests (not after NeedMore;
  // the last Request's keys become invalid).
  void trim() {
    if (!list_.resuming) std::vector<std::string_view>().swap(list_.keys);
  }

 private:
  std::optional<Op> mapOpcode(uint8_t code, std::string_view body, bool& ambiguous);

  WireLimits limits_;
  LegacyDialect legacy_;
  Dialect dialect_ = Dialect::kUnknown;
  detail::KeyList list_;
};

// ---- Encoding primitives: append to `out` (a connection's output buffer) --------------------

void putU8(std::string& out, uint8_t v);
void putU32(std::string& out, uint32_t v);
void putI64(std::string& out, int64_t v);
void putU64(std::string& out, uint64_t v);
// u64 length + bytes.
void putStr(std::string& out, std::string_view s);

// ---- Replies (server side) ------------------------------------------------------------------

// GET / COMPARE_SET / MULTI_GET item: str value.
inline void encodeValueReply(std::string& out, std::string_view value) { putStr(out, value); }
// ADD / GETNUMKEYS / DELETE_KEY / QUEUE_LEN: i64.
inline void encodeIntReply(std::string& out, int64_t v) { putI64(out, v); }
// CHECK / WAIT / CANCEL_WAIT / BARRIER / WATCH_KEY: u8.
inline void encodeByteReply(std::string& out, uint8_t v) { putU8(out, v); }
// PING: the nonce echoed.
inline void encodePingReply(std::string& out, uint32_t nonce) { putU32(out, nonce); }
// HELLO: status, version, capabilities and `fields` (name, value, name, value, ...).
void encodeHelloReply(std::string& out, uint8_t status, uint64_t capabilities,
                      std::span<const std::string_view> fields);

// ---- Requests (client side) -----------------------------------------------------------------

// Appends `request` in `dialect` (kV1a, kV1b or kV2). Uses the fields listed in the layout table
// above (size is ignored). Throws ProtocolError when the dialect lacks the op.
void encodeRequest(std::string& out, Dialect dialect, const Request& request);

// A decoded reply. Integer replies fill `integer`, u8 replies `status`, PING `nonce`, value
// replies `values`. HELLO fills `status`, `version`, `capabilities` and `values` (field name,
// value, name, value, ...). `size` is the bytes it took on the wire. `Value` is std::string_view
// in the Reply decodeReply() gives (views into the bytes given to it), std::string in an
// OwnedReply, which outlives them.
template <class Value>
struct BasicReply {
  int64_t integer = 0;
  uint8_t status = 0;
  uint32_t nonce = 0;
  uint32_t version = 0;
  uint64_t capabilities = 0;
  std::vector<Value> values;
  std::size_t size = 0;
};
using Reply = BasicReply<std::string_view>;
using OwnedReply = BasicReply<std::string>;

// A copy of `reply` that owns its values. Never throws (except std::bad_alloc).
OwnedReply toOwned(const Reply& reply);

using ReplyResult = std::variant<Reply, NeedMore, Malformed>;

// Decodes the reply to a request of kind `op` from the front of `bytes`. `keyCount` is the number
// of keys of a MULTI_GET request (ignored otherwise). Ops without a reply (SET, APPEND, ...) give
// Malformed. `maxValueBytes` bounds each value. Never throws (except std::bad_alloc).
ReplyResult decodeReply(std::string_view bytes, Op op, std::size_t keyCount = 0,
                        std::size_t maxValueBytes = WireLimits{}.maxValueBytes);

// ---- Busy notice (see the layout above) -------------------------------------------------------

inline constexpr std::string_view kBusyMagic = "DDPRBUSY";
inline constexpr std::size_t kBusyReasonMax = 200;

// Appends a busy notice with `reason` (cut to kBusyReasonMax; other than printable ASCII becomes
// '?').
void encodeBusyNotice(std::string& out, std::string_view reason);

// What the front of a connection's first reply bytes say about a busy notice.
struct BusyNotice {
  enum class Kind {
    kNone,     // not a notice: decode the reply as usual
    kPartial,  // the bytes so far are the start of a notice (or of kBusyMagic): read more
    kNotice,   // a whole notice; `reason` holds its text
  };
  Kind kind = Kind::kNone;
  std::string reason;
};
// Never throws (except std::bad_alloc). A notice longer than the limit counts as whole at the
// limit.
BusyNotice decodeBusyNotice(std::string_view bytes);

}  // namespace wire
}  // namespace ddp
