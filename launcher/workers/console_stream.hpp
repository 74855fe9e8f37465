// ConsoleStream: one worker stream's text on ddprun's console, prefixed where its lines start,
// passed on as it comes — partial lines included (a prompt, a progress bar's "\r" updates).
//
// Lines start after '\n' and after '\r' (a progress bar rewrites its line from column 0, so the
// prefix is written again); "\r\n" ends a line rather than starting an empty one. The prefix is
// written lazily, just before the first byte of a line, so a stream that ends its text with '\n'
// leaves nothing open.
//
// Streams that write to the same file (stdout and stderr on one terminal) share a ConsoleScreen,
// which knows whose line is open (its last text did not end with '\n'). Another stream's text
// first ends that line with '\n', so no rank's text lands in the middle of another's line; when
// that text ends a line, the interrupted line's visible part (the text after its last '\n' or
// '\r', at most kMaxVisible bytes) is shown again under it, so that a rank waiting at a prompt
// (`(Pdb) `) keeps it on the last line while the others print.
//
// Each write() to the file is one call for what one write() of the caller brought (and one for a
// re-shown line). Errors are ignored: a closed console must not stop the agent.
//
// Thread safety: streams sharing a screen are used from one thread (the supervisor's io_context).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace ddp {

class ConsoleStream;

class ConsoleScreen {
 public:
  // The screen of the file `fd` refers to: the same object for every descriptor of that file
  // while one is alive (device and inode; a new one when fstat fails). Thread-safe.
  static std::shared_ptr<ConsoleScreen> of(int fd);

 private:
  friend class ConsoleStream;
  ConsoleStream* open_ = nullptr;         // whose line is open
  ConsoleStream* interrupted_ = nullptr;  // whose open line another stream's text ended
};

class ConsoleStream {
 public:
  static constexpr std::size_t kMaxVisible = 4096;

  ConsoleStream(int fd, std::string prefix);
  ~ConsoleStream();  // forgets this stream on its screen; writes nothing
  ConsoleStream(const ConsoleStream&) = delete;
  ConsoleStream& operator=(const ConsoleStream&) = delete;

  // Writes `text` with the prefix where its lines start (see above). Blocks as write() does.
  void write(std::string_view text);
  // Ends this stream's open line with '\n' (its worker exited mid-line). Nothing when none is open.
  void endLine();

 private:
  enum class LineState { kStart, kAfterReturn, kMiddle };
  std::string render(std::string_view text);
  void takeScreen(std::string& out);
  void releaseScreen();

  int fd_;
  std::string prefix_;
  std::shared_ptr<ConsoleScreen> screen_;
  LineState state_ = LineState::kStart;
  std::string visible_;  // this line's text since its last '\n' or '\r' (at most kMaxVisible)
};

}  // namespace ddp
