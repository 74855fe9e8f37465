#include "launcher/workers/console_stream.hpp"

#include "launcher/workers/output_pump.hpp"

#include <sys/stat.h>

#include <map>
#include <mutex>
#include <utility>

namespace ddp {

std::shared_ptr<ConsoleScreen> ConsoleScreen::of(int fd) {
  static std::mutex mutex;
  static std::map<std::pair<dev_t, ino_t>, std::weak_ptr<ConsoleScreen>> screens;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::make_shared<ConsoleScreen>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = screens[{st.st_dev, st.st_ino}];
  if (auto screen = slot.lock()) return screen;
  auto screen = std::make_shared<ConsoleScreen>();
  slot = screen;
  return screen;
}

ConsoleStream::ConsoleStream(int fd, std::string prefix)
    : fd_(fd), prefix_(std::move(prefix)), screen_(ConsoleScreen::of(fd)) {}

ConsoleStream::~ConsoleStream() { releaseScreen(); }

void ConsoleStream::releaseScreen() {
  if (screen_->open_ == this) screen_->open_ = nullptr;
  if (screen_->interrupted_ == this) screen_->interrupted_ = nullptr;
}

// Another stream's open line ends here: this text starts on a line of its own.
void ConsoleStream::takeScreen(std::string& out) {
  ConsoleStream* other = screen_->open_;
  if (other == nullptr || other == this) return;
  out += '\n';
  other->state_ = LineState::kStart;
  screen_->interrupted_ = other;
  screen_->open_ = nullptr;
}

std::string ConsoleStream::render(std::string_view text) {
  std::string out;
  out.reserve(text.size() + prefix_.size() * 2);
  for (const char c : text) {
    if (c == '\r' && state_ != LineState::kMiddle) {  // nothing of this line shown yet
      out += c;
      continue;
    }
    if (c == '\n' && state_ == LineState::kAfterReturn) {  // "\r\n": the line ends
      out += c;
      state_ = LineState::kStart;
      continue;
    }
    if (state_ != LineState::kMiddle) {
      out += prefix_;
      visible_.clear();
      state_ = LineState::kMiddle;
    }
    out += c;
    if (c == '\n') {
      state_ = LineState::kStart;
      visible_.clear();
    } else if (c == '\r') {
      state_ = LineState::kAfterReturn;
      visible_.clear();
    } else if (visible_.size() < kMaxVisible) {
      visible_ += c;
    }
  }
  return out;
}

void ConsoleStream::write(std::string_view text) {
  if (text.empty()) return;
  std::string out;
  takeScreen(out);
  if (screen_->interrupted_ == this) screen_->interrupted_ = nullptr;  // it goes on by itself
  out += render(text);
  if (state_ != LineState::kStart) {
    screen_->open_ = this;
  } else {
    if (screen_->open_ == this) screen_->open_ = nullptr;
    ConsoleStream* waiting = screen_->interrupted_;
    if (waiting != nullptr && !waiting->visible_.empty()) {  // show its prompt again
      out += waiting->prefix_ + waiting->visible_;
      waiting->state_ = LineState::kMiddle;
      screen_->open_ = waiting;
      screen_->interrupted_ = nullptr;
    }
  }
  writeAll(fd_, out);
}

void ConsoleStream::endLine() {
  if (screen_->interrupted_ == this) screen_->interrupted_ = nullptr;
  if (state_ == LineState::kStart) return;
  state_ = LineState::kStart;
  visible_.clear();
  if (screen_->open_ != this) return;
  screen_->open_ = nullptr;
  writeAll(fd_, "\n");
}

}  // namespace ddp
