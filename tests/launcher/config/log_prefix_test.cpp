// The console line prefix template: ddprun's {name} syntax, torchrun's string.Template syntax
// translated into it, every variable of the table in log_prefix.hpp, unknown ones kept and named.
#include <catch2/catch.hpp>

#include "launcher/config/log_prefix.hpp"
#include "tests/launcher/cli_test_util.hpp"

using ddp::formatLogPrefix;
using ddp::LogPrefixValues;

namespace {

// Rank 13 is local rank 5 of node 1, 8 workers a node, 2 nodes.
const LogPrefixValues kWorker{{.rank = 13, .worldSize = 16, .localRank = 5, .localWorldSize = 8,
                               .groupRank = 1, .groupWorldSize = 2},
                              "trainer", "gpu-07", 4242, 3};

std::string fromTorch(const std::string& t, std::vector<std::string>* unknown = nullptr) {
  std::vector<std::string> names;
  std::string out = ddp::fromTorchTemplate(t, names);
  if (unknown) *unknown = names;
  return out;
}

std::string torch(const std::string& t) { return formatLogPrefix(fromTorch(t), kWorker); }

}  // namespace

TEST_CASE("ddprun's syntax: every variable, literal braces, unknown names kept", "[cli][log_prefix]") {
  CHECK(formatLogPrefix("[{role}{rank}]:", kWorker) == "[trainer13]:");
  CHECK(formatLogPrefix("{host}/{node_rank}/{local_rank}/{pid}/{restart_count}> ", kWorker) ==
        "gpu-07/1/5/4242/3> ");
  CHECK(formatLogPrefix("{{rank}}={rank}", kWorker) == "{rank}=13");
  CHECK(formatLogPrefix("{nope}{rank}{ }{", kWorker) == "{nope}13{ }{");
  CHECK(ddp::unknownVariables("{nope}{rank}{{x}}{other}") == std::vector<std::string>{"nope", "other"});
  CHECK(ddp::unknownVariables("[{role}{rank}]:").empty());
}

TEST_CASE("torchrun's template: ${name} and $name of torch's names and the added ones", "[cli][log_prefix]") {
  CHECK(torch("[${role_name}${rank}|${local_rank}]") == "[trainer13|5]");
  CHECK(torch("${hostname}:${rank}:${pid}: ") == "gpu-07:13:4242: ");
  CHECK(torch("$hostname:$rank g$group_rank a$restart_count ") == "gpu-07:13 g1 a3 ");
  // string.Template rules: "$$" is '$', identifiers are greedy, anything else stays.
  CHECK(torch("$$rank $rankx ${rank}x $ ${ ${1} {rank}") == "$rank $rankx 13x $ ${ ${1} {rank}");
  std::vector<std::string> unknown;
  CHECK(formatLogPrefix(fromTorch("${host}:${rank}:$node_rank", &unknown), kWorker) ==
        "${host}:13:$node_rank");
  CHECK(unknown == std::vector<std::string>{"host", "node_rank"});  // ddprun's names, not torch's
  CHECK(fromTorch("[${role_name}${rank}]:") == "[{role}{rank}]:");
}

TEST_CASE("an unknown variable is one warning naming it, the template unchanged", "[cli][log_prefix]") {
  auto c = cli_test::parse({"x"}, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "${hostname}:${rnk}: "}});
  CHECK(c.logPrefix == "{host}:${{rnk}}: ");
  REQUIRE(c.warnings.size() == 1);
  CHECK_THAT(c.warnings[0], Catch::Contains("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: unknown variable(s) rnk"));
  auto d = cli_test::parse({"--log-prefix={hots}|{rank}", "x"});
  REQUIRE(d.warnings.size() == 1);
  CHECK_THAT(d.warnings[0], Catch::Contains("--log-prefix: unknown variable(s) hots") &&
                                Catch::Contains("{pid}"));
  CHECK(cli_test::parse({"--log-prefix={host}:{pid}:", "x"}).warnings.empty());
  // --log-prefix wins over torchrun's variable.
  CHECK(cli_test::parse({"--log-prefix={pid}", "x"}, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "${rank}"}})
            .logPrefix == "{pid}");
}
