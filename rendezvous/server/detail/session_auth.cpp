#include "rendezvous/server/detail/session_auth.hpp"

#include <optional>

#include "rendezvous/security/token.hpp"

namespace ddp::detail {

using wire::Op;

namespace {

std::optional<std::string_view> tokenField(const wire::Request& hello) {
  for (std::size_t i = 0; i + 1 < hello.keys.size(); i += 2) {
    if (hello.keys[i] == kTokenField) return hello.keys[i + 1];
  }
  return std::nullopt;
}

}  // namespace

SessionAuth::SessionAuth(const std::string& token, bool exempt)
    : token_(token), authenticated_(token.empty() || exempt) {}

SessionAuth::Decision SessionAuth::check(const wire::Request& request) {
  if (token_.empty()) return {};
  if (request.op == Op::kHello) {
    const auto presented = tokenField(request);
    if (presented && tokensEqual(*presented, token_)) {
      authenticated_ = true;
      return {};
    }
    // A wrong token is refused even from an exempt address: its sender expects to be checked.
    if (presented) return {Verdict::kRefuseHello, "wrong token in HELLO"};
    if (authenticated_) return {};
    return {Verdict::kRefuseHello, "HELLO without a token (this server requires one)"};
  }
  if (authenticated_ || request.op == Op::kValidate || request.op == Op::kPing) return {};
  return {Verdict::kRefuse, std::string(wire::opName(request.op)) +
                                " before authenticating (this server requires ddprun's HELLO with "
                                "its token from this address)"};
}

}  // namespace ddp::detail
