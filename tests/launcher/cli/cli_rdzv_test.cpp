// The rendezvous settings of the command line: torchrun's liveness defaults resolved once, every
// --rdzv-conf key typed at start-up (unknown ones refused), the run id a multi-node job needs,
// and --dry-run showing the resolved values.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "launcher/rendezvous/rendezvous_setup.hpp"
#include "tests/launcher/cli_test_util.hpp"

using namespace std::chrono_literals;
using cli_test::Env;
using cli_test::errorOf;
using cli_test::parse;
using Catch::Contains;

namespace {

const std::vector<std::string> kC10d = {"--rdzv-backend=c10d", "--rdzv-endpoint=head:29400"};

ddp::LaunchConfig c10d(std::vector<std::string> more) {
  std::vector<std::string> args = kC10d;
  args.insert(args.end(), more.begin(), more.end());
  args.push_back("train.py");
  return parse(args);
}

}  // namespace

TEST_CASE("heartbeat_timeout defaults to keep_alive_interval x keep_alive_max_attempt", "[cli][rdzv]") {
  auto c = c10d({});
  CHECK(c.rdzv.keepAliveInterval == 5s);
  CHECK(c.rdzv.keepAliveMaxAttempt == 3);
  CHECK(c.rdzv.heartbeatTimeout == 15s);  // torchrun's 5 s x 3, resolved here, never left 0
  CHECK(c10d({"--rdzv-conf=keep_alive_interval=0.5,keep_alive_max_attempt=3"}).rdzv.heartbeatTimeout == 1500ms);
  CHECK(c10d({"--rdzv-conf=keep_alive_interval=10"}).rdzv.heartbeatTimeout == 30s);
  CHECK(c10d({"--rdzv-conf=keep_alive_max_attempt=5"}).rdzv.heartbeatTimeout == 25s);
  CHECK(c10d({"--rdzv-conf=heartbeat_timeout=20,keep_alive_interval=2"}).rdzv.heartbeatTimeout == 20s);
}

TEST_CASE("a heartbeat_timeout not above keep_alive_interval is a start-up error", "[cli][rdzv]") {
  CHECK_THAT(errorOf({"--rdzv-conf=heartbeat_timeout=5", "x"}),
             Contains("heartbeat_timeout=5 s must be greater than keep_alive_interval=5 s"));
  CHECK_THAT(errorOf({"--rdzv-conf=keep_alive_interval=10,heartbeat_timeout=2", "x"}),
             Contains("heartbeat_timeout=2 s must be greater than keep_alive_interval=10 s"));
  CHECK_THAT(errorOf({"--rdzv-conf=keep_alive_max_attempt=1", "x"}),
             Contains("keep_alive_max_attempt=1 makes heartbeat_timeout equal keep_alive_interval"));
  CHECK_THAT(errorOf({"x"}, {{"PET_RDZV_CONF", "heartbeat_timeout=250ms,keep_alive_interval=0.5"}}),
             Contains("PET_RDZV_CONF"));
  CHECK_THAT(errorOf({"--rdzv-conf=keep_alive_interval=0", "x"}), Contains("keep_alive_interval=0: must be > 0"));
}

TEST_CASE("config.rdzv is the complete RendezvousSettings the agent passes on", "[cli][rdzv]") {
  auto c = parse({"--nnodes=2:4", "--max-restarts=3", "--rdzv-id=job7", "--rdzv-backend=c10d",
                  "--rdzv-endpoint=head", "--rdzv-conf=join_timeout=90,last_call_timeout=2,close_timeout=7", "x"});
  CHECK(c.rdzv.runId == "job7");
  CHECK(c.rdzv.minNodes == 2);
  CHECK(c.rdzv.maxNodes == 4);
  CHECK(c.rdzv.maxRestarts == 3);
  CHECK(c.rdzv.joinTimeout == 90s);
  CHECK(c.rdzv.lastCallTimeout == 2s);
  CHECK(c.rdzv.closeTimeout == 7s);
  auto s = ddp::rendezvousSettingsFrom(c, "job7");
  CHECK(s.heartbeatTimeout == 15s);
  CHECK(s.joinTimeout == 90s);
  CHECK(s.maxNodes == 4);
}

