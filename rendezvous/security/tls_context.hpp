// TLS contexts (Boost.Asio SSL over OpenSSL) built from TlsServerOptions / TlsClientOptions.
//
// Both accept TLS 1.2 and later only, and treat a peer that closes the TCP connection without a
// TLS close_notify as an orderly end of stream (store connections are closed that way: a process
// that dies sends no close_notify). Files are read once, when the context is made.
//
// Thread safety: a context is shared by the connections made from it, read-only after creation
// (OpenSSL contexts are safe to use from several threads once configured).
#pragma once

#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>

#include "rendezvous/security/tls_options.hpp"

namespace ddp {

// A server context: certificate + key; with caFile, client certificates are required and
// verified. Throws ConfigError naming the file and OpenSSL's reason (missing file, key that does
// not match the certificate, ...).
std::shared_ptr<boost::asio::ssl::context> makeServerTlsContext(const TlsServerOptions& options);

// A client context: verifies the server against caFile; presents certFile/keyFile when given.
// Throws ConfigError as above (also for a certificate without a key or the reverse).
std::shared_ptr<boost::asio::ssl::context> makeClientTlsContext(const TlsClientOptions& options);

// The reasons in OpenSSL's error queue of this thread, "; "-joined (the queue is emptied);
// `fallback` when it is empty.
std::string takeTlsErrors(const std::string& fallback);

}  // namespace ddp
