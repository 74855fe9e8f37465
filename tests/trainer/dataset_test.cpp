// ShardFormat, make-data and ShardedDataset: round trip, and one-line errors for bad files.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>

#include "rendezvous/base/error.hpp"
#include "tests/trainer/test_support.hpp"
#include "trainer/make_data.hpp"
#include "trainer/sharded_dataset.hpp"

using namespace ddp;
namespace fs = std::filesystem;

namespace {

fs::path makeSmall(const std::string& name, uint64_t samples = 103, uint32_t shards = 4) {
  auto dir = test::scratchDir(name);
  makeSyntheticData({dir, samples, 8, 5, shards, 7});
  return dir;
}

std::string openError(const fs::path& dir) {
  try {
    ShardedDataset ds(dir);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("make-data writes an index and shards that map back", "[dataset]") {
  auto dir = makeSmall("roundtrip");
  ShardedDataset ds(dir);
  REQUIRE(ds.size() == 103);
  REQUIRE(ds.features() == 8);
  REQUIRE(ds.classes() == 5);
  REQUIRE(ds.index().shards.size() == 4);
  REQUIRE(ds.index().shards[0].samples == 26);
  REQUIRE(ds.index().shards[3].samples == 25);
  REQUIRE(fs::file_size(dir / "shard-00000.bin") == 32 + 4 * 26 * 8 + 4 * 26);

  std::vector<int64_t> ids = {0, 25, 26, 102};
  std::vector<float> x(ids.size() * 8);
  std::vector<int32_t> y(ids.size());
  ds.gather(ids, x.data(), y.data());
  // Sample 26 is the first of shard 1: read it by hand from the file.
  std::ifstream in(dir / "shard-00001.bin", std::ios::binary);
  in.seekg(32);
  float first[8];
  in.read(reinterpret_cast<char*>(first), sizeof(first));
  for (int i = 0; i < 8; ++i) REQUIRE(x[2 * 8 + i] == first[i]);
  std::map<int, int> counts;
  std::vector<int64_t> all(103);
  for (int i = 0; i < 103; ++i) all[i] = i;
  std::vector<float> xa(103 * 8);
  std::vector<int32_t> ya(103);
  ds.gather(all, xa.data(), ya.data());
  for (auto label : ya) counts[label]++;
  REQUIRE(counts.size() >= 3);  // the teacher uses several classes
}

TEST_CASE("make-data is deterministic for a seed", "[dataset]") {
  auto a = makeSmall("det-a");
  auto b = makeSmall("det-b");
  std::ifstream fa(a / "shard-00002.bin", std::ios::binary), fb(b / "shard-00002.bin", std::ios::binary);
  std::string sa((std::istreambuf_iterator<char>(fa)), {}), sb((std::istreambuf_iterator<char>(fb)), {});
  REQUIRE(sa == sb);
}

TEST_CASE("a missing dataset or shard is a clear error", "[dataset]") {
  auto empty = test::scratchDir("missing-index");
  REQUIRE_THAT(openError(empty), Catch::Contains("index.json") && Catch::Contains("not found"));
  auto dir = makeSmall("missing-shard");
  fs::remove(dir / "shard-00003.bin");
  REQUIRE_THAT(openError(dir), Catch::Contains("shard-00003.bin") && Catch::Contains("cannot open"));
}

TEST_CASE("a truncated shard is a clear error", "[dataset]") {
  auto dir = makeSmall("truncated");
  fs::resize_file(dir / "shard-00001.bin", 100);
  REQUIRE_THAT(openError(dir), Catch::Contains("shard-00001.bin") && Catch::Contains("truncated"));
}

TEST_CASE("a shard that does not match the index is a clear error", "[dataset]") {
  auto dir = makeSmall("mismatch");
  auto other = test::scratchDir("mismatch-other");
  makeSyntheticData({other, 103, 9, 5, 4, 7});
  fs::copy_file(other / "shard-00000.bin", dir / "shard-00000.bin",
                fs::copy_options::overwrite_existing);
  REQUIRE_THAT(openError(dir), Catch::Contains("shard-00000.bin"));

  auto bad = makeSmall("bad-magic");
  {
    std::fstream f(bad / "shard-00002.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.write("XXXX", 4);
  }
  REQUIRE_THAT(openError(bad), Catch::Contains("bad magic"));
}

TEST_CASE("an index with wrong counts or fields is a clear error", "[dataset]") {
  auto dir = makeSmall("bad-index");
  {
    std::ofstream f(dir / "index.json", std::ios::trunc);
    f << R"({"format":"ddp-shards","version":1,"samples":50,"features":8,"classes":5,)"
         R"("dtype":"float32","label_dtype":"int32","endianness":"little",)"
         R"("shards":[{"file":"shard-00000.bin","samples":26}]})";
  }
  REQUIRE_THAT(openError(dir), Catch::Contains("shards hold 26 samples"));
  {
    std::ofstream f(dir / "index.json", std::ios::trunc);
    f << R"({"format":"ddp-shards","version":1,"samples":26,"features":8,"classes":5,)"
         R"("dtype":"float16","label_dtype":"int32","endianness":"little","shards":[]})";
  }
  REQUIRE_THAT(openError(dir), Catch::Contains("dtype"));
  {
    std::ofstream f(dir / "index.json", std::ios::trunc);
    f << "{not json";
  }
  REQUIRE_THAT(openError(dir), Catch::Contains("not valid JSON"));
}

TEST_CASE("gather rejects an index out of range", "[dataset]") {
  auto dir = makeSmall("range");
  ShardedDataset ds(dir);
  std::vector<float> x(8);
  int32_t y;
  REQUIRE_THROWS_AS(ds.gather({103}, x.data(), &y), ConfigError);
}
