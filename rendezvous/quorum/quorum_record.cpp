#include "rendezvous/quorum/quorum_record.hpp"

#include <nlohmann/json.hpp>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

using nlohmann::json;

template <class T>
T field(const json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) throw ProtocolError(std::string("quorum record: no '") + name + "'");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw ProtocolError(std::string("quorum record: '") + name + "' has the wrong type");
  }
}

void check(bool ok, const std::string& what) {
  if (!ok) throw ProtocolError("quorum record: " + what);
}

}  // namespace

std::string toString(const QuorumId& id) {
  return std::to_string(id.generation) + "." + std::to_string(id.quorum);
}

std::string encodeQuorumRecord(const QuorumRecord& r) {
  json j = {{"generation", r.id.generation},   {"quorum", r.id.quorum},
            {"rank", r.rank},                  {"world_size", r.worldSize},
            {"local_rank", r.localRank},       {"local_world_size", r.localWorldSize},
            {"group_rank", r.groupRank},       {"group_world_size", r.groupWorldSize},
            {"master_addr", r.master.host},    {"master_port", r.master.port},
            {"reason", r.reason},              {"replaced", r.replaced}};
  return j.dump();
}

QuorumRecord decodeQuorumRecord(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw ProtocolError("quorum record: not a JSON object");
  QuorumRecord r;
  r.id.generation = field<int64_t>(j, "generation");
  r.id.quorum = field<int64_t>(j, "quorum");
  r.rank = field<int>(j, "rank");
  r.worldSize = field<int>(j, "world_size");
  r.localRank = field<int>(j, "local_rank");
  r.localWorldSize = field<int>(j, "local_world_size");
  r.groupRank = field<int>(j, "group_rank");
  r.groupWorldSize = field<int>(j, "group_world_size");
  r.master.host = field<std::string>(j, "master_addr");
  const int port = field<int>(j, "master_port");
  if (j.contains("reason")) r.reason = field<std::string>(j, "reason");
  if (j.contains("replaced")) r.replaced = field<std::vector<int>>(j, "replaced");
  check(r.id.generation >= 0 && r.id.quorum >= 0, "negative generation or quorum");
  check(r.worldSize >= 1 && r.rank >= 0 && r.rank < r.worldSize, "rank outside the world");
  check(r.localWorldSize >= 1 && r.localWorldSize <= r.worldSize && r.localRank >= 0 &&
            r.localRank < r.localWorldSize,
        "local rank outside the node");
  check(r.groupWorldSize >= 1 && r.groupRank >= 0 && r.groupRank < r.groupWorldSize,
        "group rank outside the job");
  check(port >= 1 && port <= 65535 && !r.master.host.empty(), "no usable worker store address");
  r.master.port = port;
  for (int rank : r.replaced) check(rank >= 0 && rank < r.worldSize, "replaced rank outside the world");
  return r;
}

}  // namespace ddp
