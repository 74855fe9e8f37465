// Standby processes (ddprun --standby-workers; docs/recovery.md, "Standby processes").
//
// Under --restart-scope=failed a ddprun agent keeps a standby process beside its workers: the
// workers' own program and arguments, started ahead of any failure with DDP_STANDBY naming a FIFO
// and without the rank variables (RANK, WORLD_SIZE, MASTER_ADDR, ...). The program does what does
// not depend on its rank (its libraries are loaded; it reads its config and data, builds its
// model), then calls awaitStandbyAssignment(), which blocks until the agent hands the process the
// complete environment of a failed worker's replacement. From then on the process is that
// replacement, with torchrun's env contract, and the agent watches it as the worker of that rank.
//
// A program says that it can wait as a standby by calling awaitStandbyAssignment() (a worker that
// is not a standby returns at once); ElasticGroup tells the agents so together with its in-place
// announcement, and an agent starts standby processes only once every worker of the generation
// did. A program that never calls it never gets a standby.
//
// The agent's message on the FIFO: rendezvous/quorum/standby_message.hpp.
//
// Thread safety: call from the main thread before starting threads that read the environment.
#pragma once

namespace ddp {

// True when DDP_STANDBY is set: this process was started as a standby.
bool startedAsStandby();

// Returns false at once when this process is not a standby. Otherwise blocks until the agent
// assigns it (no time limit: the agent SIGKILLs a standby it no longer needs, and its death kills
// the standby), replaces the whole environment with the one received and returns true. Throws
// ConfigError when the FIFO cannot be read or the message is malformed, with the environment
// unchanged: the process should exit (before it was taken, the agent logs it and starts another
// standby; after, it is a replacement that failed). Either way marks the process as able to wait
// as a standby.
bool awaitStandbyAssignment();

// True once awaitStandbyAssignment() was called in this process (ElasticGroup announces it).
bool standbyCapable();

}  // namespace ddp
