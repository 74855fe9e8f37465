// EtcdStore: the Store seam over etcd 3.4's v3 JSON gateway (HTTP/1.1 via Boost.Beast), for
// `--rdzv-backend=etcd`. Every key lives under `prefix`; values are stored verbatim (any bytes).
//
// How each op maps to etcd (one HTTP round trip unless noted):
//   set, deleteKey, numKeys      put / deleterange / range count_only over the prefix
//   check, multiGet, multiSet    one txn of ranges (or puts): atomic and consistent (for up to
//                                128 keys, etcd's --max-txn-ops; larger batches take several)
//   compareSet                   txn comparing VALUE (or CREATE revision 0 for a missing key)
//   add, append                  read-modify-write: range, then a txn comparing mod_revision;
//                                retried when another client won the race
//   get, wait                    one txn of ranges; while keys are missing, a watch stream over
//                                the prefix from the txn's revision wakes the wait on a put of
//                                one of them (no polling); if the watch fails (etcd down), retry
//                                with a `pollMin` .. `pollMax` delay until the deadline
//   putWithLease, keepAlive      lease grant / keepalive / revoke for keys that vanish with
//                                their owner (heartbeats)
// Failover and restarts: requests go to one endpoint; a connection error, a request timeout or an
// HTTP 5xx makes the next request go to the next endpoint, after a Backoff delay, until the op's
// deadline (`retryTimeout` for ops that do not wait, the wait's own deadline otherwise). So a
// SIGKILLed etcd that comes back on the same data dir within the budget is invisible to callers.
// An add/append/compareSet whose reply was lost in such a crash is retried; so that it applies
// once, its txn also writes a request-id marker (`/ddp-request-ids/<client id>` = "<sequence>:
// <result>", on a lease of kMarkerTtl, outside any prefix a job uses) and its failure branch reads
// it back: a retry that finds its own sequence there returns the recorded result instead of
// applying again.
//
// TLS: with `https` set every endpoint speaks TLS, the server's certificate checked against
// tls.caFile and the endpoint's host name; tls.certFile / keyFile is the client certificate for an
// etcd started with --client-cert-auth.
//
// Errors: ConfigError (bad options, unusable TLS files), NetworkError (no endpoint answered within
// retryTimeout; lists every attempt with its endpoint), TimeoutError (get/wait: keys still
// missing at the deadline), ProtocolError (etcd rejected a request, or add() found a non-integer
// value). None is sticky: the store stays usable after any of them.
//
// Thread safety: safe to share between threads; requests are serialised on one connection.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/base/backoff.hpp"
#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/security/tls_options.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp {

namespace detail {
class EtcdClient;
}

struct EtcdStoreOptions {
  // etcd's client endpoints, ports 1-65535 (a ConfigError otherwise); several for failover (tried
  // in order, then round robin). ddprun's command line parses --rdzv-endpoint/--rdzv-conf once
  // (rendezvous/base/endpoint.hpp) and fills these options.
  std::vector<Endpoint> endpoints{{"127.0.0.1", kDefaultEtcdPort}};
  // Speak https (TLS, `tls` below) to every endpoint, else plain http. ddprun sets it exactly when
  // --rdzv-conf tls_ca is given.
  bool https = false;
  // Every key is stored as prefix + key; numKeys() counts the keys under it.
  std::string prefix = "/ddp/";
  // Budget of get/multiGet/wait(keys) without an explicit timeout.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // How long an op keeps retrying while no endpoint answers (etcd restarting).
  std::chrono::milliseconds retryTimeout{std::chrono::seconds(30)};
  // Budget of one HTTP request to one endpoint.
  std::chrono::milliseconds requestTimeout{std::chrono::seconds(5)};
  // Delays between retries of a failed request.
  BackoffOptions backoff{std::chrono::milliseconds(20), std::chrono::milliseconds(500), 2.0, 0.25};
  // Delays of get/wait between retries when the watch fails: pollMin doubling up to pollMax.
  std::chrono::milliseconds pollMin{std::chrono::milliseconds(5)};
  std::chrono::milliseconds pollMax{std::chrono::milliseconds(100)};
  // TLS to etcd when `https`; see above. `https` without tls.caFile is a ConfigError.
  TlsClientOptions tls;
};

