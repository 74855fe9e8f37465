// ddprund's data directory (Journal, journal_format): records and torn records, replay of every
// kind of change through a real StoreServer, corruption / other versions / a locked directory
// refused with one line, compaction, the memory budget on replay, and group commit: replies are
// released in commit order, each only once its record is in the file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/server/detail/journal.hpp"
#include "rendezvous/server/detail/journal_format.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "tests/rendezvous/server/store_server_client.hpp"
#include "tests/rendezvous/temp_dir.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;
using detail::MutationKind;
namespace fs = std::filesystem;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string record(MutationKind kind, std::string_view key, std::string_view value) {
  std::string payload, out;
  detail::encodeMutation(payload, detail::Mutation{kind, key, value, 0, 0});
  detail::encodeRecord(out, payload);
  return out;
}

// The newest file `prefix`.N in `dir`.
std::string newest(const std::string& dir, const std::string& prefix) {
  std::string best;
  uint64_t bestN = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix + ".", 0) != 0 || name.find(".tmp") != std::string::npos) continue;
    const uint64_t n = std::stoull(name.substr(prefix.size() + 1));
    if (best.empty() || n > bestN) best = e.path().string(), bestN = n;
  }
  return best;
}

StoreServerOptions durableServer(const std::string& dir, FsyncMode mode = FsyncMode::kBatch) {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.name = "journal-test store";
  options.durability.dataDir = dir;
  options.durability.fsync = mode;
  return options;
}

TcpStoreClientOptions clientFor(uint16_t port) {
  TcpStoreClientOptions options;
  options.endpoint = {"127.0.0.1", port};
  options.connectTimeout = 30s;
  options.timeout = 30s;
  return options;
}

TEST_CASE("journal records: a torn last record is dropped, a bad one before others is corrupt") {
  const std::string a = record(MutationKind::kPut, "k", "v1");
  const std::string b = record(MutationKind::kAppend, "k", "v2");
  auto scan = detail::scanRecords(a + b);
  CHECK(scan.payloads.size() == 2);
  CHECK_FALSE(scan.torn);

  for (std::size_t cut = 1; cut < b.size(); ++cut) {  // killed in the middle of writing b
    scan = detail::scanRecords(a + b.substr(0, cut));
    CHECK(scan.payloads.size() == 1);
    CHECK(scan.torn);
    CHECK(scan.error.empty());
    CHECK(scan.validBytes == a.size());
  }
  std::string flipped = a + b;
  flipped[a.size() - 1] ^= 0x40;  // a's last payload byte: a fails its checksum, b follows
  scan = detail::scanRecords(flipped);
  CHECK(scan.payloads.empty());
  CHECK_THAT(scan.error, Catch::Contains("bad checksum"));

  std::vector<detail::Mutation> mutations;
  std::string error;
  REQUIRE(detail::decodeMutations(scan.payloads.empty() ? detail::scanRecords(a).payloads[0]
                                                        : scan.payloads[0],
                                  mutations, error));
  REQUIRE(mutations.size() == 1);
  CHECK(mutations[0].key == "k");
  CHECK(mutations[0].value == "v1");
}

TEST_CASE("a restarted server has every change of every kind, and its request ids") {
  test::TempDir dir;
  for (const auto mode : {FsyncMode::kAlways, FsyncMode::kBatch, FsyncMode::kOff}) {
    fs::remove_all(dir / "d");
    {
      StoreServerThread server(durableServer(dir / "d", mode));
      TcpStoreClient client(clientFor(server.port()));
      client.set("s", "value");
      CHECK(client.add("n", 40) == 40);
      CHECK(client.add("n", 2) == 42);
      CHECK(client.compareSet("c", "", "first") == "first");
      client.append("a", "x");
      client.append("a", "y");
      client.multiSet({"m1", "m2"}, {"1", "2"});
      client.set("gone", "soon");
      CHECK(client.deleteKey("gone"));
      test::Client raw(server.port(), wire::Dialect::kV2);
      raw.send(wire::Op::kQueuePush, "q", "one");
      raw.send(wire::Op::kQueuePush, "q", "two");
      raw.send(wire::Op::kQueuePop, "q");
      CHECK(raw.readInt() == 2);
      CHECK(raw.readValue() == "one");
      CHECK(client.numKeys() == 6);
    }
    StoreServerThread again(durableServer(dir / "d", mode));
    TcpStoreClient client(clientFor(again.port()));
    CHECK(client.numKeys() == 6);
    CHECK(client.multiGet({"s", "n", "c", "a", "m1", "m2"}) ==
          std::vector<std::string>{"value", "42", "first", "xy", "1", "2"});
    CHECK_FALSE(client.check({"gone"}));
    test::Client raw(again.port(), wire::Dialect::kV2);
    raw.send(wire::Op::kQueueLen, "q");
    CHECK(raw.readInt() == 1);
  }
}

