// Unit tests of the native Slurm hostlist parser, including a comparison against
// `scontrol show hostnames` (Slurm's own expansion) over a corpus of expressions.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "launcher/cli/slurm_nodelist.hpp"
#include "rendezvous/base/error.hpp"

using ddp::expandSlurmNodelist;
using Hosts = std::vector<std::string>;

TEST_CASE("plain names and comma lists", "[slurm_nodelist]") {
  CHECK(expandSlurmNodelist("vm") == Hosts{"vm"});
  CHECK(expandSlurmNodelist("n1,gpu[1-3]") == Hosts{"n1", "gpu1", "gpu2", "gpu3"});
  CHECK(expandSlurmNodelist("a,,b") == Hosts{"a", "b"});
  CHECK(expandSlurmNodelist("a b\tc") == Hosts{"a", "b", "c"});
  CHECK(expandSlurmNodelist("a,a") == Hosts{"a", "a"});
  CHECK(expandSlurmNodelist("").empty());
  CHECK(expandSlurmNodelist(" , ").empty());
}

TEST_CASE("ranges keep the low bound's zero padding", "[slurm_nodelist]") {
  CHECK(expandSlurmNodelist("node[01-04,07]") ==
        Hosts{"node01", "node02", "node03", "node04", "node07"});
  CHECK(expandSlurmNodelist("n[8-11]") == Hosts{"n8", "n9", "n10", "n11"});
  CHECK(expandSlurmNodelist("n[09-11]") == Hosts{"n09", "n10", "n11"});
  CHECK(expandSlurmNodelist("n[001-3]") == Hosts{"n001", "n002", "n003"});
  CHECK(expandSlurmNodelist("n[1-02]") == Hosts{"n1", "n2"});
  CHECK(expandSlurmNodelist("n[2,1]") == Hosts{"n2", "n1"});
  CHECK(expandSlurmNodelist("n[0-0]") == Hosts{"n0"});
}

TEST_CASE("several bracket groups expand as a product, rightmost fastest", "[slurm_nodelist]") {
  CHECK(expandSlurmNodelist("a[1-2]-b[3-4]") == Hosts{"a1-b3", "a1-b4", "a2-b3", "a2-b4"});
  CHECK(expandSlurmNodelist("n[1-2][3-4]") == Hosts{"n13", "n14", "n23", "n24"});
  // Slurm peels the groups before the last one off from the right (hostlist.c).
  CHECK(expandSlurmNodelist("a[0-1]b[0-1]c[0-1]") ==
        Hosts{"a0b0c0", "a0b0c1", "a1b0c0", "a1b0c1", "a0b1c0", "a0b1c1", "a1b1c0", "a1b1c1"});
  CHECK(expandSlurmNodelist("x,rack[1-2]-n[01-02],y") ==
        Hosts{"x", "rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02", "y"});
}

TEST_CASE("first host", "[slurm_nodelist]") {
  CHECK(ddp::firstSlurmHost("gpu-[007-009],cpu1") == "gpu-007");
  CHECK_THROWS_AS(ddp::firstSlurmHost(""), ddp::ConfigError);
}

TEST_CASE("malformed lists are ConfigErrors naming the list", "[slurm_nodelist]") {
  for (const char* bad : {"n[3-1]", "n[]", "n[1-", "n[1-3", "n1]", "n[a-b]", "n[1-2,]", "n[1-3]x",
                          "a[1-2],b[01-02]c", "n[010-8]", "n[[1]]", "n[1 -2]", "n[-2]",
                          "n[1-1234567890123456789]", "n[1-100000000]", "a[1-2000]b[1-2000]"}) {
    INFO(bad);
    try {
      expandSlurmNodelist(bad);
      FAIL("no error for " << bad);
    } catch (const ddp::ConfigError& e) {
      CHECK(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
    }
  }
}

namespace {

// Runs `scontrol show hostnames '<list>'` with a 2-line slurm.conf; returns its lines.
Hosts scontrolHostnames(const std::string& conf, const std::string& list) {
  std::string cmd = "SLURM_CONF='" + conf + "' scontrol show hostnames '" + list + "' 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int rc = pclose(pipe);
  INFO("scontrol output: " << out);
  REQUIRE(rc == 0);
  Hosts hosts;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) hosts.push_back(line);
  }
  return hosts;
}

std::string scratchDir() {
  const char* tmp = std::getenv("DDP_TEST_TMP");
  std::filesystem::path dir = tmp != nullptr ? tmp : std::filesystem::temp_directory_path();
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace

TEST_CASE("agrees with scontrol show hostnames", "[slurm_nodelist][scontrol]") {
  REQUIRE(std::system("command -v scontrol >/dev/null 2>&1") == 0);
  std::string conf = scratchDir() + "/slurm-hostlist.conf";
  std::ofstream(conf) << "ClusterName=x\nSlurmctldHost=localhost\n";
  for (const char* list :
       {"vm", "node[01-04,07]", "a[1-2]-b[3-4]", "n1,gpu[1-3]", "a,a", "n[8-11]", "n[001-3]",
        "a,,b", "n[1,1]", "n[09-11]", "n[1-2][3-4]", "n[0-0]", "rack[1-2]-node[01-02]",
        "n[2,1]", "n[1-02]", "n-[1-2]", "n[1-2]-[3-4]", "gpu-[007-009],cpu1", "n[98-102]",
        "x[1-3,5,7-8],y[10-12],z", "a[0-1]b[0-1]c[0-1]", "host.domain[1-2]", "n[99999-100001]"}) {
    INFO(list);
    CHECK(expandSlurmNodelist(list) == scontrolHostnames(conf, list));
  }
}
