// --rdzv-conf: every key ddprun knows, parsed once into typed fields with one duration grammar.
//
// Keys (torchrun's names; durations are seconds with an optional fraction, or "250ms"):
//   join_timeout, timeout          RendezvousSettings::joinTimeout ("timeout", read by torchrun's
//                                  static and legacy etcd handlers, counts when join_timeout is absent)
//   last_call_timeout, close_timeout, keep_alive_interval, keep_alive_max_attempt
//                                  the RendezvousSettings fields of the same names
//   heartbeat_timeout              how long a node may stay silent before it is declared lost;
//                                  must exceed keep_alive_interval; default interval x attempts
//   read_timeout, is_host, exit_barrier_timeout, protocol, etcd_prefix, request_timeout,
//   retry_timeout, token_file, tls_ca, tls_cert, tls_key, store_allow
//                                  RdzvConf (launch_config.hpp); torchrun's TLS names ca_cert,
//                                  cacert, ssl_cert, cert, ssl_cert_key, key are aliases of tls_*
//                                  (the tls_* key wins when both are given). tls_ca turns TLS on
//                                  (protocol=https); protocol=https without it is an error
//   store_type=tcp, use_libuv, rank accepted for torchrun command lines; no effect (store_type=file
//                                  is an error: not supported)
// Any other key is an error that lists the known ones.
//
// Thread safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "launcher/config/launch_config.hpp"

namespace ddp::detail {

// The keys a user may set, in --help order.
const std::vector<std::string>& rdzvConfKeys();

// The rendezvous defaults for a backend: RendezvousSettings' own, except join_timeout 900 s for
// static and legacy etcd (the timeout torchrun's launcher injects for the handlers that read it).
RendezvousSettings defaultRendezvousSettings(RdzvBackend backend);

// Applies `conf` (parseRdzvConf's map) over the defaults already in `settings` and `out`, then
// resolves heartbeatTimeout (given: must exceed keepAliveInterval; else keepAliveInterval x
// keepAliveMaxAttempt, which must too), the TLS keys (above) and out.connectTimeout =
// min(readTimeout, joinTimeout). The token file is not read here (the agent reads it when it
// opens the store).
// Throws ConfigError naming the key, its value and what was expected.
void applyRdzvConf(const std::map<std::string, std::string>& conf, RendezvousSettings& settings,
                   RdzvConf& out);

}  // namespace ddp::detail
