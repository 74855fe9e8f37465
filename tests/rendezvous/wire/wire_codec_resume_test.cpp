// RequestDecoder on requests that arrive in pieces: parsing resumes where the last call stopped
// (a key list costs O(its size), not O(size^2 / read size)), also when the caller's buffer moved.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "rendezvous/wire/wire_codec.hpp"

using namespace ddp;
using namespace ddp::wire;

namespace {

std::string keyListRequest(Op op, const std::vector<std::string>& keys) {
  std::vector<std::string_view> views(keys.begin(), keys.end());
  Request r;
  r.op = op;
  r.keys = views;
  std::string out;
  encodeRequest(out, Dialect::kV1a, r);
  return out;
}

}  // namespace

TEST_CASE("a key list fed in 16 KiB reads resumes where it stopped", "[wire][bounds]") {
  std::vector<std::string> keys;
  for (int i = 0; i < 131072; ++i) keys.push_back("/key/" + std::to_string(i));
  const std::string request = keyListRequest(Op::kWait, keys);
  RequestDecoder decoder;
  std::size_t fed = 0;
  std::size_t resumes = 0;
  while (fed < request.size()) {
    fed = std::min(request.size(), fed + 16 * 1024);
    // A fresh copy each time: the caller's buffer moves (grows) between reads.
    const std::string buffer = request.substr(0, fed);
    auto result = decoder.decode(buffer);
    if (fed < request.size()) {
      REQUIRE(std::holds_alternative<NeedMore>(result));
      // Everything but the last, incomplete key is parsed and will not be parsed again.
      CHECK(decoder.resumeOffset() + 32 > fed);
      ++resumes;
      continue;
    }
    REQUIRE(std::holds_alternative<Request>(result));
    const auto& r = std::get<Request>(result);
    CHECK(r.size == request.size());
    REQUIRE(r.keys.size() == keys.size());
    CHECK(r.keys.front() == keys.front());
    CHECK(r.keys[65536] == keys[65536]);
    CHECK(r.keys.back() == keys.back());
  }
  CHECK(resumes > 100);
  CHECK(decoder.resumeOffset() == 0);  // nothing pending after the complete request
}

TEST_CASE("a resumed MULTI_SET keeps keys and values paired", "[wire][bounds]") {
  const std::vector<std::string> pairs{"/a", "1", "/bb", std::string(5000, 'v'), "/c", ""};
  std::vector<std::string_view> views(pairs.begin(), pairs.end());
  Request r;
  r.op = Op::kMultiSet;
  r.keys = views;
  std::string request;
  encodeRequest(request, Dialect::kV1b, r);
  RequestDecoder decoder(WireLimits{}, LegacyDialect::kTorch21);
  for (std::size_t fed = 1; fed < request.size(); fed += 7) {
    const std::string buffer = request.substr(0, fed);
    REQUIRE(std::holds_alternative<NeedMore>(decoder.decode(buffer)));
  }
  const std::string whole = request;
  auto result = decoder.decode(whole);
  REQUIRE(std::holds_alternative<Request>(result));
  const auto& got = std::get<Request>(result);
  REQUIRE(got.keys.size() == pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) CHECK(got.keys[i] == pairs[i]);
}

TEST_CASE("after a resumed list, the next request starts fresh", "[wire][bounds]") {
  const std::string wait = keyListRequest(Op::kWait, {"/x", "/y"});
  const std::string check = keyListRequest(Op::kCheck, {"/z"});
  RequestDecoder decoder;
  REQUIRE(std::holds_alternative<NeedMore>(decoder.decode(wait.substr(0, 20))));
  const std::string both = wait + check;
  auto first = decoder.decode(both);
  REQUIRE(std::holds_alternative<Request>(first));
  CHECK(std::get<Request>(first).keys.size() == 2);
  auto second = decoder.decode(std::string_view(both).substr(wait.size()));
  REQUIRE(std::holds_alternative<Request>(second));
  REQUIRE(std::get<Request>(second).keys.size() == 1);
  CHECK(std::get<Request>(second).keys[0] == "/z");
  decoder.trim();
  CHECK(decoder.memoryBytes() == 0);
}
