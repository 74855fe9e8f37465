// SessionAuth: on a server with a token (ddprund --token-file, an agent-hosted store of a job
// with token_file), whether a connection may make requests yet.
//
// A connection is authenticated once its HELLO (wire_codec.hpp) carries a "token" field equal to
// the server's token (compared in constant time), or from the start when its address is in
// --allow-unauthenticated (torch clients, which never say HELLO). Until then only VALIDATE, PING
// and HELLO are served: any other request is refused and the connection closed (there is no
// error reply in the TCPStore protocol). A HELLO without the right token gets HELLO's "refused"
// status with an "error" field, then the connection closes. A server without a token serves
// everything, and ignores a token a client sends.
//
// Thread safety: none; one session owns it.
#pragma once

#include <string>

#include "rendezvous/wire/wire_codec.hpp"

namespace ddp::detail {

class SessionAuth {
 public:
  enum class Verdict {
    kServe,        // apply the request
    kRefuseHello,  // answer HELLO with kHelloRefused and `reason`, then close
    kRefuse,       // close without an answer
  };
  struct Decision {
    Verdict verdict = Verdict::kServe;
    std::string reason;  // for the refusal log and the HELLO "error" field; never the token
  };

  // `token`: the server's ("" = none); `exempt`: the peer's address needs no token.
  SessionAuth(const std::string& token, bool exempt);

  // Called before each request is applied.
  Decision check(const wire::Request& request);
  bool authenticated() const { return authenticated_; }

 private:
  const std::string& token_;
  bool authenticated_;
};

// The HELLO field that carries the token (redacted in every log line).
inline constexpr std::string_view kTokenField = "token";

}  // namespace ddp::detail
