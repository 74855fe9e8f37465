// Store: the key-value seam that rendezvous, workers and tests talk through.
//
// Implementations: TcpStoreClient (a connection to ddprund, the embedded server or any c10d
// TCPStore), InMemoryStore (one process, for tests and the embedded rendezvous), PrefixStore (a
// namespace over another Store) and, for the etcd backend, EtcdStore. Keys and values are arbitrary
// bytes held in std::string.
//
// Semantics follow c10d's TCPStore (docs/ddprund.md): add() on a
// missing key treats it as 0 and stores decimal ASCII; compareSet() returns the value after the
// operation (desired on success, the current value on mismatch, `expected` when the key is missing
// and expected is non-empty); get() and multiGet() block until every key exists.
//
// Thread safety: implementations say so in their own header. Store objects are not copyable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

class Store {
 public:
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  virtual ~Store() = default;

  // Overwrites `key`. Does not block on other clients. Throws NetworkError.
  virtual void set(const std::string& key, const std::string& value) = 0;

  // Blocks until `key` exists (up to timeout()), then returns its value.
  // Throws TimeoutError naming the key, endpoint and budget; NetworkError.
  virtual std::string get(const std::string& key) = 0;

  // Atomically adds `delta` to the decimal integer stored at `key` (missing = 0) and returns the
  // new value. Throws NetworkError (a non-numeric value closes a TCP connection: NetworkError).
  virtual int64_t add(const std::string& key, int64_t delta) = 0;

  // Atomically: if the key holds `expected` (or is missing and expected is empty) store `desired`.
  // Returns the value after the operation (see header comment). Throws NetworkError.
  virtual std::string compareSet(const std::string& key, const std::string& expected,
                                 const std::string& desired) = 0;

  // Blocks until every key exists or `timeout` passes (TimeoutError naming the missing keys).
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }

  // True iff every key exists now. Does not block.
  virtual bool check(const std::vector<std::string>& keys) = 0;

  // Removes `key`; true if it existed. Does not wake waiters.
  virtual bool deleteKey(const std::string& key) = 0;

  // Number of keys in the whole store (not only under a prefix, as in c10d).
  virtual int64_t numKeys() = 0;

  // Blocks until every key exists (up to timeout()), then returns the values in order.
  virtual std::vector<std::string> multiGet(const std::vector<std::string>& keys) = 0;

  // Sets each keys[i] = values[i] in order, atomically with respect to other clients' requests.
  // Throws std::invalid_argument when the sizes differ.
  virtual void multiSet(const std::vector<std::string>& keys,
                        const std::vector<std::string>& values) = 0;

  // Appends `value` to the key's value (creating it). Wakes waiters.
  virtual void append(const std::string& key, const std::string& value) = 0;

  // The budget of blocking calls that take no explicit timeout.
  virtual std::chrono::milliseconds timeout() const = 0;
  virtual void setTimeout(std::chrono::milliseconds timeout) = 0;
};

}  // namespace ddp
