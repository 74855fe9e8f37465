// ddprund's status pages over real HTTP: a job written into a real StoreServer by a real client
// shows up in /status, /metrics and the page; bad requests get clear answers.
#include <catch2/catch.hpp>

#include <future>
#include <mutex>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "rendezvous/algorithm/detail/node_exclusion.hpp"
#include "rendezvous/algorithm/detail/rendezvous_assign.hpp"
#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/base/fd_limit.hpp"
#include "rendezvous/http/http_ddprund.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;

struct Reply {
  unsigned status = 0;
  std::string body;
  std::string contentType;
};

Reply request(uint16_t port, http::verb verb, const std::string& target) {
  asio::io_context io;
  boost::beast::tcp_stream stream(io);
  stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  http::request<http::empty_body> req(verb, target, 11);
  req.set(http::field::host, "127.0.0.1");
  http::write(stream, req);
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.skip(verb == http::verb::head);  // a HEAD reply announces a body it does not send
  http::read(stream, buffer, parser);
  auto res = parser.release();
  return {res.result_int(), res.body(), std::string(res.base()[http::field::content_type])};
}

// A StoreServer on its own io thread, as ddprund runs it, with its status pages.
struct Daemon {
  asio::io_context io{1};
  ddp::StoreServer store{io, [] {
                           ddp::StoreServerOptions o;
                           o.host = "127.0.0.1";
                           return o;
                         }()};
  std::thread thread;
  std::unique_ptr<ddp::DdprundStatus> status;
  Daemon() {
    store.start();
    thread = std::thread([this] { io.run(); });
    ddp::HttpServerOptions http;
    status = std::make_unique<ddp::DdprundStatus>(store, http);
  }
  ~Daemon() {
    status.reset();
    store.stop();
    thread.join();
  }
};

ddp::detail::JoinRecord member(int64_t slot, const std::string& host, int pid) {
  ddp::detail::JoinRecord r;
  r.slot = slot;
  r.node.host = host;
  r.node.addr = "10.0.0." + std::to_string(slot);
  r.node.pid = pid;
  r.node.localWorldSize = 2;
  return r;
}

// Writes what the rendezvous and two agents would: a formed round 3 of two nodes.
void writeJob(ddp::Store& store) {
  const ddp::detail::RendezvousKeys keys("job7", 0);
  store.set(ddp::detail::RendezvousKeys::incarnationOf("job7"), "0");
  store.set(keys.formed(), "3");
  store.set(keys.restarts(), "1");
  ddp::detail::RoundMembership m;
  m.generation = 3;
  m.restartsUsed = 1;
  m.members = {member(1, "n1", 101), member(2, "n2", 202)};
  store.set(keys.roster(3), ddp::detail::encodeMembership(m));
  store.add(keys.heartbeat(3, 0), 1);
  store.add(keys.heartbeat(3, 1), 1);
  store.set(keys.status(3, 1), R"({"v":1,"max_restarts":4,"workers":[{"rank":2,"state":"running"},)"
                               R"({"rank":3,"state":"failed"}]})");
  store.set(keys.metrics(), "{\"gen\":3,\"step\":10,\"loss\":0.5,\"samples_per_s\":100}\n"
                            "{\"gen\":3,\"step\":20,\"loss\":0.25,\"samples_per_s\":120}\n");
  store.append(keys.failures(), ddp::detail::frameRecord(R"({"generation":2,"node_rank":1})"));
  store.set(keys.history(), R"({"generation":2,"end":"restart","root_cause":"rank 3 exited"})" "\n");
  // SET has no reply: a round trip on the same connection makes sure the server applied them all.
  REQUIRE(store.check({keys.history()}));
}

}  // namespace

TEST_CASE("ddprund's /status shows a job's nodes, heartbeats, records and points", "[unit]") {
  Daemon d;
  ddp::TcpStoreClientOptions o;
  o.endpoint.port = d.store.port();
  ddp::TcpStoreClient client(o);
  writeJob(client);
  const Reply r = request(d.status->port(), http::verb::get, "/status");
  REQUIRE(r.status == 200);
  CHECK(r.contentType == "application/json");
  const auto status = nlohmann::json::parse(r.body);
  REQUIRE(status["jobs"].size() == 1);
  const auto& job = status["jobs"][0];
  CHECK(job["run_id"] == "job7");
  CHECK(job["state"] == "running");
  CHECK(job["generation"] == 3);
  CHECK(job["restarts_used"] == 1);
  CHECK(job["max_restarts"] == 4);
  REQUIRE(job["nodes"].size() == 2);
  CHECK(job["nodes"][1]["host"] == "n2");
  CHECK(job["nodes"][1]["agent_pid"] == 202);
  CHECK(job["nodes"][0]["heartbeats"] == 1);
  // The io thread saw each heartbeat's ADD a moment ago.
  REQUIRE(job["nodes"][0]["heartbeat_age_s"].is_number());
  CHECK(job["nodes"][0]["heartbeat_age_s"].get<double>() < 30);
  CHECK(job["nodes"][1]["status"]["workers"].size() == 2);
  CHECK(job["points"].size() == 2);
  CHECK(job["failures"].size() == 1);
  CHECK(job["history"][0]["root_cause"] == "rank 3 exited");
  CHECK(status["server"]["name"] == "ddprund");
}

