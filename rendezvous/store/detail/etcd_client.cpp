#include "rendezvous/store/detail/etcd_client.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/http.hpp>

#include "rendezvous/base/error.hpp"
#include "rendezvous/store/detail/etcd_http_stream.hpp"

namespace ddp::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

std::string base64Encode(std::string_view bytes) {
  std::string out(beast::detail::base64::encoded_size(bytes.size()), '\0');
  out.resize(beast::detail::base64::encode(out.data(), bytes.data(), bytes.size()));
  return out;
}

std::string base64Decode(std::string_view text, std::string_view what) {
  // Beast's decoder stops silently at the first bad character, so validate here: length a
  // multiple of 4, '=' only as the last one or two characters.
  std::size_t padding = 0;
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') ++padding;
  bool valid = text.size() % 4 == 0;
  for (std::size_t i = 0; valid && i < text.size() - padding; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    valid = std::isalnum(c) || c == '+' || c == '/';
  }
  if (!valid) {
    throw ProtocolError("etcd sent invalid base64 for " + std::string(what) + ": '" +
                        std::string(text.substr(0, 64)) + "'");
  }
  std::string out(beast::detail::base64::decoded_size(text.size()), '\0');
  auto [written, read] = beast::detail::base64::decode(out.data(), text.data(), text.size());
  (void)read;
  out.resize(written);
  return out;
}

int64_t jsonInt(const json& object, const char* field, int64_t fallback) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return fallback;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string& text = it->get_ref<const std::string&>();
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc() && ptr == text.data() + text.size()) return value;
  }
  throw ProtocolError(std::string("etcd sent a non-integer '") + field + "': " + it->dump());
}

// One HTTP/1.1 keep-alive connection (plain or TLS: EtcdHttpStream).
class EtcdClient::Connection {
 public:
  Connection(const EtcdEndpoint& endpoint, std::shared_ptr<asio::ssl::context> tls)
      : stream_(endpoint, std::move(tls)) {}

  bool used() const { return used_; }

  beast::error_code exchange(const http::request<http::string_body>& request,
                             http::response<http::string_body>& response, Clock::time_point deadline) {
    beast::error_code ec;
    if (!connected_ && (ec = stream_.connect(deadline))) return ec;
    connected_ = true;
    if ((ec = stream_.write(request, deadline))) return ec;
    ec = stream_.read(response, deadline);
    used_ = true;
    return ec;
  }

 private:
  EtcdHttpStream stream_;
  bool connected_ = false;
  bool used_ = false;
};

EtcdClient::EtcdClient(std::vector<EtcdEndpoint> endpoints, std::chrono::milliseconds requestTimeout,
                       BackoffOptions backoff, std::shared_ptr<asio::ssl::context> tls)
    : endpoints_(std::move(endpoints)), requestTimeout_(requestTimeout), backoffOptions_(backoff),
      tls_(std::move(tls)) {
  if (endpoints_.empty()) throw ConfigError("etcd store: no endpoint given");
  for (const auto& endpoint : endpoints_) {
    if (endpoint.tls && !tls_) {
      throw ConfigError("etcd endpoint https://" + endpoint.text() +
                        " needs a CA file to check the server (--rdzv-conf tls_ca=)");
    }
  }
}

EtcdClient::~EtcdClient() = default;

std::string EtcdClient::endpoint() const { return currentEndpoint().text(); }

EtcdEndpoint EtcdClient::currentEndpoint() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return endpoints_[current_];
}

namespace {

constexpr std::chrono::milliseconds kMinFirstAttempt{200};

std::string describeStatus(const http::response<http::string_body>& response) {
  std::string body = response.body();
  try {
    json parsed = json::parse(body);
    if (parsed.contains("error")) body = parsed["error"].get<std::string>();
  } catch (const std::exception&) {
    // Not JSON (e.g. "404 page not found"): quote the raw body.
  }
  if (body.size() > 200) body = body.substr(0, 200) + "...";
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
  return "HTTP " + std::to_string(response.result_int()) + " " + body;
}

// Attempts listed in a final error, consecutive repeats folded: "a: refused (x3); b: timeout".
std::string foldAttempts(const std::vector<std::string>& attempts) {
  std::string out;
  for (std::size_t i = 0; i < attempts.size();) {
    std::size_t j = i;
    while (j < attempts.size() && attempts[j] == attempts[i]) ++j;
    if (!out.empty()) out += "; ";
    out += attempts[i];
    if (j - i > 1) out += " (x" + std::to_string(j - i) + ")";
    i = j;
  }
  return out;
}

}  // namespace

// One attempt on the current endpoint (a stale keep-alive connection gets one immediate retry on
// a fresh one). Returns the parsed body, or nullopt with `failure` set for a retryable failure.
// Caller holds mutex_.
std::optional<json> EtcdClient::attempt(http::request<http::string_body>& request,
                                        Clock::time_point deadline, std::string_view what,
                                        std::string& failure) {
  const EtcdEndpoint& endpoint = endpoints_[current_];
  request.set(http::field::host, endpoint.text());
  for (int fresh = 0; fresh < 2; ++fresh) {
    if (!connection_) connection_ = std::make_unique<Connection>(endpoint, tls_);
    bool reused = connection_->used();
    http::response<http::string_body> response;
    beast::error_code ec = connection_->exchange(request, response, deadline);
    if (ec) {
      connection_.reset();
      failure = ec == beast::error::timeout ? std::string("no answer in time") : ec.message();
      if (reused && ec != beast::error::timeout) continue;
      return std::nullopt;
    }
    if (!response.keep_alive()) connection_.reset();
    if (response.result_int() >= 500) {
      failure = describeStatus(response);
      return std::nullopt;
    }
    if (response.result_int() != 200) {
      throw ProtocolError("etcd " + std::string(what) + " on " + endpoint.text() + ": " +
                          describeStatus(response));
    }
    try {
      return json::parse(response.body());
    } catch (const json::parse_error& e) {
      throw ProtocolError("etcd " + std::string(what) + " on " + endpoint.text() +
                          ": answer is not JSON: " + e.what());
    }
  }
  return std::nullopt;
}

json EtcdClient::post(std::string_view path, const json& body, Clock::time_point deadline,
                      std::string_view what) {
  const Clock::time_point start = Clock::now();
  http::request<http::string_body> request{http::verb::post, std::string(path), 11};
  request.set(http::field::content_type, "application/json");
  request.keep_alive(true);
  request.body() = body.dump();
  request.prepare_payload();
  Backoff backoff(backoffOptions_);
  std::vector<std::string> attempts;
  do {
    std::string failure;
    std::lock_guard<std::mutex> lock(mutex_);
    // The first attempt always gets a short budget, even when called at the deadline.
    Clock::time_point attemptDeadline = std::min(deadline, Clock::now() + requestTimeout_);
    if (attempts.empty()) {
      attemptDeadline = std::max(attemptDeadline, Clock::now() + std::min(requestTimeout_, kMinFirstAttempt));
    }
    if (std::optional<json> reply = attempt(request, attemptDeadline, what, failure)) return *reply;
    attempts.push_back(endpoints_[current_].text() + ": " + failure);
    current_ = (current_ + 1) % endpoints_.size();
  } while (backoff.sleepBefore(deadline));
  auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  throw NetworkError("etcd " + std::string(what) + ": no endpoint answered within " +
                     std::to_string(spent.count()) + " ms; attempts: " + foldAttempts(attempts));
}

}  // namespace ddp::detail