TEST_CASE("join_timeout defaults per backend: 600 s dynamic, 900 s static and legacy etcd", "[cli][rdzv]") {
  CHECK(c10d({}).rdzv.joinTimeout == 600s);
  auto backend = [](const char* name) {
    return parse({std::string("--rdzv-backend=") + name, "--nnodes=2", "--rdzv-id=j", "--master-addr=h", "x"});
  };
  CHECK(backend("etcd-v2").rdzv.joinTimeout == 600s);
  CHECK(backend("etcd").rdzv.joinTimeout == 900s);  // torchrun injects timeout=900 for it
  CHECK(backend("static").rdzv.joinTimeout == 900s);
  CHECK(backend("etcd").rdzvBackend == ddp::RdzvBackend::kEtcd);
  CHECK(backend("etcd-v2").rdzvBackend == ddp::RdzvBackend::kEtcdV2);
  // The user's value wins whatever the backend; "timeout" counts when join_timeout is absent.
  CHECK(parse({"--rdzv-backend=etcd", "--rdzv-conf=timeout=120", "x"}).rdzv.joinTimeout == 120s);
  CHECK(parse({"--rdzv-backend=etcd", "--rdzv-conf=timeout=120,join_timeout=5", "x"}).rdzv.joinTimeout == 5s);
}

TEST_CASE("every --rdzv-conf key is checked at start-up with one duration grammar", "[cli][rdzv]") {
  // exit_barrier_timeout used to be read only after a successful job, with another grammar.
  CHECK(c10d({"--rdzv-conf=exit_barrier_timeout=500ms"}).rdzvConf.exitBarrierTimeout == 500ms);
  CHECK(c10d({}).rdzvConf.exitBarrierTimeout == 300s);
  CHECK_THAT(errorOf({"--rdzv-conf=exit_barrier_timeout=soon", "x"}), Contains("exit_barrier_timeout=soon"));
  CHECK(c10d({"--rdzv-conf=request_timeout=250ms,retry_timeout=1.5s"}).rdzvConf.etcdRetryTimeout == 1500ms);
  // Connecting gives up after read_timeout, or join_timeout when that is shorter.
  CHECK(c10d({}).rdzvConf.connectTimeout == 60s);
  CHECK(c10d({"--rdzv-conf=read_timeout=5"}).rdzvConf.connectTimeout == 5s);
  CHECK(c10d({"--rdzv-conf=join_timeout=3"}).rdzvConf.connectTimeout == 3s);
}

TEST_CASE("repeated --rdzv-conf flags merge, later keys win; PET_RDZV_CONF only without a flag", "[cli][rdzv]") {
  auto merged = c10d({"--rdzv-conf=join_timeout=1500", "--rdzv-conf=last_call_timeout=60"});
  CHECK(merged.rdzv.joinTimeout == 1500s);
  CHECK(merged.rdzv.lastCallTimeout == 60s);
  auto later = c10d({"--rdzv-conf", "join_timeout=1500,read_timeout=5", "--rdzv_conf=join_timeout=20"});
  CHECK(later.rdzv.joinTimeout == 20s);
  CHECK(later.rdzvConf.readTimeout == 5s);
  // Keys checked together: tls_cert in one flag, the tls_ca it needs in another.
  auto tls = c10d({"--rdzv-conf=tls_cert=c.pem,tls_key=k.pem", "--rdzv-conf=tls_ca=ca.pem"});
  CHECK(tls.rdzvConf.tls.enabled());
  CHECK(c10d({"--rdzv-conf=join_timeout=30", "--rdzv-conf="}).rdzv.joinTimeout == 30s);
  // A syntax error names the flag value at fault.
  CHECK_THAT(errorOf({"--rdzv-conf=join_timeout=30", "--rdzv-conf=last_call_timeout", "x"}),
             Contains("--rdzv-conf 'last_call_timeout': option 'last_call_timeout' must have a value"));
  // The command line wins over the variable, as for every option (torchrun's precedence).
  const Env pet = {{"PET_RDZV_CONF", "join_timeout=1500,last_call_timeout=60"}};
  auto fromEnv = parse({"--rdzv-backend=c10d", "--rdzv-endpoint=head", "x"}, pet);
  CHECK(fromEnv.rdzv.joinTimeout == 1500s);
  CHECK(fromEnv.rdzv.lastCallTimeout == 60s);
  auto flagWins = parse({"--rdzv-backend=c10d", "--rdzv-endpoint=head", "--rdzv-conf=close_timeout=7",
                         "--rdzv-conf=read_timeout=9", "x"}, pet);
  CHECK(flagWins.rdzv.closeTimeout == 7s);
  CHECK(flagWins.rdzvConf.readTimeout == 9s);
  CHECK(flagWins.rdzv.joinTimeout == 600s);  // PET_RDZV_CONF is not read
  CHECK_THAT(errorOf({"--rdzv-backend=c10d", "x"}, {{"PET_RDZV_CONF", "join_timeout=soon"}}),
             Contains("PET_RDZV_CONF 'join_timeout=soon'"));
}

