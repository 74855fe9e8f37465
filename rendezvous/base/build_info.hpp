// BuildInfo: what `ddprun --version` and `ddprund --version` print — the project's version, the
// commit the binary was built from, and the torch TCPStore dialects its store code speaks.
//
// The commit comes from a header the build rewrites only when the commit changes
// (cmake/build_commit.cmake), included by build_info.cpp alone, so a new commit recompiles one
// file. Thread safety: pure functions over constants.
#pragma once

#include <string>
#include <string_view>

namespace ddp {

// The project's version, "0.1.0" (CMake's project(VERSION)).
std::string_view buildVersion();

// The commit, "2fd8e88d1c2a", with "+dirty" when the tree had uncommitted changes; "unknown" when
// the source was no git checkout and DDP_COMMIT was not set.
std::string_view buildCommit();

// The torch TCPStore dialects spoken (served by ddprund and the agents' embedded stores; ddprun's
// client speaks v1a and v2): "1.13/2.0 (v1a), 2.1 (v1b), 2.2+ (v2)".
std::string_view spokenDialects();

// The text of --version, one fact per line:
//   ddprun 0.1.0
//   commit 2fd8e88d1c2a
//   torch TCPStore dialects: 1.13/2.0 (v1a), 2.1 (v1b), 2.2+ (v2)
std::string versionText(std::string_view program);

}  // namespace ddp
