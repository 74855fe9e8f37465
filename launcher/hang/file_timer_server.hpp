// FileTimerServer: the agent's end of the worker timer FIFO — torch's file-based watchdog
// (TORCHELASTIC_ENABLE_FILE_TIMER / TORCHELASTIC_TIMER_FILE, served as torchrun's agent serves it)
// and worker_runtime's progress beats, one FIFO and one protocol (file_timer_request.hpp).
//
// The constructor creates the FIFO (mode 0600; a file already at the path is replaced, as torch's
// FileTimerServer does) and opens it for reading before any worker starts, so a client's
// non-blocking open never fails with "no reader". It also keeps a write end of its own open: the
// FIFO then never reads as end-of-file between clients, and readiness is an io_context event —
// nothing polls. Each complete line is parsed and handed to the current handler; a malformed line
// is logged (at most once per second) and dropped, and the rest keep being served. A line without
// its '\n' waits for the rest; one longer than PIPE_BUF is dropped up to its '\n'.
//
// The destructor closes both ends and removes the FIFO.
//
// Thread safety: use from the io_context's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "launcher/hang/file_timer_request.hpp"

namespace ddp {

class FileTimerServer {
 public:
  using Handler = std::function<void(const FileTimerRequest&)>;

  // Creates and opens the FIFO at `path` ("" = a fresh $TMPDIR/ddprun_timer_XXXXXX/fifo, its folder
  // removed with it). Throws ConfigError naming the path when it cannot.
  FileTimerServer(boost::asio::io_context& io, const std::string& path);
  ~FileTimerServer();
  FileTimerServer(const FileTimerServer&) = delete;
  FileTimerServer& operator=(const FileTimerServer&) = delete;

  const std::string& path() const { return path_; }

  // Requests go to `handler` from now on (nullptr: dropped, e.g. between generations).
  void setHandler(Handler handler) { handler_ = std::move(handler); }

  // Lines parsed and malformed so far (tests, logs).
  uint64_t requests() const { return requests_; }
  uint64_t malformed() const { return malformed_; }

 private:
  void arm();
  void readAvailable();
  void consume(const char* data, std::size_t n);
  void onLine(const std::string& line);

  std::string path_;
  std::string tempDir_;  // removed with the FIFO when we made it
  int writeFd_ = -1;
  boost::asio::posix::stream_descriptor fifo_;
  Handler handler_;
  std::string partial_;
  bool skipping_ = false;  // dropping an over-long line up to its '\n'
  uint64_t requests_ = 0;
  uint64_t malformed_ = 0;
  std::chrono::steady_clock::time_point lastWarning_{};
};

}  // namespace ddp