TEST_CASE("ddprund's /metrics counts the store's requests and shows the job", "[unit]") {
  Daemon d;
  ddp::TcpStoreClientOptions o;
  o.endpoint.port = d.store.port();
  ddp::TcpStoreClient client(o);
  writeJob(client);
  const Reply r = request(d.status->port(), http::verb::get, "/metrics");
  REQUIRE(r.status == 200);
  CHECK(r.contentType.starts_with("text/plain; version=0.0.4"));
  const std::string& m = r.body;
  CHECK(m.find("ddprund_requests_total{op=\"add\"} 2\n") != std::string::npos);
  CHECK(m.find("ddprund_requests_total{op=\"set\"} 7\n") != std::string::npos);
  CHECK(m.find("ddprund_requests_total{op=\"append\"} 1\n") != std::string::npos);
  CHECK(m.find("ddprund_connections 1\n") != std::string::npos);
  // Every request applied is in the request-time histogram.
  uint64_t requests = 0;
  for (auto at = m.find("\nddprund_requests_total{"); at != std::string::npos;
       at = m.find("\nddprund_requests_total{", at + 1)) {
    requests += std::stoull(m.substr(m.find("} ", at) + 2));
  }
  CHECK(requests >= 10);
  CHECK(m.find("ddprund_request_duration_seconds_count " + std::to_string(requests) + "\n") !=
        std::string::npos);
  CHECK(m.find("ddprun_job_nodes{job=\"job7\"} 2\n") != std::string::npos);
  CHECK(m.find("ddprun_job_loss{job=\"job7\"} 0.25\n") != std::string::npos);
  CHECK(m.find("ddprun_job_workers{job=\"job7\",state=\"failed\"} 1\n") != std::string::npos);
  CHECK(m.find("ddprun_node_heartbeat_age_seconds{job=\"job7\",node_rank=\"1\",host=\"n2\"}") !=
        std::string::npos);
}

TEST_CASE("/status and /metrics show a job's node exclusions, out and back", "[unit]") {
  Daemon d;
  ddp::TcpStoreClientOptions o;
  o.endpoint.port = d.store.port();
  ddp::TcpStoreClient client(o);
  writeJob(client);
  const ddp::detail::RendezvousKeys keys("job7", 0);
  ddp::NodeExclusion out;
  out.host = "n3";
  out.pid = 303;
  out.generation = 2;
  out.why = "3 failure(s) of this node's workers within 600 s";
  ddp::NodeExclusion back = out;
  back.host = "n4";
  back.returnedAt = 3;
  client.set(keys.exclusions(), ddp::detail::encodeExclusion(back) + "\n" +
                                    ddp::detail::encodeExclusion(out) + "\n");
  client.add(keys.exclusionCount(), 5);  // older ones fell out of the list
  REQUIRE(client.check({keys.exclusions()}));
  const auto status = nlohmann::json::parse(request(d.status->port(), http::verb::get, "/status").body);
  const auto& job = status["jobs"][0];
  REQUIRE(job["exclusions"].size() == 2);
  CHECK(job["exclusions"][1]["host"] == "n3");
  CHECK(job["exclusions"][1]["returned_at"] == -1);
  CHECK(job["exclusion_count"] == 5);
  CHECK(job["nodes_excluded"] == 1);
  const std::string m = request(d.status->port(), http::verb::get, "/metrics").body;
  CHECK(m.find("ddprun_job_nodes_excluded{job=\"job7\"} 1\n") != std::string::npos);
  CHECK(m.find("ddprun_job_node_exclusions{job=\"job7\"} 5\n") != std::string::npos);
}

TEST_CASE("the page embeds the status; unknown paths and methods are refused", "[unit]") {
  Daemon d;
  ddp::TcpStoreClientOptions o;
  o.endpoint.port = d.store.port();
  ddp::TcpStoreClient client(o);
  writeJob(client);
  const Reply page = request(d.status->port(), http::verb::get, "/");
  REQUIRE(page.status == 200);
  CHECK(page.contentType == "text/html; charset=utf-8");
  CHECK(page.body.find("\"run_id\":\"job7\"") != std::string::npos);
  CHECK(page.body.find("/*DDP_STATUS_JSON*/") == std::string::npos);
  CHECK(request(d.status->port(), http::verb::get, "/nope").status == 404);
  CHECK(request(d.status->port(), http::verb::post, "/status").status == 405);
  CHECK(request(d.status->port(), http::verb::head, "/metrics").status == 200);
  CHECK(request(d.status->port(), http::verb::get, "/healthz").body == "ok\n");
}

