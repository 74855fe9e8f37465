// DurabilityOptions: whether and how a StoreServer keeps its data across its own restart
// (ddprund --data-dir, --fsync). Without a data directory the server is purely in memory.
#pragma once

#include <cstddef>
#include <string>

namespace ddp {

// When a mutation counts as durable, i.e. when its reply (and any reply that could reveal it) is
// released to clients.
enum class FsyncMode {
  kAlways,  // after fdatasync of that mutation's own record (one sync per record)
  kBatch,   // after one fdatasync that covers every record written since the last (group commit)
  kOff,     // after write(2) to the page cache: survives a kill -9 of the daemon, not a crash of
            // the machine
};

struct DurabilityOptions {
  // The data directory (created if missing, locked against a second daemon); empty: in memory.
  std::string dataDir;
  FsyncMode fsync = FsyncMode::kBatch;
  // A snapshot is written (and the older journal dropped) once the journal has grown by this
  // many bytes and by more than the last snapshot's size.
  std::size_t compactAfterBytes = 64u << 20;
};

}  // namespace ddp