TEST_CASE("unknown --rdzv-conf keys are errors that name the known ones", "[cli][rdzv]") {
  const std::string e = errorOf({"--rdzv-conf=join_timeout=5,jion_timeout=9", "x"});
  CHECK_THAT(e, Contains("--rdzv-conf 'join_timeout=5,jion_timeout=9': unknown key 'jion_timeout'"));
  CHECK_THAT(e, Contains("known: join_timeout, timeout, last_call_timeout"));
  CHECK_THAT(e, Contains("keep_alive_max_attempt") && Contains("exit_barrier_timeout"));
  // torchrun's keys of other backends still parse (store_type, use_libuv, rank have no effect).
  CHECK_NOTHROW(c10d({"--rdzv-conf=store_type=tcp,use_libuv=0,rank=0,timeout=60,read_timeout=30"}));
  CHECK_THAT(errorOf({"--rdzv-conf=store_type=file", "x"}), Contains("store_type=file: only tcp"));
  CHECK_THAT(errorOf({"--rdzv-conf=protocol=grpc", "x"}), Contains("protocol=grpc: must be http or https"));
}

TEST_CASE("the security keys: token_file, tls_*, torchrun's TLS names, store_allow", "[cli][rdzv]") {
  auto c = c10d({"--rdzv-conf=token_file=/t,tls_ca=/ca.pem,tls_cert=/c.pem,tls_key=/c.key"});
  CHECK(c.rdzvConf.tokenFile == "/t");
  CHECK(c.rdzvConf.tls.caFile == "/ca.pem");
  CHECK(c.rdzvConf.tls.certFile == "/c.pem");
  CHECK(c.rdzvConf.tls.keyFile == "/c.key");
  CHECK(c.rdzvConf.protocol == "https");
  // torchrun's etcd names; the tls_* key wins over its alias.
  auto etcd = parse({"--rdzv-backend=etcd", "--rdzv-conf=protocol=https,cacert=/a.pem,cert=/b.pem,key=/b.key", "x"});
  CHECK(etcd.rdzvConf.tls.caFile == "/a.pem");
  CHECK(etcd.rdzvConf.tls.keyFile == "/b.key");
  auto v2 = parse({"--rdzv-conf=ca_cert=/a.pem,ssl_cert=/b.pem,ssl_cert_key=/b.key,tls_ca=/win.pem", "x"});
  CHECK(v2.rdzvConf.tls.caFile == "/win.pem");
  CHECK(v2.rdzvConf.tls.certFile == "/b.pem");
  CHECK_THAT(errorOf({"--rdzv-conf=protocol=https", "x"}), Contains("protocol=https needs tls_ca="));
  CHECK_THAT(errorOf({"--rdzv-conf=protocol=http,tls_ca=/ca.pem", "x"}), Contains("contradicts"));
  CHECK_THAT(errorOf({"--rdzv-conf=tls_ca=/ca.pem,tls_cert=/c.pem", "x"}), Contains("go together"));
  CHECK_THAT(errorOf({"--rdzv-conf=tls_cert=/c.pem,tls_key=/c.key", "x"}), Contains("tls_cert needs tls_ca"));
  CHECK_THAT(errorOf({"--rdzv-conf=token_file=", "x"}), Contains("token_file' must have a value"));
  // The token file also comes from DDP_RDZV_TOKEN_FILE; the key wins.
  CHECK(parse({"x"}, {{"DDP_RDZV_TOKEN_FILE", "/env"}}).rdzvConf.tokenFile == "/env");
  CHECK(parse({"--rdzv-conf=token_file=/key", "x"}, {{"DDP_RDZV_TOKEN_FILE", "/env"}}).rdzvConf.tokenFile == "/key");
  auto allow = c10d({"--rdzv-conf=store_allow=10.1.0.0/16;192.168.0.5"});
  CHECK(allow.rdzvConf.storeAllow.describe() == "10.1.0.0/16, 192.168.0.5/32");
  CHECK_THAT(errorOf({"--rdzv-conf=store_allow=10.1.0.0/99", "x"}), Contains("store_allow=10.1.0.0/99"));
}

