#include "launcher/workers/output_pump.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

// Most text kept by a capture.
constexpr std::size_t kMaxCapture = 1024 * 1024;

}  // namespace

OutputPump::OutputPump(boost::asio::io_context& io, int pipeFd, StreamRoute route)
    : pipe_(io, pipeFd), route_(std::move(route)), heldTimer_(io) {
  pipe_.non_blocking(true);
  if (route_.consoleFd >= 0) console_ = std::make_unique<ConsoleStream>(route_.consoleFd, route_.prefix);
  if (!route_.filePath.empty()) {
    const int mode = route_.append ? O_APPEND : O_TRUNC;
    fileFd_ = ::open(route_.filePath.c_str(), O_WRONLY | O_CREAT | mode | O_CLOEXEC, 0644);
    if (fileFd_ < 0) {
      throw ConfigError("cannot open worker log file " + route_.filePath + ": " +
                        std::strerror(errno));
    }
  }
}

OutputPump::~OutputPump() {
  boost::system::error_code ignored;
  pipe_.close(ignored);
  if (fileFd_ >= 0) ::close(fileFd_);
}

void OutputPump::start() { arm(); }

void OutputPump::arm() {
  pipe_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                   [this](const boost::system::error_code& ec) {
                     if (ec || finished_) return;
                     if (readAvailable()) {
                       arm();
                     } else {
                       finish();
                     }
                   });
}

bool OutputPump::readAvailable() {
  char buf[16384];
  while (true) {
    const ssize_t n = ::read(pipe_.native_handle(), buf, sizeof(buf));
    if (n > 0) {
      consume(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

void OutputPump::consume(const char* data, std::size_t n) {
  bytesRead_ += n;
  if (fileFd_ >= 0) writeAll(fileFd_, std::string(data, n));
  if (console_) toConsole(data, n);
  std::size_t start = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (data[i] != '\n') continue;
    partial_.append(data + start, i - start);
    emitLine(partial_);
    partial_.clear();
    start = i + 1;
  }
  partial_.append(data + start, n - start);
  if (partial_.size() >= kMaxLine) {
    emitLine(partial_);
    partial_.clear();
  }
}

// Complete lines go out at once; what follows the last '\n' waits kPartialDelay for the rest of
// its line (a worker may write one line in several pieces), unless kMaxLine bytes are held.
void OutputPump::toConsole(const char* data, std::size_t n) {
  std::size_t end = n;
  while (end > 0 && data[end - 1] != '\n') --end;
  if (end > 0) {
    held_.append(data, end);
    console_->write(held_);
    held_.clear();
  }
  held_.append(data + end, n - end);
  if (held_.empty()) return;
  if (held_.size() >= kMaxLine) {
    showHeld();
    return;
  }
  if (heldArmed_) return;
  heldArmed_ = true;
  heldTimer_.expires_after(kPartialDelay);
  heldTimer_.async_wait(
      [this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
        if (ec || alive.expired()) return;
        heldArmed_ = false;
        showHeld();
      });
}

void OutputPump::showHeld() {
  if (!held_.empty()) console_->write(held_);
  held_.clear();
}

void OutputPump::emitLine(const std::string& line) {
  if (capturing_) {
    if (capture_.size() < kMaxCapture) capture_ += line + "\n";
    return;
  }
  if (route_.tailLines == 0) return;
  tail_.push_back(line);
  while (tail_.size() > route_.tailLines) tail_.pop_front();
}

void OutputPump::finish() {
  if (finished_) return;
  if (pipe_.is_open()) readAvailable();
  finished_ = true;
  if (!partial_.empty()) emitLine(partial_);
  partial_.clear();
  heldTimer_.cancel();
  heldArmed_ = false;
  if (console_) {
    showHeld();
    console_->endLine();
  }
  boost::system::error_code ignored;
  pipe_.cancel(ignored);
  pipe_.close(ignored);
  if (fileFd_ >= 0) ::close(fileFd_);
  fileFd_ = -1;
}

void OutputPump::beginCapture() {
  capturing_ = true;
  capture_.clear();
}

std::string OutputPump::endCapture() {
  if (!finished_ && pipe_.is_open()) readAvailable();
  if (!partial_.empty() && capturing_) {  // a dump cut off mid-line still belongs to it
    emitLine(partial_);
    partial_.clear();
  }
  capturing_ = false;
  return std::exchange(capture_, std::string());
}

}  // namespace ddp
