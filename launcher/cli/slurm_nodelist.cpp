#include "launcher/cli/slurm_nodelist.hpp"

#include <cctype>
#include <cstdint>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

// One piece of an item: literal text, or the expanded numbers of one bracket group.
struct Segment {
  std::vector<std::string> choices;
  bool bracket = false;
};

[[noreturn]] void malformed(std::string_view nodelist, const std::string& why) {
  throw ConfigError("malformed Slurm nodelist '" + std::string(nodelist) + "': " + why);
}

bool isSeparator(char c) { return c == ',' || std::isspace(static_cast<unsigned char>(c)); }

uint64_t parseNumber(std::string_view digits, std::string_view nodelist, std::string_view range) {
  if (digits.empty() || digits.size() > 18) {
    malformed(nodelist, "range '" + std::string(range) + "' needs 1 to 18 digits per bound");
  }
  uint64_t value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      malformed(nodelist, "range '" + std::string(range) + "' is not numeric");
    }
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

std::string padded(uint64_t value, std::size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// Expands the inside of one bracket group: "01-04,07".
std::vector<std::string> expandRanges(std::string_view body, std::string_view nodelist) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = body.find(',', start);
    std::string_view range = body.substr(start, comma == std::string_view::npos ? body.npos : comma - start);
    std::size_t dash = range.find('-');
    std::string_view loText = range.substr(0, dash);
    uint64_t lo = parseNumber(loText, nodelist, range);
    uint64_t hi = dash == std::string_view::npos ? lo : parseNumber(range.substr(dash + 1), nodelist, range);
    if (hi < lo) malformed(nodelist, "range '" + std::string(range) + "' runs backwards");
    if (hi - lo >= kMaxSlurmHosts || out.size() + (hi - lo) >= kMaxSlurmHosts) {
      malformed(nodelist, "expands to more than " + std::to_string(kMaxSlurmHosts) + " hosts");
    }
    for (uint64_t v = lo; v <= hi; ++v) out.push_back(padded(v, loText.size()));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// Splits one item ("rack[1-2]-n[01-02]") into literal and bracket segments.
std::vector<Segment> parseItem(std::string_view item, std::string_view nodelist) {
  std::vector<Segment> segments;
  std::size_t pos = 0;
  while (pos < item.size()) {
    std::size_t open = item.find('[', pos);
    std::string_view text = item.substr(pos, open == std::string_view::npos ? item.npos : open - pos);
    if (text.find(']') != std::string_view::npos) malformed(nodelist, "']' without '['");
    if (open == std::string_view::npos) {
      if (!segments.empty()) {
        malformed(nodelist, "text '" + std::string(text) + "' after the last bracket group");
      }
      segments.push_back({{std::string(text)}, false});
      break;
    }
    if (!text.empty()) segments.push_back({{std::string(text)}, false});
    std::size_t close = item.find(']', open);
    if (close == std::string_view::npos) malformed(nodelist, "'[' without ']'");
    std::string_view body = item.substr(open + 1, close - open - 1);
    if (body.find('[') != std::string_view::npos) malformed(nodelist, "nested '['");
    segments.push_back({expandRanges(body, nodelist), true});
    pos = close + 1;
  }
  return segments;
}

// Slurm's order for several groups (hostlist.c _push_range_list): the last group varies fastest;
// the groups before it are peeled off from the right, so the one just before the last varies
// slowest: a[0-1]b[0-1]c[0-1] -> a0b0c0 a0b0c1 a1b0c0 a1b0c1 a0b1c0 ...
void expandSegments(std::vector<Segment>& segments, std::vector<std::string>& out) {
  int last = -1;
  int previous = -1;
  for (int i = 0; i < static_cast<int>(segments.size()); ++i) {
    if (segments[i].bracket) {
      previous = last;
      last = i;
    }
  }
  if (previous < 0) {
    std::string prefix;
    for (int i = 0; i < (last < 0 ? static_cast<int>(segments.size()) : last); ++i) {
      prefix += segments[i].choices.front();
    }
    if (last < 0) {
      out.push_back(prefix);
      return;
    }
    for (const std::string& choice : segments[last].choices) out.push_back(prefix + choice);
    return;
  }
  Segment saved = segments[previous];
  for (const std::string& choice : saved.choices) {
    segments[previous] = Segment{{choice}, false};
    expandSegments(segments, out);
  }
  segments[previous] = std::move(saved);
}

void expandItem(std::string_view item, std::string_view nodelist, std::vector<std::string>& out) {
  std::vector<Segment> segments = parseItem(item, nodelist);
  std::size_t total = 1;
  for (const Segment& segment : segments) {
    total *= segment.choices.size();
    if (total + out.size() > kMaxSlurmHosts) {
      malformed(nodelist, "expands to more than " + std::to_string(kMaxSlurmHosts) + " hosts");
    }
  }
  expandSegments(segments, out);
}

}  // namespace

std::vector<std::string> expandSlurmNodelist(std::string_view nodelist) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < nodelist.size()) {
    if (isSeparator(nodelist[pos])) {
      ++pos;
      continue;
    }
    // An item ends at a separator outside brackets; commas inside brackets separate ranges.
    std::size_t end = pos;
    bool inBracket = false;
    while (end < nodelist.size() && (inBracket || !isSeparator(nodelist[end]))) {
      if (nodelist[end] == '[') {
        if (inBracket) malformed(nodelist, "nested '['");
        inBracket = true;
      } else if (nodelist[end] == ']') {
        if (!inBracket) malformed(nodelist, "']' without '['");
        inBracket = false;
      } else if (inBracket && std::isspace(static_cast<unsigned char>(nodelist[end]))) {
        malformed(nodelist, "blank inside brackets");
      }
      ++end;
    }
    if (inBracket) malformed(nodelist, "'[' without ']'");
    expandItem(nodelist.substr(pos, end - pos), nodelist, out);
    pos = end;
  }
  return out;
}

std::string firstSlurmHost(std::string_view nodelist) {
  std::vector<std::string> hosts = expandSlurmNodelist(nodelist);
  if (hosts.empty()) throw ConfigError("empty Slurm nodelist: no host to rendezvous on");
  return hosts.front();
}

}  // namespace ddp
