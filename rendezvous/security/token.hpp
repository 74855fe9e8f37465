// Shared-secret tokens of the rendezvous: ddprund --token-file, --rdzv-conf token_file /
// DDP_RDZV_TOKEN_FILE. An agent sends its token in ddprun's HELLO (wire_codec.hpp); a server that
// has one refuses every other request of a connection that has not presented it.
//
// Tokens are never logged. Without TLS a token crosses the network in clear text: it keeps out
// other users of the machines and stray clients, not someone who can read the traffic.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace ddp {

// Longest token accepted (it travels as a HELLO field, bounded by the server's key limit).
inline constexpr std::size_t kMaxTokenBytes = 4096;

// The token in `path`: the file's first line without surrounding whitespace. Throws ConfigError
// (naming the path, never the content) when the file cannot be read, the token is empty or longer
// than kMaxTokenBytes. Logs a warning when other users may read the file.
std::string readTokenFile(const std::string& path);

// Compares two tokens in time independent of where they differ (SHA-256 of each, compared with
// CRYPTO_memcmp), so a client cannot learn a token byte by byte from response times.
bool tokensEqual(std::string_view presented, std::string_view expected);

}  // namespace ddp