TEST_CASE("etcd's --rdzv-conf keys", "[cli][rdzv][etcd]") {
  auto c = parse({"--rdzv-backend=etcd", "--rdzv-conf",
                  "protocol=HTTP,etcd_prefix=/job7,request_timeout=1.5,retry_timeout=60", "x"});
  CHECK(c.rdzvConf.protocol == "http");
  CHECK(c.rdzvConf.etcdPrefix == "/job7/");
  CHECK(c.rdzvConf.etcdRequestTimeout == 1500ms);
  CHECK(c.rdzvConf.etcdRetryTimeout == 60s);
  auto d = parse({"--rdzv-backend=etcd", "x"});  // EtcdStoreOptions' own defaults
  CHECK(d.rdzvConf.etcdPrefix == ddp::EtcdStoreOptions{}.prefix);
  CHECK(d.rdzvConf.etcdRequestTimeout == ddp::EtcdStoreOptions{}.requestTimeout);
  CHECK(d.rdzvConf.etcdRetryTimeout == ddp::EtcdStoreOptions{}.retryTimeout);
  CHECK_THAT(errorOf({"--rdzv-backend=etcd", "--rdzv-conf=request_timeout=soon", "x"}),
             Contains("request_timeout=soon"));
  CHECK_THAT(errorOf({"--rdzv-backend=etcd", "--rdzv-conf=retry_timeout=0", "x"}), Contains("must be > 0"));
}

