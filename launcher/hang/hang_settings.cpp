#include "launcher/hang/hang_settings.hpp"

namespace ddp {

void addHangEnvironment(std::map<std::string, std::string>& env, const HangSettings& settings, const std::string& fifoPath) {
  if (!settings.enabled()) return;
  if (settings.wantsBeats()) env["DDP_PROGRESS_FILE"] = fifoPath;
  if (settings.fileTimer) env["TORCHELASTIC_TIMER_FILE"] = fifoPath;
  env.emplace("PYTHONFAULTHANDLER", std::string("1"));  // unless the agent's environment sets it
}

}  // namespace ddp
