#include "launcher/hang/file_timer_server.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <variant>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {
namespace {

std::string makeTempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                      "/ddprun_timer_XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    throw ConfigError("cannot create a folder for the worker timer FIFO (" + templ +
                      "): " + std::strerror(errno));
  }
  return templ;
}

// Creates the FIFO (replacing whatever is at `path`) and opens its read end, then a write end.
int openFifo(const std::string& path, int& writeFd) {
  ::unlink(path.c_str());  // torch's FileTimerServer removes an existing file too
  if (::mkfifo(path.c_str(), 0600) != 0) {
    throw ConfigError("cannot create the worker timer FIFO " + path + ": " + std::strerror(errno));
  }
  const int readFd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (readFd < 0) {
    throw ConfigError("cannot open the worker timer FIFO " + path + ": " + std::strerror(errno));
  }
  writeFd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (writeFd < 0) {
    const int e = errno;
    ::close(readFd);
    throw ConfigError("cannot open the worker timer FIFO " + path + ": " + std::strerror(e));
  }
  return readFd;
}

}  // namespace

FileTimerServer::FileTimerServer(boost::asio::io_context& io, const std::string& path)
    : fifo_(io) {
  if (path.empty()) {
    tempDir_ = makeTempDir();
    path_ = tempDir_ + "/fifo";
  } else {
    path_ = path;
  }
  try {
    fifo_.assign(openFifo(path_, writeFd_));
  } catch (...) {
    if (!tempDir_.empty()) ::rmdir(tempDir_.c_str());
    throw;
  }
  fifo_.non_blocking(true);
  arm();
}

FileTimerServer::~FileTimerServer() {
  boost::system::error_code ignored;
  fifo_.close(ignored);
  if (writeFd_ >= 0) ::close(writeFd_);
  ::unlink(path_.c_str());
  if (!tempDir_.empty()) ::rmdir(tempDir_.c_str());
}

void FileTimerServer::arm() {
  fifo_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                   [this](const boost::system::error_code& ec) {
                     if (ec) return;  // closed
                     readAvailable();
                     arm();
                   });
}

void FileTimerServer::readAvailable() {
  char buf[16384];
  while (true) {
    const ssize_t n = ::read(fifo_.native_handle(), buf, sizeof(buf));
    if (n > 0) {
      consume(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;  // EAGAIN (our own write end keeps EOF away)
  }
}

void FileTimerServer::consume(const char* data, std::size_t n) {
  std::size_t start = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (data[i] != '\n') continue;
    if (!skipping_) {
      partial_.append(data + start, i - start);
      onLine(partial_);
    }
    partial_.clear();
    skipping_ = false;
    start = i + 1;
  }
  if (skipping_) return;
  partial_.append(data + start, n - start);
  if (partial_.size() >= kMaxTimerLine) {
    onLine(partial_);  // rejected as too long
    partial_.clear();
    skipping_ = true;
  }
}

void FileTimerServer::onLine(const std::string& line) {
  auto parsed = parseTimerLine(line);
  if (auto* bad = std::get_if<MalformedTimerLine>(&parsed)) {
    ++malformed_;
    const auto now = std::chrono::steady_clock::now();
    if (now - lastWarning_ >= std::chrono::seconds(1)) {
      lastWarning_ = now;
      logger("agent")->warn("ignored a malformed line on the worker timer FIFO {} ({}; {} so far)",
                            path_, bad->why, malformed_);
    }
    return;
  }
  ++requests_;
  if (handler_) handler_(std::get<FileTimerRequest>(parsed));
}

}  // namespace ddp
