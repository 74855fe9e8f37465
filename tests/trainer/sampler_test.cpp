// DistributedSampler: index lists equal torch 1.13's (runs /usr/bin/python3), and the resume rule.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "trainer/distributed_sampler.hpp"

using namespace ddp;

namespace {

struct Case {
  int64_t n;
  int world, rank;
  uint64_t seed;
  int64_t epoch;
  bool dropLast, shuffle;
};

std::string caseArg(const Case& c) {
  std::ostringstream s;
  s << c.n << "," << c.world << "," << c.rank << "," << c.seed << "," << c.epoch << ","
    << c.dropLast << "," << c.shuffle;
  return s.str();
}

// Runs the torch helper once for all cases; returns one list per case.
std::vector<std::vector<int64_t>> torchLists(const std::vector<Case>& cases) {
  const char* src = std::getenv("DDP_SOURCE_DIR");
  std::string cmd = "/usr/bin/python3 " + std::string(src ? src : ".") +
                    "/tests/trainer/torch_sampler.py";
  for (const auto& c : cases) cmd += " " + caseArg(c);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
  REQUIRE(pipe);
  std::string out;
  char buf[65536];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), pipe.get())) > 0) out.append(buf, got);
  std::vector<std::vector<int64_t>> lists;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    lists.push_back(nlohmann::json::parse(line).get<std::vector<int64_t>>());
  }
  return lists;
}

}  // namespace

TEST_CASE("index lists equal torch 1.13 DistributedSampler", "[sampler][torch]") {
  std::vector<Case> cases = {
      {10, 1, 0, 0, 0, false, true},     {10, 3, 2, 0, 0, false, true},
      {103, 4, 1, 42, 3, false, true},   {103, 4, 3, 42, 3, true, true},
      {7, 3, 0, 1, 0, true, true},       {5, 8, 7, 0, 1, false, true},
      {5, 8, 6, 0, 1, true, true},       {1000, 2, 1, 2024, 7, false, true},
      {20, 3, 1, 9, 2, false, false},    {20, 3, 2, 9, 2, true, false},
      {65537, 5, 4, 123456789, 11, false, true},
      {3000, 7, 6, (1ull << 32) + 5, 0, false, true},  // torch keeps the seed's low 32 bits
  };
  auto lists = torchLists(cases);
  REQUIRE(lists.size() == cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    INFO("case n,world,rank,seed,epoch,drop_last,shuffle = " << caseArg(c));
    DistributedSampler sampler({c.n, c.world, c.rank, c.shuffle, c.seed, c.dropLast});
    auto ours = sampler.indices(c.epoch);
    REQUIRE(ours == lists[i]);
    REQUIRE(static_cast<int64_t>(ours.size()) == sampler.numSamples());
  }
}

TEST_CASE("resume with the same world size continues each rank's list", "[sampler]") {
  for (int rank = 0; rank < 3; ++rank) {
    DistributedSampler s({100, 3, rank, true, 5, false});
    auto all = s.indices(2);
    auto r = s.resume(2, 0, 30, 3);  // 10 per rank consumed
    REQUIRE(r.base == 0);
    REQUIRE(r.indices == std::vector<int64_t>(all.begin() + 10, all.end()));
  }
}

TEST_CASE("resume with another world size re-shards the remaining samples", "[sampler]") {
  const int64_t n = 100, consumed = 40;
  DistributedSampler writer({n, 2, 0, true, 5, false});
  auto order = torchRandperm(n, 5 + 1);
  std::multiset<int64_t> seen;
  std::set<int64_t> bases;
  for (int rank = 0; rank < 3; ++rank) {
    DistributedSampler s({n, 3, rank, true, 5, false});
    auto r = s.resume(1, 0, consumed, 2);
    bases.insert(r.base);
    REQUIRE(r.indices.size() == 20);  // 60 remaining over 3 ranks
    seen.insert(r.indices.begin(), r.indices.end());
  }
  REQUIRE(bases == std::set<int64_t>{consumed});
  std::multiset<int64_t> want(order.begin() + consumed, order.end());
  REQUIRE(seen == want);
  // A second resume over the same 3-rank sharding continues it.
  DistributedSampler s1({n, 3, 1, true, 5, false});
  auto first = s1.resume(1, 0, consumed, 2).indices;
  auto again = s1.resume(1, consumed, consumed + 3 * 4, 3);
  REQUIRE(again.base == consumed);
  REQUIRE(again.indices == std::vector<int64_t>(first.begin() + 4, first.end()));
}

TEST_CASE("a finished epoch resumes to an empty list", "[sampler]") {
  DistributedSampler s({10, 4, 1, true, 0, false});
  REQUIRE(s.resume(0, 0, 12, 4).indices.empty());
  REQUIRE(s.resume(0, 0, 12, 2).indices.empty());
}