TEST_CASE("a torn last record is dropped; corruption, another format and a lock are refused") {
  test::TempDir dir;
  {
    StoreServerThread server(durableServer(dir.path()));
    TcpStoreClient client(clientFor(server.port()));
    client.set("kept", "1");
    CHECK(client.add("n", 1) == 1);  // a reply: everything before it is durable
  }
  const std::string journal = newest(dir.path(), "journal");
  REQUIRE_FALSE(journal.empty());
  const std::string good = readFile(journal);
  const std::string torn = record(MutationKind::kPut, "torn", "never acknowledged");
  writeFile(journal, good + torn.substr(0, torn.size() - 3));
  {
    StoreServerThread server(durableServer(dir.path()));
    TcpStoreClient client(clientFor(server.port()));
    CHECK(client.get("kept") == "1");
    CHECK_FALSE(client.check({"torn"}));
    CHECK_THROWS_WITH(StoreServerThread(durableServer(dir.path())),
                      Catch::Contains("in use by another ddprund"));
  }
  // The restart compacted into a new generation: corrupt its snapshot in the middle.
  const std::string snapshot = newest(dir.path(), "snapshot");
  std::string bytes = readFile(snapshot);
  REQUIRE(bytes.size() > 40);
  bytes[detail::kFileHeaderBytes + 12] ^= 0x01;
  writeFile(snapshot, bytes);
  CHECK_THROWS_WITH(StoreServerThread(durableServer(dir.path())),
                    Catch::Contains(snapshot) && Catch::Contains("corrupt"));
  bytes[detail::kFileHeaderBytes + 12] ^= 0x01;
  bytes[8] = 9;  // format version 9
  writeFile(snapshot, bytes);
  CHECK_THROWS_WITH(StoreServerThread(durableServer(dir.path())),
                    Catch::Contains("data format 9 by a newer ddprund; this ddprund reads format 1 only"));
}

TEST_CASE("compaction: snapshots replace the journal and replay to the same state") {
  test::TempDir dir;
  StoreServerOptions options = durableServer(dir.path());
  options.durability.compactAfterBytes = 4096;
  {
    StoreServerThread server(options);
    TcpStoreClient client(clientFor(server.port()));
    for (int i = 0; i < 400; ++i) client.set("k" + std::to_string(i % 20), std::to_string(i));
    CHECK(client.add("n", 7) == 7);
  }
  const std::string snapshot = newest(dir.path(), "snapshot");
  CHECK(std::stoull(snapshot.substr(snapshot.rfind('.') + 1)) > 2);  // compacted while serving
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) files += e.is_regular_file() ? 1 : 0;
  CHECK(files <= 4);  // LOCK, one snapshot, one or two journals: older ones were dropped
  StoreServerThread again(options);
  TcpStoreClient client(clientFor(again.port()));
  CHECK(client.numKeys() == 21);
  CHECK(client.get("k19") == "399");
  CHECK(client.get("n") == "7");
}

TEST_CASE("replay respects the memory budget") {
  test::TempDir dir;
  {
    StoreServerThread server(durableServer(dir.path()));
    TcpStoreClient client(clientFor(server.port()));
    client.set("big", std::string(4 << 20, 'x'));
    CHECK(client.add("n", 1) == 1);
  }
  StoreServerOptions small = durableServer(dir.path());
  small.maxMemoryBytes = 1 << 20;
  CHECK_THROWS_WITH(StoreServerThread(small), Catch::Contains("does not fit in the memory budget"));
}

TEST_CASE("group commit: replies are released in commit order, each after its record is written") {
  test::TempDir dir;
  boost::asio::io_context io;
  auto busy = boost::asio::make_work_guard(io);  // run_one() waits for the writer's posts
  DurabilityOptions options;
  options.dataDir = dir.path();
  options.fsync = FsyncMode::kBatch;
  detail::Journal journal(options, io.get_executor(), logger("store"));
  journal.replay([](const detail::Mutation&) { return true; });
  journal.start({});
  const std::string path = newest(dir.path(), "journal");
  std::vector<int> released;
  std::vector<std::size_t> recordsOnDisk;
  auto release = [&](int i) {
    return [&, i] {
      released.push_back(i);
      const std::string bytes = readFile(path);
      recordsOnDisk.push_back(
          detail::scanRecords(std::string_view(bytes).substr(detail::kFileHeaderBytes))
              .payloads.size());
    };
  };
  boost::asio::post(io, [&] {
    for (int i = 0; i < 50; ++i) {
      const std::string key = "k" + std::to_string(i);
      journal.stage(detail::Mutation{MutationKind::kPut, key, "v", 0, 0});
      journal.commit();
      CHECK_FALSE(journal.whenDurable(release(i)));  // not before the writer thread wrote it
    }
  });
  while (released.size() < 50) io.run_one();
  CHECK(journal.durable() == 50);
  // Everything committed is durable now; a reply revealing a change still being staged (a WAIT
  // woken by a SET of the same batch) still waits for that change's record.
  boost::asio::post(io, [&] {
    journal.stage(detail::Mutation{MutationKind::kPut, "k50", "v", 0, 0});
    CHECK_FALSE(journal.whenDurable(release(50)));
    journal.commit();
  });
  while (released.size() < 51) io.run_one();
  for (int i = 0; i <= 50; ++i) {
    CHECK(released[i] == i);
    CHECK(recordsOnDisk[i] >= static_cast<std::size_t>(i + 1));
  }
  CHECK(journal.durable() == 51);
}

}  // namespace
}  // namespace ddp
