// OutputPump: carries one worker stream (stdout or stderr) from its pipe (or pseudo-terminal:
// terminal.hpp) to a log file and/or the agent's console.
//
// The file gets the raw bytes as they arrive. The console gets the text with the worker's prefix
// where its lines start (console_stream.hpp): complete lines as soon as they are read; a partial
// line (a prompt, a progress bar's "\r" updates) kPartialDelay after it came, unless its line
// ends first — so a line a worker writes in pieces stays whole — or at once when kMaxLine bytes
// are held, so no line is buffered without bound. A final line without '\n' is completed at the
// end. Another rank's text never lands in the middle of a shown line. The last `tailLines` lines
// are kept for the failure summary. Reads are readiness events on the io_context (no polling).
//
// Thread safety: use from the io_context's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "launcher/workers/console_stream.hpp"
#include "rendezvous/base/write_all.hpp"

namespace ddp {

struct StreamRoute {
  std::string filePath;       // "" = no file
  int consoleFd = -1;         // -1 = not on the console (redirected or filtered out)
  std::string prefix;         // put before each console line
  std::size_t tailLines = 0;  // how many last lines to keep
  bool append = false;        // the file goes on after a replaced worker's output (not truncated)
};

class OutputPump {
 public:
  // How long a partial line waits for the rest of its line before it is shown as it is.
  static constexpr std::chrono::milliseconds kPartialDelay{20};
  // Held text of a partial line past which it is shown at once.
  static constexpr std::size_t kMaxLine = 64 * 1024;

  // Takes ownership of `pipeFd`. Opens route.filePath (truncated unless route.append); throws ConfigError naming the
  // path when it cannot.
  OutputPump(boost::asio::io_context& io, int pipeFd, StreamRoute route);
  ~OutputPump();
  OutputPump(const OutputPump&) = delete;
  OutputPump& operator=(const OutputPump&) = delete;

  // Starts reading. Non-blocking.
  void start();
  // Reads whatever the pipe holds now without waiting (call after the writer exited), then stops
  // reading, completes a partial last line and closes the pipe and file. Idempotent.
  void finish();

  const std::deque<std::string>& tail() const { return tail_; }
  // Bytes read from the pipe so far (hang detection samples it as output activity).
  uint64_t bytesRead() const { return bytesRead_; }

  // Hang detection: lines from now on are also kept apart (at most 1 MiB; a Python worker's
  // faulthandler dump) and left out of the tail, which keeps the lines from before. Non-blocking.
  void beginCapture();
  // Reads what the pipe holds now (without waiting), ends the capture and returns its text.
  std::string endCapture();

 private:
  void arm();
  bool readAvailable();  // false on EOF or error
  void consume(const char* data, std::size_t n);
  void emitLine(const std::string& line);
  void toConsole(const char* data, std::size_t n);
  void showHeld();

  boost::asio::posix::stream_descriptor pipe_;
  StreamRoute route_;
  int fileFd_ = -1;
  std::string partial_;  // the tail's and the capture's line in progress
  std::unique_ptr<ConsoleStream> console_;  // when route_.consoleFd >= 0
  std::string held_;                        // a partial line not shown yet
  boost::asio::steady_timer heldTimer_;
  bool heldArmed_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // expires with the pump
  std::deque<std::string> tail_;
  bool finished_ = false;
  uint64_t bytesRead_ = 0;
  bool capturing_ = false;
  std::string capture_;
};

}  // namespace ddp
