// DeadlineSocket's TLS half (see deadline_socket.hpp): OpenSSL over the socket's non-blocking
// descriptor, every wait in poll(2) bounded by the caller's deadline.
#include <poll.h>

#include <cerrno>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "rendezvous/security/tls_context.hpp"
#include "rendezvous/store/detail/deadline_socket.hpp"

namespace ddp::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr std::size_t kChunk = 64 * 1024;

std::string bare(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

// Makes `ssl` check that the server's certificate names `host` (an IP SAN for an address literal,
// else a DNS name) and sends it as SNI. False when OpenSSL refuses the name.
bool expectPeerName(SSL* ssl, const std::string& host) {
  const std::string name = bare(host);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  boost::system::error_code ec;
  asio::ip::make_address(name, ec);
  if (!ec) return X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) == 1;
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return SSL_set_tlsext_host_name(ssl, name.c_str()) == 1 && SSL_set1_host(ssl, name.c_str()) == 1;
}

}  // namespace

bool DeadlineSocket::waitForTls(int rc, Clock::time_point deadline, error_code& ec, int interruptFd) {
  const int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_WANT_READ) return waitFor(POLLIN, deadline, ec, interruptFd);
  if (err == SSL_ERROR_WANT_WRITE) return waitFor(POLLOUT, deadline, ec, interruptFd);
  if (err == SSL_ERROR_ZERO_RETURN) {
    ec = asio::error::eof;
  } else if (err == SSL_ERROR_SYSCALL && errno != 0) {
    ec = error_code(errno, boost::system::system_category());
  } else if (err == SSL_ERROR_SYSCALL) {
    ec = asio::error::eof;
  } else {
    const unsigned long code = ERR_peek_last_error();
    ec = error_code(static_cast<int>(code), asio::error::get_ssl_category());
  }
  return true;
}

std::string DeadlineSocket::startTls(SSL_CTX* context, const std::string& host, Clock::time_point deadline) {
  ERR_clear_error();
  ssl_ = SSL_new(context);
  if (ssl_ == nullptr || SSL_set_fd(ssl_, socket_.native_handle()) != 1 || !expectPeerName(ssl_, host)) {
    close();
    return "TLS set-up: " + takeTlsErrors("out of memory");
  }
  SSL_set_mode(ssl_, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  for (;;) {
    const int rc = SSL_connect(ssl_);
    if (rc == 1) return {};
    error_code ec;
    const bool ready = waitForTls(rc, deadline, ec);
    if (ready && !ec) continue;
    std::string why;
    if (!ready) {
      why = "no TLS handshake in time";
    } else if (SSL_get_verify_result(ssl_) != X509_V_OK) {
      why = std::string("the server's certificate was refused: ") +
            X509_verify_cert_error_string(SSL_get_verify_result(ssl_));
    } else if (ec == asio::error::eof) {
      why = "the server closed the connection (does it speak TLS? does it want a client certificate?)";
    } else {
      why = takeTlsErrors(ec.message());
    }
    ERR_clear_error();
    close();
    return "TLS handshake: " + why;
  }
}

error_code DeadlineSocket::tlsWriteAll(std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    ERR_clear_error();
    const int n = SSL_write(ssl_, bytes.data(), static_cast<int>(std::min<std::size_t>(bytes.size(), 1 << 30)));
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    error_code ec;
    if (!waitForTls(n, deadline, ec)) return ec ? ec : error_code(asio::error::timed_out);
    if (ec) return ec;
  }
  return {};
}

error_code DeadlineSocket::tlsReadSome(std::string& buffer, Clock::time_point deadline, int interruptFd) {
  for (;;) {
    const std::size_t old = buffer.size();
    buffer.resize(old + kChunk);
    ERR_clear_error();
    const int n = SSL_read(ssl_, buffer.data() + old, static_cast<int>(kChunk));
    buffer.resize(old + (n > 0 ? static_cast<std::size_t>(n) : 0));
    if (n > 0) return {};
    error_code ec;
    if (!waitForTls(n, deadline, ec, interruptFd)) return ec ? ec : error_code(asio::error::timed_out);
    if (ec) return ec;
  }
}

}  // namespace ddp::detail