class EtcdStore final : public Store {
 public:
  // Checks the options and that etcd answers (one range request). Blocks up to retryTimeout.
  // Throws ConfigError, NetworkError.
  explicit EtcdStore(EtcdStoreOptions options);
  ~EtcdStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  int64_t numKeys() override;
  std::vector<std::string> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys,
                const std::vector<std::string>& values) override;
  void append(const std::string& key, const std::string& value) override;
  std::chrono::milliseconds timeout() const override;
  void setTimeout(std::chrono::milliseconds timeout) override;

  // Grants a lease of `ttl` (etcd may round it up to its minimum) and returns its id.
  // Blocks up to retryTimeout. Throws NetworkError, ProtocolError.
  int64_t grantLease(std::chrono::seconds ttl);
  // Sets `key` attached to lease `leaseId`: the key disappears when the lease expires or is
  // revoked. Throws NetworkError, ProtocolError (unknown or expired lease).
  void setWithLease(const std::string& key, const std::string& value, int64_t leaseId);
  // grantLease(ttl) + setWithLease(); returns the lease id for keepAlive()/revokeLease().
  int64_t putWithLease(const std::string& key, const std::string& value, std::chrono::seconds ttl);
  // Refreshes the lease. Returns the TTL granted again in seconds, or 0 when the lease has already
  // expired (its keys are gone: re-put them with a new lease). Throws NetworkError.
  int64_t keepAlive(int64_t leaseId);
  // Revokes the lease and deletes its keys; an unknown lease is ignored. Throws NetworkError.
  void revokeLease(int64_t leaseId);

  // How long a request-id marker outlives its last write (far beyond any retry).
  static constexpr std::chrono::seconds kMarkerTtl{600};

  // "host:port" of the endpoint in use, for messages.
  std::string endpoint() const;
  const std::string& prefix() const { return options_.prefix; }

 private:
  using Clock = std::chrono::steady_clock;

  std::string fullKey(const std::string& key) const { return options_.prefix + key; }
  Clock::time_point retryDeadline() const { return Clock::now() + options_.retryTimeout; }
  struct Snapshot {
    // nullopt for a missing key ("" for present ones when countOnly).
    std::vector<std::optional<std::string>> values;
    // The store revision the values were read at.
    int64_t revision = 0;
  };
  // Values of `keys` in one txn.
  Snapshot readAll(const std::vector<std::string>& keys, Clock::time_point deadline, bool countOnly);
  // readAll until every key exists, sleeping on a watch in between; TimeoutError at `deadline`.
  std::vector<std::string> poll(const std::vector<std::string>& keys, Clock::time_point deadline,
                                bool countOnly);
  // Read-modify-write of one key: `update(current or nullopt)` gives the new value.
  template <typename Update>
  std::string modify(const std::string& key, const char* opName, Update update);

  // Request ids: the next "<sequence>:" tag, and the marker's lease (granted again after half
  // of kMarkerTtl). Blocks up to retryTimeout for a grant. Throws NetworkError, ProtocolError.
  std::string nextRequestTag() { return std::to_string(++requests_) + ":"; }
  int64_t markerLease();

  EtcdStoreOptions options_;
  std::unique_ptr<detail::EtcdClient> client_;
  std::atomic<int64_t> timeoutMs_;
  const std::string marker_;  // this store's request-id marker key
  std::atomic<uint64_t> requests_{0};
  std::mutex leaseMutex_;
  // Guarded by leaseMutex_: the marker's lease and when it was granted.
  int64_t markerLease_ = 0;
  std::chrono::steady_clock::time_point markerLeaseAt_;
};

}  // namespace ddp
