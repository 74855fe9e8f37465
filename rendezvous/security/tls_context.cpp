#include "rendezvous/security/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace ssl = boost::asio::ssl;

namespace {

std::shared_ptr<ssl::context> baseContext(ssl::context::method method) {
  auto ctx = std::make_shared<ssl::context>(method);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
  SSL_CTX_set_options(ctx->native_handle(), SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
  return ctx;
}

// Runs `load` (an Asio call that may fail) and turns its failure into a ConfigError naming `what`.
template <class Load>
void load(const std::string& what, const std::string& file, Load fn) {
  ERR_clear_error();
  boost::system::error_code ec;
  fn(ec);
  if (ec) {
    throw ConfigError("TLS: cannot use " + what + " '" + file + "': " + takeTlsErrors(ec.message()));
  }
}

void loadIdentity(ssl::context& ctx, const std::string& cert, const std::string& key,
                  const std::string& who) {
  if (cert.empty() != key.empty()) {
    throw ConfigError("TLS: " + who + " needs both a certificate and its key (got only the " +
                      (cert.empty() ? "key" : "certificate") + ")");
  }
  if (cert.empty()) return;
  load("the certificate", cert, [&](auto& ec) { ctx.use_certificate_chain_file(cert, ec); });
  load("the private key", key, [&](auto& ec) { ctx.use_private_key_file(key, ssl::context::pem, ec); });
  if (SSL_CTX_check_private_key(ctx.native_handle()) != 1) {
    throw ConfigError("TLS: the private key '" + key + "' does not match the certificate '" + cert +
                      "': " + takeTlsErrors("mismatch"));
  }
}

}  // namespace

std::string takeTlsErrors(const std::string& fallback) {
  std::string out;
  while (const unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof(text));
    if (!out.empty()) out += "; ";
    const char* reason = ERR_reason_error_string(code);
    out += reason != nullptr ? reason : text;
  }
  return out.empty() ? fallback : out;
}

std::shared_ptr<ssl::context> makeServerTlsContext(const TlsServerOptions& options) {
  auto ctx = baseContext(ssl::context::tls_server);
  if (options.certFile.empty()) throw ConfigError("TLS: the server needs a certificate and key");
  loadIdentity(*ctx, options.certFile, options.keyFile, "the server");
  if (!options.caFile.empty()) {
    load("the CA file", options.caFile, [&](auto& ec) { ctx->load_verify_file(options.caFile, ec); });
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  } else {
    ctx->set_verify_mode(ssl::verify_none);
  }
  return ctx;
}

std::shared_ptr<ssl::context> makeClientTlsContext(const TlsClientOptions& options) {
  if (options.caFile.empty()) {
    throw ConfigError("TLS: a client certificate needs tls_ca (the CA that signed the server's "
                      "certificate)");
  }
  auto ctx = baseContext(ssl::context::tls_client);
  load("the CA file", options.caFile, [&](auto& ec) { ctx->load_verify_file(options.caFile, ec); });
  ctx->set_verify_mode(ssl::verify_peer);
  loadIdentity(*ctx, options.certFile, options.keyFile, "the client");
  return ctx;
}

}  // namespace ddp
