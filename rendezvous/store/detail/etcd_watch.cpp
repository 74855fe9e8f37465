#include "rendezvous/store/detail/etcd_watch.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "rendezvous/base/error.hpp"
#include "rendezvous/store/detail/etcd_http_stream.hpp"

namespace ddp::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

class EtcdWatch::Stream {
 public:
  Stream(const EtcdEndpoint& endpoint, std::shared_ptr<asio::ssl::context> tls)
      : endpoint_(endpoint), stream_(endpoint, std::move(tls)) {
    parser_.body_limit(boost::none);  // the stream lives as long as the wait
  }

  void open(const json& request, Clock::time_point deadline) {
    beast::error_code ec = stream_.connect(deadline);
    if (ec) fail("connect", ec);
    http::request<http::string_body> post{http::verb::post, "/v3/watch", 11};
    post.set(http::field::host, endpoint_.text());
    post.set(http::field::content_type, "application/json");
    post.body() = request.dump();
    post.prepare_payload();
    if ((ec = stream_.write(post, deadline))) fail("send", ec);
    if ((ec = stream_.readHeader(parser_, deadline))) fail("read header", ec);
    if (parser_.get().result_int() != 200) {
      throw NetworkError("etcd watch on " + endpoint_.text() + ": HTTP " +
                         std::to_string(parser_.get().result_int()));
    }
  }

  // The next newline-terminated JSON message, or nullopt at `deadline`.
  std::optional<json> next(Clock::time_point deadline) {
    while (true) {
      std::string& body = parser_.get().body();
      std::size_t newline = body.find('\n', offset_);
      if (newline != std::string::npos) {
        std::string line = body.substr(offset_, newline - offset_);
        offset_ = newline + 1;
        if (offset_ > (1u << 16)) {  // drop what was consumed; the body reader appends at size()
          body.erase(0, offset_);
          offset_ = 0;
        }
        if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
        try {
          return json::parse(line);
        } catch (const json::parse_error& e) {
          throw NetworkError("etcd watch on " + endpoint_.text() + ": bad message: " + e.what());
        }
      }
      if (parser_.is_done()) throw NetworkError("etcd watch on " + endpoint_.text() + ": stream ended");
      const beast::error_code ec = stream_.readSome(parser_, deadline);
      if (ec == beast::error::timeout) return std::nullopt;
      if (ec) fail("read", ec);
    }
  }

 private:
  [[noreturn]] void fail(const char* step, const beast::error_code& ec) {
    std::string why = ec == beast::error::timeout ? std::string("deadline passed") : ec.message();
    throw NetworkError("etcd watch on " + endpoint_.text() + ": " + step + ": " + why);
  }

  EtcdEndpoint endpoint_;
  EtcdHttpStream stream_;
  http::response_parser<http::string_body> parser_;
  std::size_t offset_ = 0;
};

namespace {

// Throws NetworkError for an error message or a canceled watch.
const json& resultOf(const json& message, const std::string& endpoint) {
  if (message.contains("error")) {
    throw NetworkError("etcd watch on " + endpoint + ": " + message["error"].dump());
  }
  const json& result = message.contains("result") ? message["result"] : message;
  if (result.value("canceled", false)) {
    throw NetworkError("etcd watch on " + endpoint + " canceled: " + result.dump());
  }
  return result;
}

}  // namespace

EtcdWatch::EtcdWatch(const EtcdEndpoint& endpoint, std::shared_ptr<asio::ssl::context> tls,
                     const std::string& key, const std::string& rangeEnd, int64_t startRevision,
                     Clock::time_point deadline)
    : stream_(std::make_unique<Stream>(endpoint, std::move(tls))) {
  json create{{"key", base64Encode(key)}, {"range_end", base64Encode(rangeEnd)},
              {"start_revision", std::to_string(startRevision)}};
  stream_->open(json{{"create_request", create}}, deadline);
  while (true) {
    std::optional<json> message = stream_->next(deadline);
    if (!message) throw NetworkError("etcd watch on " + endpoint.text() + ": not confirmed in time");
    if (resultOf(*message, endpoint.text()).value("created", false)) return;
  }
}

EtcdWatch::~EtcdWatch() = default;

bool EtcdWatch::waitForAny(const std::set<std::string>& keys, Clock::time_point deadline) {
  while (std::optional<json> message = stream_->next(deadline)) {
    const json& result = resultOf(*message, "the watched endpoint");
    auto events = result.find("events");
    if (events == result.end() || !events->is_array()) continue;
    for (const json& event : *events) {
      auto kv = event.find("kv");
      if (kv == event.end()) continue;
      if (keys.count(base64Decode(kv->value("key", ""), "a watched key")) > 0) return true;
    }
  }
  return false;
}

}  // namespace ddp::detail
