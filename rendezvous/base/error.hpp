// The one error hierarchy of ddprun's libraries.
//
// Every library API throws only types derived from ddp::Error. Each public header says which it may
// throw and what the caller may do afterwards. Binaries map them to documented exit codes and one
// readable line (no stack dumps to users).
//
// Thread safety: plain value types, safe to copy between threads.
#pragma once

#include <stdexcept>
#include <string>

namespace ddp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad flags, config files, environment or data files. Not retryable: fix the input.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A socket could not be opened, connected, read or written. The connection is in an unknown state;
// drop the object that threw and create a new one.
class NetworkError : public Error {
 public:
  using Error::Error;
};

// The server is alive but cannot serve this client now: it ran out of file descriptors or is at
// its connection limit, and said so before closing the connection (a ddprund or StoreServer
// "busy" notice, wire_codec.hpp). The message carries the server's reason (which limit). Retry
// later; the server's operator raises the limit.
class OverloadedError : public NetworkError {
 public:
  using NetworkError::NetworkError;
};

// A deadline passed. The message names who waited, for what, and the budget. The object that threw
// stays usable unless its header says otherwise.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// The peer sent bytes that break the wire protocol. The connection is closed; recreate it.
class ProtocolError : public Error {
 public:
  using Error::Error;
};

// A collective failed or timed out. Assume the communicator is in an unknown state: the worker
// should exit non-zero so its agent restarts the group.
class CommError : public Error {
 public:
  using Error::Error;
};

}  // namespace ddp
