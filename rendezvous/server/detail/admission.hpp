// Admission: who a StoreServer serves, decided before a byte of a connection is read.
//
// An accepted connection is checked against
//   1. options.allow: the peer's address must be in it;
//   2. options.sameUserLocalPeers: a peer that is a process of this machine (looked up with
//      localPeerOwner(), peer_owner.hpp) must belong to this process's user or to root — on one
//      machine every user's process connects from 127.0.0.1, so addresses cannot tell them apart;
//   3. on a TLS server (options.tls): the connection must start a TLS handshake (first byte 0x16,
//      a TLS handshake record; TCPStore requests start with an opcode 0..18 or ddprun's F0..F2)
//      and complete it within kTlsHandshakeBudget; a plain connection is served only from
//      options.allowUnauthenticated (torch clients, which cannot speak TLS).
// A refused connection is closed at once and counted in core.refusals (a rate-limited warning
// naming the peer and the reason). An admitted one becomes a StoreSession. The token, if any, is
// checked per request by the session (session_auth.hpp).
//
// Thread safety: the server's io_context thread only.
#pragma once

#include <chrono>
#include <memory>

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
