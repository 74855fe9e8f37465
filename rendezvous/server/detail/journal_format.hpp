// JournalFormat: the bytes of ddprund's data directory (--data-dir), as pure functions (no I/O).
//
// Two kinds of file, both a header then records:
//   header  = 8 bytes magic ("DDPRJNL\0" journal, "DDPRSNP\0" snapshot), u32 format version
//             (kDataFormatVersion), u64 generation                                 (20 bytes)
//             Format 1 is the first and every file ddprund ever wrote carries it; a file of
//             another version (a newer ddprund's) is refused whole, never read in part.
//   record  = u32 payload length, u32 CRC-32 (zlib) of the payload, payload
//   payload = one or more mutations, each u32 length + mutation bytes; a journal record holds what
//             one batch of requests changed (applied together or not at all on replay)
//   mutation = u8 kind, then per kind (str = u64 length + bytes, all integers little-endian):
//     kPut      str key, str value        the value now at key (SET, COMPARE_SET, ADD's result)
//     kAppend   str key, str data         data appended to the value at key (created if missing)
//     kErase    str key
//     kQueuePush str key, str value
//     kQueuePop  str key
//     kClear    -
//     kRequestId u64 client, u64 sequence, str reply   the idempotency table (request_ids.hpp)
//     kEnd      u64 mutations before it   (snapshots only: the last record of a complete file)
// Every mutation is the *effect* of a request (ADD is journaled as the Put of its result), so a
// replay is deterministic whatever the request was.
//
// A record cut short at the end of the last journal file (the daemon was killed while writing it)
// is a torn record: dropped, and replay ends before it. A bad record anywhere else is corruption.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::detail {

inline constexpr uint32_t kDataFormatVersion = 1;
inline constexpr std::size_t kFileHeaderBytes = 20;
inline constexpr std::size_t kRecordHeaderBytes = 8;

enum class FileKind { kJournal, kSnapshot };

enum class MutationKind : uint8_t {
  kPut = 1,
  kAppend = 2,
  kErase = 3,
  kQueuePush = 4,
  kQueuePop = 5,
  kClear = 6,
  kRequestId = 7,
  kEnd = 8,
};

// One decoded mutation; the views point into the bytes given to the decoder.
struct Mutation {
  MutationKind kind = MutationKind::kPut;
  std::string_view key;
  std::string_view value;  // Put/QueuePush value, Append data, RequestId reply
  uint64_t client = 0;     // RequestId; End: the count
  uint64_t sequence = 0;   // RequestId
};

// Appends `m` (u32 length + bytes) to `out`, the payload of the record being built.
void encodeMutation(std::string& out, const Mutation& m);
// Appends a record (header + `payload`) to `out`.
void encodeRecord(std::string& out, std::string_view payload);
// Appends a file header.
void encodeFileHeader(std::string& out, FileKind kind, uint64_t generation);

// Checks a file header: nullopt and `error` set when it is not a `kind` file of this format.
std::optional<uint64_t> decodeFileHeader(std::string_view bytes, FileKind kind,
                                         std::string& error);

// The records of a file body (after its header).
struct RecordScan {
  std::vector<std::string_view> payloads;
  std::size_t validBytes = 0;  // bytes of the body the payloads cover
  bool torn = false;           // the last record runs past the end or fails its checksum
  std::string error;           // set when a bad record is followed by more bytes (corruption)
};
RecordScan scanRecords(std::string_view body);

// Splits a record payload into mutations; false (and `error`) when it is malformed.
bool decodeMutations(std::string_view payload, std::vector<Mutation>& out, std::string& error);

}  // namespace ddp::detail
