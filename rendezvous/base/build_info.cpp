#include "rendezvous/base/build_info.hpp"

#include "ddp_build_commit.hpp"
#include "ddp_version.hpp"

namespace ddp {

std::string_view buildVersion() { return DDP_VERSION_STRING; }

std::string_view buildCommit() { return DDP_BUILD_COMMIT; }

std::string_view spokenDialects() {
  // The dialects of rendezvous/wire/wire_codec.hpp (Dialect), by the torch versions that speak them.
  return "1.13/2.0 (v1a), 2.1 (v1b), 2.2+ (v2)";
}

std::string versionText(std::string_view program) {
  std::string text(program);
  text.append(" ").append(buildVersion()).append("\n");
  text.append("commit ").append(buildCommit()).append("\n");
  text.append("torch TCPStore dialects: ").append(spokenDialects()).append("\n");
  return text;
}

}  // namespace ddp
