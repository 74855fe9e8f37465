// Prints the SlurmContext ddprun derives from this process's SLURM_* environment, one line:
// "inSlurm=1 inStep=1 nnodes=4 nodeRank=2 localTask=0 firstHost=n1 runId=5.0 port=29605 hosts=n1,n2,n3,n4"
// Run under srun by slurm_context_test.sh to check the parser against the environment real Slurm
// sets. Exit status 2 with the error on stderr when detection throws.
#include <iostream>

#include "launcher/cli/slurm_env.hpp"
#include "rendezvous/base/error.hpp"

int main() {
  try {
    ddp::SlurmContext c = ddp::slurmContextFromEnvironment();
    std::string hosts;
    for (const std::string& host : c.hosts) hosts += (hosts.empty() ? "" : ",") + host;
    std::cout << "inSlurm=" << c.inSlurm << " inStep=" << c.inStep << " nnodes=" << c.nnodes
              << " nodeRank=" << c.nodeRank << " localTask=" << c.localTask
              << " firstHost=" << c.firstHost << " runId=" << c.runId << " port=" << c.port
              << " hosts=" << hosts << "\n";
    return 0;
  } catch (const ddp::Error& e) {
    std::cerr << "slurm_context_dump: " << e.what() << "\n";
    return 2;
  }
}
