// loopbackStore(name): the options of a store server for a test — on 127.0.0.1, a port from the
// OS (port 0), the defaults otherwise; `name` is what its log lines call it.
#pragma once

#include <string>

#include "rendezvous/server/store_server.hpp"

namespace ddp::testing {

inline StoreServerOptions loopbackStore(const std::string& name) {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.name = name;
  return options;
}

}  // namespace ddp::testing
