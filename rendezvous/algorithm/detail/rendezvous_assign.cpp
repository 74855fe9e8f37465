#include "rendezvous/algorithm/detail/rendezvous_assign.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <climits>
#include <map>
#include <optional>
#include <tuple>


namespace ddp::detail {

namespace {

// Records are tab-separated fields, one record per line; strings escape '%', '\t' and '\n' as
// %25, %09 and %0A. This stays cheap to parse when every agent reads an N-node membership.
std::string escape(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  for (char c : in) {
    if (c == '%') {
      out += "%25";
    } else if (c == '\t') {
      out += "%09";
    } else if (c == '\n') {
      out += "%0A";
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape(std::string_view in) {
  if (in.find('%') == std::string_view::npos) return std::string(in);  // the common case
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string_view code = in[i] == '%' ? in.substr(i, 3) : std::string_view();
    if (code == "%25" || code == "%09" || code == "%0A") {
      out += code == "%25" ? '%' : (code == "%09" ? '\t' : '\n');
      i += 2;
    } else {
      out += in[i];
    }
  }
  return out;
}

// Splits `line` at tabs into exactly `n` fields; throws ProtocolError otherwise.
std::vector<std::string_view> fields(std::string_view line, size_t n, const char* what) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (out.size() + 1 < n) {
    const auto tab = line.find('\t', pos);
    if (tab == std::string_view::npos) break;
    out.push_back(line.substr(pos, tab - pos));
    pos = tab + 1;
  }
  out.push_back(line.substr(pos));
  if (out.size() != n || out.back().find('\t') != std::string_view::npos) {
    throw ProtocolError(std::string("malformed ") + what + " in the rendezvous store: '" +
                        std::string(line.substr(0, 200)) + "'");
  }
  return out;
}

template <typename T>
T number(std::string_view text, const char* what) {
  T value{};
  const auto r = std::from_chars(text.data(), text.data() + text.size(), value);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    throw ProtocolError(std::string("malformed number '") + std::string(text) + "' in " + what +
                        " in the rendezvous store");
  }
  return value;
}

void appendRecord(std::string& out, const JoinRecord& r) {
  const auto& n = r.node;
  out += std::to_string(r.slot) + '\t' + std::to_string(r.prevRank) + '\t' +
         std::to_string(r.prevGeneration) + '\t' + std::to_string(n.pid) + '\t' +
         std::to_string(n.localWorldSize) + '\t' + std::to_string(n.requestedRank) + '\t' +
         std::to_string(n.order) + '\t' + escape(n.host) + '\t' + escape(n.addr) + '\t' +
         escape(n.role);
}

JoinRecord parseRecord(std::string_view line) {
  const char* what = "join record";
  const auto f = fields(line, 10, what);
  JoinRecord r;
  r.slot = number<int64_t>(f[0], what);
  r.prevRank = number<int>(f[1], what);
  r.prevGeneration = number<int64_t>(f[2], what);
  r.node.pid = number<int>(f[3], what);
  r.node.localWorldSize = number<int>(f[4], what);
  r.node.requestedRank = number<int>(f[5], what);
  r.node.order = number<int>(f[6], what);
  r.node.host = unescape(f[7]);
  r.node.addr = unescape(f[8]);
  r.node.role = unescape(f[9]);
  return r;
}

std::string describe(const JoinRecord& r) {
  return r.node.host + " (addr " + r.node.addr + ", pid " + std::to_string(r.node.pid) + ")";
}

}  // namespace

std::string encodeJoinRecord(const JoinRecord& record) {
  std::string out;
  appendRecord(out, record);
  return out;
}

JoinRecord decodeJoinRecord(const std::string& value) { return parseRecord(value); }

std::string encodeMembership(const RoundMembership& m) {
  std::string out = std::to_string(m.generation) + '\t' + std::to_string(m.restartsUsed) + '\t' +
                    escape(m.error) + '\n';
  out.reserve(out.size() + m.members.size() * 64);
  for (const auto& record : m.members) {
    appendRecord(out, record);
    out += '\n';
  }
  return out;
}

RoundMembership decodeMembership(const std::string& value) {
  const std::string_view text(value);
  auto eol = text.find('\n');
  if (eol == std::string_view::npos) throw ProtocolError("malformed round result in the store");
  const auto head = fields(text.substr(0, eol), 3, "round result");
  RoundMembership m;
  m.generation = number<int64_t>(head[0], "round result");
  m.restartsUsed = number<int>(head[1], "round result");
  m.error = unescape(head[2]);
  size_t pos = eol + 1;
  while (pos < text.size()) {
    eol = text.find('\n', pos);
    if (eol == std::string_view::npos) throw ProtocolError("truncated round result in the store");
    m.members.push_back(parseRecord(text.substr(pos, eol - pos)));
    pos = eol + 1;
  }
  return m;
}

std::vector<JoinRecord> assignNodeRanks(std::vector<JoinRecord> joined, int64_t generation) {
  const int n = static_cast<int>(joined.size());
  std::vector<std::optional<JoinRecord>> byRank(n);
  std::vector<JoinRecord> unranked;
  for (auto& record : joined) {
    const int want = record.node.requestedRank;
    if (want < 0) {
      unranked.push_back(std::move(record));
      continue;
    }
    if (want >= n) {
      throw ConfigError("node " + describe(record) + " asked for node rank " +
                        std::to_string(want) + " but round " + std::to_string(generation) +
                        " has " + std::to_string(n) + " nodes (ranks 0.." +
                        std::to_string(n - 1) + ")");
    }
    if (byRank[want]) {
      throw ConfigError("nodes " + describe(*byRank[want]) + " and " + describe(record) +
                        " both asked for node rank " + std::to_string(want));
    }
    byRank[want] = std::move(record);
  }
  auto order = [](const JoinRecord& r) {
    return std::make_tuple(r.node.order < 0 ? INT_MAX : r.node.order,
                           r.prevRank < 0 ? INT_MAX : r.prevRank, r.node.host, r.node.addr,
                           r.node.pid, r.slot);
  };
  std::sort(unranked.begin(), unranked.end(),
            [&](const JoinRecord& a, const JoinRecord& b) { return order(a) < order(b); });
  std::vector<JoinRecord> ordered;
  ordered.reserve(n);
  size_t next = 0;
  for (auto& slot : byRank) ordered.push_back(slot ? std::move(*slot) : std::move(unranked[next++]));
  return ordered;
}

RendezvousResult resultFor(RoundMembership m, int64_t slot) {
  if (!m.error.empty()) throw ConfigError(m.error);
  RendezvousResult result;
  result.generation = m.generation;
  result.restartsUsed = m.restartsUsed;
  result.nodeCount = static_cast<int>(m.members.size());
  result.worldSize = 0;
  std::map<std::string, int> roleSize;
  int mine = -1;
  result.members.reserve(m.members.size());
  for (int rank = 0; rank < result.nodeCount; ++rank) {
    JoinRecord& record = m.members[rank];
    const int localWorldSize = record.node.localWorldSize;
    int& roleBase = roleSize[record.node.role];
    if (record.slot == slot) {
      mine = rank;
      result.baseRank = result.worldSize;
      result.baseRoleRank = roleBase;
    }
    result.members.push_back(RendezvousMember{rank, result.worldSize, std::move(record.node)});
    result.worldSize += localWorldSize;
    roleBase += localWorldSize;
  }
  if (mine < 0) {
    throw Error("join slot " + std::to_string(slot) + " is not a member of round " +
                std::to_string(m.generation));
  }
  result.nodeRank = mine;
  result.roleWorldSize = roleSize[result.members[mine].node.role];
  return result;
}

}  // namespace ddp::detail
