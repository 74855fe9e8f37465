// TensorBoardWriter: appends scalar summaries to a TensorBoard event file.
//
// File `<dir>/events.out.tfevents.<unix seconds>.<host>.<pid>.<n>` (TensorBoard's own naming; n
// counts up from 0 until the name is free, the file being created exclusively, so every writer
// has a file of its own): a sequence of TFRecords
//   uint64 length (LE) | uint32 masked CRC-32C of the length bytes | data | uint32 masked CRC of data
// whose data is a serialized tensorflow.Event protobuf, encoded by hand:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first record carries file_version "brain.Event:2", as TensorBoard expects.
//
// Thread safety: not thread-safe; rank 0's training thread owns it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace ddp {

class TensorBoardWriter {
 public:
  // Creates the directory and the event file. Throws ddp::Error when it cannot be written.
  explicit TensorBoardWriter(const std::filesystem::path& dir);

  const std::filesystem::path& path() const { return path_; }
  // Appends one Event with the given scalars at `step` and flushes. Does not throw; a failed
  // write is reported once on the trainer log.
  void addScalars(int64_t step, const std::vector<std::pair<std::string, float>>& scalars);

  // Serialised Event protobufs, exposed for tests.
  static std::string encodeFileVersion(double wallTime);
  static std::string encodeScalars(double wallTime, int64_t step,
                                   const std::vector<std::pair<std::string, float>>& scalars);
  // TFRecord framing of one record.
  static std::string frame(const std::string& data);

 private:
  void writeRecord(const std::string& data);

  std::filesystem::path path_;
  std::ofstream out_;
  bool warned_ = false;
};

}  // namespace ddp