TEST_CASE("a value cannot close the page's script element", "[unit]") {
  Daemon d;
  ddp::TcpStoreClientOptions o;
  o.endpoint.port = d.store.port();
  ddp::TcpStoreClient client(o);
  client.set(ddp::detail::RendezvousKeys::incarnationOf("</script><b>x"), "0");
  REQUIRE(client.check({ddp::detail::RendezvousKeys::incarnationOf("</script><b>x")}));
  const Reply page = request(d.status->port(), http::verb::get, "/");
  REQUIRE(page.status == 200);
  CHECK(page.body.find("</script><b>") == std::string::npos);
  CHECK(page.body.find(R"(<\/script><b>x)") != std::string::npos);
}

// Sends raw bytes and returns everything the server answers before it closes the connection.
static std::string rawExchange(uint16_t port, const std::string& bytes) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  boost::system::error_code ec;
  asio::write(socket, asio::buffer(bytes), ec);
  std::string answer;
  char buf[4096];
  while (true) {
    const std::size_t n = socket.read_some(asio::buffer(buf), ec);
    if (ec) break;
    answer.append(buf, n);
  }
  return answer;
}

TEST_CASE("bad HTTP requests get one line and a closed connection; the store serves on",
          "[unit]") {
  Daemon d;
  const std::string huge = "GET / HTTP/1.1\r\nX: " + std::string(64 * 1024, 'a') + "\r\n\r\n";
  const std::string tooBig = rawExchange(d.status->port(), huge);
  CHECK(tooBig.starts_with("HTTP/1.1 431 "));
  CHECK(tooBig.find("bad request: header limit exceeded") != std::string::npos);
  const std::string garbage = rawExchange(d.status->port(), "\x01\x02 nonsense\r\n\r\n");
  CHECK(garbage.starts_with("HTTP/1.1 400 "));
  ddp::TcpStoreClientOptions o;
  o.endpoint.port = d.store.port();
  ddp::TcpStoreClient client(o);
  client.set("k", "v");
  CHECK(client.get("k") == "v");
  CHECK(request(d.status->port(), http::verb::get, "/healthz").status == 200);
}

TEST_CASE("the status pages accept nobody while a store server has given up its spare descriptor",
          "[unit]") {
  // A store out of descriptors gives up its spare under this lock to tell a waiting client why;
  // were the status pages to accept meanwhile, they would take that descriptor for good.
  Daemon d;
  std::future<Reply> reply;
  {
    const std::lock_guard<std::mutex> lock(ddp::spareDescriptorMutex());
    reply = std::async(std::launch::async,
                       [&] { return request(d.status->port(), http::verb::get, "/healthz"); });
    CHECK(reply.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  }
  CHECK(reply.get().status == 200);  // served once the lock is free
}

TEST_CASE("a snapshot copies the rendezvous keys only, with heartbeat times", "[unit]") {
  Daemon d;
  ddp::TcpStoreClientOptions o;
  o.endpoint.port = d.store.port();
  ddp::TcpStoreClient client(o);
  for (int i = 0; i < 1000; ++i) client.set("torch/key" + std::to_string(i), "v");
  const ddp::detail::RendezvousKeys keys("job", 0);
  client.add(keys.heartbeat(0, 0), 1);
  client.add(keys.heartbeat(0, 1), 1);
  client.set(keys.round(), "0");
  client.compareSet(keys.formed(), "", "0");
  client.append(keys.failures(), "x");
  client.deleteKey(keys.heartbeat(0, 1));
  std::promise<ddp::StoreSnapshot> taken;
  d.store.snapshot(1 << 20, [&](ddp::StoreSnapshot s) { taken.set_value(std::move(s)); });
  const ddp::StoreSnapshot s = taken.get_future().get();
  CHECK(s.keys == 1004);
  std::vector<std::string> names;
  for (const auto& [key, value] : s.entries) names.push_back(key);
  CHECK(names == std::vector<std::string>{keys.failures(), keys.formed(), keys.heartbeat(0, 0),
                                          keys.round()});
  CHECK(s.heartbeatTimes.size() == 1);
  CHECK(s.heartbeatTimes.count(keys.heartbeat(0, 0)) == 1);
  CHECK_FALSE(s.truncated);
  CHECK(s.stats.requests[static_cast<std::size_t>(ddp::wire::Op::kSet)] == 1001);
}
