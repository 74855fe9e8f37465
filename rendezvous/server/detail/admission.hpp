// Admission: who a StoreServer serves, decided before a byte of a connection is read.
//
// An accepted connection is checked against
//   1. options.allow: the peer's address must be in it;
//   2. options.otherLocalUsers (when not kServe, or with a token): a peer that is a process of
//      this machine (core.peerOwners, peer_owner.hpp) and runs as another user than this
//      process's, root's and options.trustedUids' is refused (kRefuse, or kAuthenticate without a
//      token) or must present the token whatever its address (kAuthenticate) — on one machine
//      every user's process connects from 127.0.0.1, so addresses cannot tell them apart. When
//      the kernel cannot say who owns a local connection, it counts as another user's unless
//      options.trustUnknownLocalOwner (never fail open); out of descriptors, the client gets a
//      busy notice;
//   3. on a TLS server (options.tls): the connection must start a TLS handshake (first byte 0x16,
//      a TLS handshake record; TCPStore requests start with an opcode 0..18 or ddprun's F0..F2)
//      and complete it within kTlsHandshakeBudget; a plain connection is served only when it
//      needs no token (torch clients, which cannot speak TLS).
// A refused connection is closed at once and counted in core.refusals (a rate-limited warning
// naming the peer and the reason). An admitted one becomes a StoreSession, told who its peer is
// (PeerIdentity, session_protocol.hpp). The token, if any, is checked per request by the session (session_auth.hpp).
//
// Thread safety: the server's io_context thread only.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>

#include "rendezvous/server/detail/store_session.hpp"

namespace ddp::detail {

// How long a TLS server waits for a new connection's first byte and TLS handshake.
inline constexpr std::chrono::seconds kTlsHandshakeBudget{10};

// Checks `socket` and starts a session for it, or refuses it. Non-blocking.
void admit(boost::asio::ip::tcp::socket socket, const std::shared_ptr<ServerCore>& core);

// Closes every connection still in its TLS handshake (the server stops).
void cancelAdmissions(ServerCore& core);

}  // namespace ddp::detail