TEST_CASE("no run id is torchrun's none on every backend; a multi-node job takes its scheduler's", "[cli][rdzv]") {
  const std::vector<std::string> multi = {"--nnodes=2:4", "--rdzv-backend=c10d", "--rdzv-endpoint=head", "x"};
  auto none = parse(multi);  // Kubeflow v1's elastic pods: no PET_RDZV_ID
  CHECK(none.rdzvId == "none");
  CHECK(none.rdzvIdSource == "default");
  CHECK(none.rdzv.runId == "none");
  for (const char* backend : {"etcd", "etcd-v2", "c10d"}) {
    CHECK(parse({"--nnodes=3", std::string("--rdzv-backend=") + backend, "--rdzv-endpoint=head", "x"}).rdzvId == "none");
  }
  auto given = parse({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=head", "--rdzv-id=job7", "x"});
  CHECK(given.rdzvId == "job7");
  CHECK(given.rdzvIdSource == "--rdzv-id");
  auto pet = parse(multi, {{"PET_RDZV_ID", "kube"}});
  CHECK(pet.rdzvId == "kube");
  CHECK(pet.rdzvIdSource == "PET_RDZV_ID");
  CHECK(parse(multi, {{"PET_RDZV_ID", ""}}).rdzvId == "none");  // an empty variable is no id
  auto elastic = parse(multi, {{"TORCHELASTIC_RUN_ID", "te-5"}, {"SLURM_JOB_ID", ""}});
  CHECK(elastic.rdzvId == "te-5");
  CHECK(elastic.rdzvIdSource == "TORCHELASTIC_RUN_ID");
  Env batch = {{"SLURM_JOB_ID", "77"}, {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_NODEID", "0"}};
  auto slurm = parse(multi, batch);  // the batch script: no step to detect, but a job id
  CHECK(slurm.rdzvId == "77");
  CHECK(slurm.rdzvIdSource == "SLURM_JOB_ID");
  CHECK(parse({"--nnodes=2", "--master-addr=h", "--node-rank=0", "x"}).rdzvId == "none");  // static
  CHECK(parse({"--rdzv-backend=c10d", "--rdzv-endpoint=head", "x"}).rdzvId == "none");  // one node
  std::vector<std::string> noSlurm = multi;
  noSlurm.insert(noSlurm.begin(), "--no-slurm");
  CHECK(parse(noSlurm, batch).rdzvId == "none");
  std::vector<std::string> empty = multi;
  empty.insert(empty.begin(), "--rdzv-id=");  // an unset shell variable is no run id
  CHECK(parse(empty).rdzvId == "none");
  CHECK(parse(empty, {{"PET_RDZV_ID", "kube"}}).rdzvId == "kube");
}

TEST_CASE("the job fingerprint: the entry point's name and the node range, nothing per node", "[cli][rdzv]") {
  auto fp = [](std::vector<std::string> args) { return parse(args).rdzv.jobFingerprint; };
  const std::string head = "--rdzv-endpoint=head";
  CHECK(fp({"--nnodes=1:3", "--rdzv-backend=c10d", head, "train.py", "--lr=1"}) == "train.py, nnodes 1:3");
  // What may differ between the nodes of one job leaves it alone.
  CHECK(fp({"--nnodes=1:3", "--rdzv-backend=c10d", head, "--nproc-per-node=4", "--role=trainer",
            "--node-rank=2", "--local-addr=10.0.0.9", "/home/u/proj/train.py", "--out=/scratch/n2"}) ==
        "train.py, nnodes 1:3");
  CHECK(fp({"--nnodes=1:3", "--rdzv-backend=c10d", head, "-m", "pkg.train"}) == "-m pkg.train, nnodes 1:3");
  CHECK(fp({"--nnodes=2", "--rdzv-backend=c10d", head, "./bin/train", "--config", "a.json"}) == "train, nnodes 2:2");
  // Another node range or entry point is another job.
  CHECK(fp({"--nnodes=2", "--rdzv-backend=c10d", head, "train.py"}) != fp({"--nnodes=1:2", "--rdzv-backend=c10d", head, "train.py"}));
  CHECK(fp({"--nnodes=2", "--rdzv-backend=c10d", head, "a.py"}) != fp({"--nnodes=2", "--rdzv-backend=c10d", head, "b.py"}));
  const std::string longModule(2000, 'm');
  CHECK(fp({"-m", longModule}).size() <= ddp::kMaxJobFingerprint);
}

TEST_CASE("--dry-run shows the resolved rendezvous values and where they came from", "[cli][rdzv]") {
  using nlohmann::json;
  json d = json::parse(cli_test::dryRun({"--rdzv-backend=c10d", "--rdzv-endpoint=head", "x"}));
  CHECK(d["rdzv"]["heartbeat_timeout_ms"] == 15000);
  CHECK(d["rdzv"]["keep_alive_interval_ms"] == 5000);
  CHECK(d["rdzv"]["join_timeout_ms"] == 600000);
  CHECK(d["rdzv"]["connect_timeout_ms"] == 60000);
  CHECK(d["rdzv"]["exit_barrier_timeout_ms"] == 300000);
  CHECK(d["rdzv_endpoints"] == json::array({"head:29400"}));
  CHECK(d["rdzv_endpoint_source"] == "--rdzv-endpoint");
  CHECK(d["rdzv_id"] == "none");
  CHECK(d["rdzv_id_source"] == "default");
  json fast = json::parse(cli_test::dryRun(
      {"--rdzv-conf=keep_alive_interval=0.5,keep_alive_max_attempt=3", "x"}));
  CHECK(fast["rdzv"]["heartbeat_timeout_ms"] == 1500);
  CHECK(fast["rdzv_id_source"] == "random (standalone)");
  json slurm = json::parse(cli_test::dryRun({"--nnodes=3:4", "train"}, cli_test::slurmStep(2)));
  CHECK(slurm["node_order"] == 2);
  CHECK(slurm["node_rank"] == nullptr);
  CHECK(slurm["rdzv_id_source"] == "Slurm");
}
