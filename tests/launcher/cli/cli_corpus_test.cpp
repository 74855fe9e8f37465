// A corpus of real torchrun command lines (tests/launcher/data/torchrun_cmdlines.txt) parsed by
// ddprun's command line into the values torchrun would have used (or the documented improvement).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "launcher/cli/cli.hpp"

namespace {

struct CorpusCase {
  int line = 0;
  std::string source;
  std::string cmd;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> expect;
};

// Splits like a shell, without expansion: whitespace separates, quotes group and are removed.
std::vector<std::string> shellSplit(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool inWord = false;
  char quote = 0;
  for (char ch : text) {
    if (quote) {
      if (ch == quote) quote = 0; else word += ch;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      inWord = true;
    } else if (ch == ' ' || ch == '\t') {
      if (inWord) words.push_back(word);
      word.clear();
      inWord = false;
    } else {
      word += ch;
      inWord = true;
    }
  }
  if (inWord) words.push_back(word);
  return words;
}

// Drops the launcher words: "torchrun", "ddprun", "python [-u] -m torch.distributed.run|launch".
std::vector<std::string> launcherArgs(const std::vector<std::string>& words) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    const auto& w = words[i];
    if (w == "torchrun" || w == "ddprun" || w == "torch.distributed.run" || w == "torch.distributed.launch")
      return {words.begin() + static_cast<long>(i) + 1, words.end()};
  }
  return words;
}

// key=value pairs; "command" and "error" take the rest of the line.
std::map<std::string, std::string> parsePairs(const std::string& text) {
  std::map<std::string, std::string> pairs;
  std::istringstream in(text);
  std::string token;
  while (in >> token) {
    auto eq = token.find('=');
    std::string key = token.substr(0, eq), value = eq == std::string::npos ? "" : token.substr(eq + 1);
    if (key == "command" || key == "error") {
      std::string rest;
      std::getline(in, rest);
      pairs[key] = value + rest;
      break;
    }
    pairs[key] = value;
  }
  return pairs;
}

std::vector<CorpusCase> loadCorpus() {
  const char* root = std::getenv("DDP_SOURCE_DIR");
  std::string path = std::string(root ? root : ".") + "/tests/launcher/data/torchrun_cmdlines.txt";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<CorpusCase> cases;
  std::string line, source;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.starts_with("# source:")) source = line.substr(10);
    if (line.starts_with("cmd: ")) cases.push_back({number, source, line.substr(5), {}, {}});
    if (line.starts_with("env: ")) {
      for (const auto& word : shellSplit(line.substr(5))) {
        auto eq = word.find('=');
        cases.back().env[word.substr(0, eq)] = word.substr(eq + 1);
      }
    }
    if (line.starts_with("expect: ")) cases.back().expect = parsePairs(line.substr(8));
  }
  return cases;
}

std::string streamText(const ddp::StreamSpec& spec) {
  if (spec.perRank.empty()) return std::to_string(static_cast<int>(spec.all));
  std::string out;
  for (auto [rank, s] : spec.perRank)
    out += (out.empty() ? "" : ",") + std::to_string(rank) + ":" + std::to_string(static_cast<int>(s));
  return out;
}

std::string joined(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

const char* backendName(ddp::RdzvBackend b) {
  switch (b) {
    case ddp::RdzvBackend::kStatic: return "static";
    case ddp::RdzvBackend::kC10d: return "c10d";
    case ddp::RdzvBackend::kEtcd: return "etcd";
    case ddp::RdzvBackend::kEtcdV2: return "etcd-v2";
  }
  return "?";
}

const char* kindName(ddp::EntrypointKind k) {
  switch (k) {
    case ddp::EntrypointKind::kPythonScript: return "script";
    case ddp::EntrypointKind::kPythonModule: return "module";
    case ddp::EntrypointKind::kProgram: return "program";
  }
  return "?";
}

// The parsed value under a corpus key, in the corpus's notation.
std::string actual(const ddp::LaunchConfig& c, const std::string& key) {
  using std::to_string;
  if (key == "nnodes") return to_string(c.minNodes) + ":" + to_string(c.maxNodes);
  if (key == "nproc") return to_string(c.nprocPerNode);
  if (key == "backend") return backendName(c.rdzvBackend);
  if (key == "endpoint") {
    std::vector<std::string> all;
    for (const auto& e : c.rdzvEndpoints) all.push_back(e.host + ":" + to_string(e.port));
    return joined(all, ",");
  }
  if (key == "id") return c.rdzvId;
  if (key == "standalone") return c.standalone ? "1" : "0";
  if (key == "node_rank") return c.nodeRank ? to_string(*c.nodeRank) : "none";
  if (key == "max_restarts") return to_string(c.maxRestarts);
  if (key == "master") return c.masterAddr + (c.masterPort ? ":" + to_string(*c.masterPort) : "");
  if (key == "tee") return streamText(c.tee);
  if (key == "redirects") return streamText(c.redirects);
  if (key == "role") return c.role;
  if (key == "kind") return kindName(c.entrypointKind);
  if (key == "command") return joined(c.command, " ");
  if (key == "is_host") return c.rdzvConf.isHost ? (*c.rdzvConf.isHost ? "true" : "false") : "auto";
  if (key == "heartbeat_timeout_ms") return to_string(c.rdzv.heartbeatTimeout.count());
  if (key == "join_timeout_ms") return to_string(c.rdzv.joinTimeout.count());
  if (key == "last_call_timeout_ms") return to_string(c.rdzv.lastCallTimeout.count());
  if (key == "log_dir") return c.logDir;
  if (key == "monitor_interval") {
    std::ostringstream out;
    out << c.monitorInterval;
    return out.str();
  }
  if (key == "filter") {
    std::vector<std::string> ranks;
    for (int r : c.localRanksFilter) ranks.push_back(to_string(r));
    return joined(ranks, ",");
  }
  if (key == "signals") {
    std::vector<std::string> names;
    for (int s : c.signalsToHandle) names.push_back("SIG" + std::string(sigabbrev_np(s)));
    return joined(names, ",");
  }
  FAIL("unknown corpus key " << key);
  return "";
}

}  // namespace

TEST_CASE("real torchrun command lines parse to torchrun's values", "[cli][corpus]") {
  // GPU counting asks the CUDA driver, which reads the real environment: hide every GPU so the
  // "gpu" case means the same on every machine.
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  auto cases = loadCorpus();
  REQUIRE(cases.size() >= 20);
  const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  for (const auto& tc : cases) {
    INFO("line " << tc.line << " (" << tc.source << "): " << tc.cmd);
    REQUIRE_FALSE(tc.expect.empty());
    auto env = tc.env;
    auto lookup = [env](const std::string& name) -> std::optional<std::string> {
      auto it = env.find(name);
      return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    auto args = launcherArgs(shellSplit(tc.cmd));
    if (auto err = tc.expect.find("error"); err != tc.expect.end()) {
      CHECK_THROWS_WITH(ddp::parseCommandLine(args, lookup), Catch::Contains(err->second));
      continue;
    }
    ddp::LaunchConfig config;
    REQUIRE_NOTHROW(config = ddp::parseCommandLine(args, lookup));
    for (const auto& [key, want] : tc.expect) {
      INFO("key " << key);
      if (key == "id" && want == "uuid")
        CHECK(std::regex_match(config.rdzvId, uuid));
      else
        CHECK(actual(config, key) == want);
    }
  }
}
