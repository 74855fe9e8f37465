#include "rendezvous/server/detail/journal_format.hpp"

#include <zlib.h>

#include <cstring>

namespace ddp::detail {

namespace {

constexpr char kJournalMagic[8] = {'D', 'D', 'P', 'R', 'J', 'N', 'L', '\0'};
constexpr char kSnapshotMagic[8] = {'D', 'D', 'P', 'R', 'S', 'N', 'P', '\0'};

template <typename T>
void putLe(std::string& out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

template <typename T>
T getLe(const char* p) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<T>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}

void putStr(std::string& out, std::string_view s) {
  putLe<uint64_t>(out, s.size());
  out.append(s);
}

uint32_t checksum(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed large payloads in pieces.
  constexpr std::size_t kPiece = 1u << 30;
  for (std::size_t at = 0; at < bytes.size(); at += kPiece) {
    const std::size_t n = std::min(kPiece, bytes.size() - at);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

// A reader of one mutation's fields; every get fails (returns false) past the end.
struct Cursor {
  std::string_view bytes;
  std::size_t at = 0;
  bool u8(uint8_t& v) {
    if (bytes.size() - at < 1) return false;
    v = static_cast<uint8_t>(bytes[at++]);
    return true;
  }
  bool u64(uint64_t& v) {
    if (bytes.size() - at < 8) return false;
    v = getLe<uint64_t>(bytes.data() + at);
    at += 8;
    return true;
  }
  bool str(std::string_view& s) {
    uint64_t n = 0;
    if (!u64(n) || bytes.size() - at < n) return false;
    s = bytes.substr(at, n);
    at += n;
    return true;
  }
};

bool decodeOne(std::string_view bytes, Mutation& m) {
  Cursor c{bytes};
  uint8_t kind = 0;
  if (!c.u8(kind)) return false;
  m = Mutation{};
  m.kind = static_cast<MutationKind>(kind);
  bool ok = false;
  switch (m.kind) {
    case MutationKind::kPut:
    case MutationKind::kAppend:
    case MutationKind::kQueuePush: ok = c.str(m.key) && c.str(m.value); break;
    case MutationKind::kErase:
    case MutationKind::kQueuePop: ok = c.str(m.key); break;
    case MutationKind::kClear: ok = true; break;
    case MutationKind::kRequestId: ok = c.u64(m.client) && c.u64(m.sequence) && c.str(m.value); break;
    case MutationKind::kEnd: ok = c.u64(m.client); break;
  }
  return ok && c.at == bytes.size();
}

}  // namespace

void encodeMutation(std::string& out, const Mutation& m) {
  const std::size_t lengthAt = out.size();
  putLe<uint32_t>(out, 0);
  out += static_cast<char>(m.kind);
  switch (m.kind) {
    case MutationKind::kPut:
    case MutationKind::kAppend:
    case MutationKind::kQueuePush: putStr(out, m.key); putStr(out, m.value); break;
    case MutationKind::kErase:
    case MutationKind::kQueuePop: putStr(out, m.key); break;
    case MutationKind::kClear: break;
    case MutationKind::kRequestId:
      putLe<uint64_t>(out, m.client);
      putLe<uint64_t>(out, m.sequence);
      putStr(out, m.value);
      break;
    case MutationKind::kEnd: putLe<uint64_t>(out, m.client); break;
  }
  const auto length = static_cast<uint32_t>(out.size() - lengthAt - 4);
  for (std::size_t i = 0; i < 4; ++i) out[lengthAt + i] = static_cast<char>(length >> (8 * i));
}

void encodeRecord(std::string& out, std::string_view payload) {
  putLe<uint32_t>(out, static_cast<uint32_t>(payload.size()));
  putLe<uint32_t>(out, checksum(payload));
  out.append(payload);
}

void encodeFileHeader(std::string& out, FileKind kind, uint64_t generation) {
  out.append(kind == FileKind::kJournal ? kJournalMagic : kSnapshotMagic, 8);
  putLe<uint32_t>(out, kDataFormatVersion);
  putLe<uint64_t>(out, generation);
}

std::optional<uint64_t> decodeFileHeader(std::string_view bytes, FileKind kind,
                                         std::string& error) {
  const char* magic = kind == FileKind::kJournal ? kJournalMagic : kSnapshotMagic;
  if (bytes.size() < kFileHeaderBytes || std::memcmp(bytes.data(), magic, 8) != 0) {
    error = std::string("not a ddprund ") + (kind == FileKind::kJournal ? "journal" : "snapshot") +
            " (bad header)";
    return std::nullopt;
  }
  const auto version = getLe<uint32_t>(bytes.data() + 8);
  if (version != kDataFormatVersion) {
    // Format 1 is the first: every file ddprund ever wrote has this header, so there is no older,
    // unversioned file to load; anything else was written by a newer ddprund (or is damaged).
    error = "written in data format " + std::to_string(version) +
            (version > kDataFormatVersion ? " by a newer ddprund" : "") +
            "; this ddprund reads format " + std::to_string(kDataFormatVersion) +
            " only: run the ddprund that wrote it, or start on another --data-dir";
    return std::nullopt;
  }
  return getLe<uint64_t>(bytes.data() + 12);
}

RecordScan scanRecords(std::string_view body) {
  RecordScan scan;
  std::size_t at = 0;
  while (at < body.size()) {
    const std::size_t left = body.size() - at;
    const uint64_t length = left < kRecordHeaderBytes ? 0 : getLe<uint32_t>(body.data() + at);
    const bool fits = left >= kRecordHeaderBytes && length <= left - kRecordHeaderBytes;
    const std::string_view payload =
        fits ? body.substr(at + kRecordHeaderBytes, length) : std::string_view();
    if (!fits || getLe<uint32_t>(body.data() + at + 4) != checksum(payload)) {
      if (!fits || at + kRecordHeaderBytes + length == body.size()) {
        scan.torn = true;  // the write of the last record was cut short
      } else {
        scan.error = "bad checksum in the record at byte " + std::to_string(at + kFileHeaderBytes);
      }
      return scan;
    }
    scan.payloads.push_back(payload);
    at += kRecordHeaderBytes + length;
    scan.validBytes = at;
  }
  return scan;
}

bool decodeMutations(std::string_view payload, std::vector<Mutation>& out, std::string& error) {
  std::size_t at = 0;
  while (at < payload.size()) {
    if (payload.size() - at < 4) break;
    const uint32_t length = getLe<uint32_t>(payload.data() + at);
    if (length > payload.size() - at - 4) break;
    Mutation m;
    if (!decodeOne(payload.substr(at + 4, length), m)) break;
    out.push_back(m);
    at += 4 + length;
  }
  if (at == payload.size()) return true;
  error = "a malformed mutation in a record whose checksum is right (another daemon version?)";
  return false;
}

}  // namespace ddp::detail
