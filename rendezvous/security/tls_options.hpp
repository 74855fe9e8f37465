// TLS settings of the rendezvous transport, as plain values (files named by the user). The SSL
// contexts built from them live in tls_context.hpp, so that options structs do not pull in
// OpenSSL headers.
//
//   server (ddprund --tls-cert/--tls-key/--tls-ca): TLS is on when certFile is set; with caFile
//     every TLS client must present a certificate that CA signed (mutual TLS).
//   client (--rdzv-conf tls_ca=,tls_cert=,tls_key=): TLS is on when caFile is set; the server's
//     certificate must be signed by that CA and name the host the client connects to (DNS or IP
//     subject alternative name); certFile/keyFile are the client's own certificate for a server
//     that requires one.
//
// Thread safety: value types.
#pragma once

#include <string>

namespace ddp {

struct TlsServerOptions {
  // PEM certificate chain and private key of the server.
  std::string certFile;
  std::string keyFile;
  // PEM CA bundle that client certificates must chain to; empty: clients need no certificate.
  std::string caFile;
  bool enabled() const { return !certFile.empty(); }
};

struct TlsClientOptions {
  // PEM CA bundle the server's certificate must chain to; empty: TLS is off.
  std::string caFile;
  // PEM certificate chain and private key this client presents (mutual TLS); both or neither.
  std::string certFile;
  std::string keyFile;
  bool enabled() const { return !caFile.empty(); }
};

}  // namespace ddp
