#include "trainer/tensorboard_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/local_address.hpp"
#include "rendezvous/base/logging.hpp"
#include "trainer/crc32c.hpp"

namespace ddp {
namespace {

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void fixedLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void lengthDelimited(std::string& out, int field, const std::string& bytes) {
  varint(out, (uint64_t(field) << 3) | 2);
  varint(out, bytes.size());
  out += bytes;
}

void wallTimeField(std::string& out, double wallTime) {
  uint64_t bits;
  std::memcpy(&bits, &wallTime, 8);
  varint(out, (1 << 3) | 1);  // field 1, fixed64
  fixedLe(out, bits, 8);
}

double now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string TensorBoardWriter::encodeFileVersion(double wallTime) {
  std::string event;
  wallTimeField(event, wallTime);
  lengthDelimited(event, 3, "brain.Event:2");
  return event;
}

std::string TensorBoardWriter::encodeScalars(double wallTime, int64_t step,
                                             const std::vector<std::pair<std::string, float>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    lengthDelimited(v, 1, tag);
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    varint(v, (2 << 3) | 5);  // field 2, fixed32
    fixedLe(v, bits, 4);
    lengthDelimited(summary, 1, v);
  }
  std::string event;
  wallTimeField(event, wallTime);
  varint(event, (2 << 3) | 0);  // field 2, varint
  varint(event, static_cast<uint64_t>(step));
  lengthDelimited(event, 5, summary);
  return event;
}

std::string TensorBoardWriter::frame(const std::string& data) {
  std::string header;
  fixedLe(header, data.size(), 8);
  std::string out = header;
  fixedLe(out, maskedCrc32c(header.data(), 8), 4);
  out += data;
  fixedLe(out, maskedCrc32c(data.data(), data.size()), 4);
  return out;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string base = "events.out.tfevents." + std::to_string(static_cast<int64_t>(now())) +
                           "." + hostName() + "." + std::to_string(::getpid()) + ".";
  // Created exclusively: two runs (or writers) starting in the same second never share a file.
  for (int n = 0;; ++n) {
    path_ = dir / (base + std::to_string(n));
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      break;
    }
    if (errno != EEXIST || n >= 1000) {
      throw Error("tensorboard: cannot create event file " + path_.string() + ": " +
                  std::strerror(errno));
    }
  }
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) throw Error("tensorboard: cannot open event file " + path_.string());
  writeRecord(encodeFileVersion(now()));
}

void TensorBoardWriter::addScalars(int64_t step,
                                   const std::vector<std::pair<std::string, float>>& scalars) {
  writeRecord(encodeScalars(now(), step, scalars));
}

void TensorBoardWriter::writeRecord(const std::string& data) {
  auto record = frame(data);
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  out_.flush();
  if (!out_ && !warned_) {
    warned_ = true;
    logger("trainer")->warn("tensorboard: writing {} failed; further scalars are dropped", path_.string());
  }
}

}  // namespace ddp
