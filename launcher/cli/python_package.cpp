#include "launcher/cli/python_package.hpp"

#include <filesystem>
#include <system_error>

namespace ddp::detail {

namespace fs = std::filesystem;

std::string findPythonPackage(const std::string& exeDir) {
  if (exeDir.empty()) return "";
  const fs::path bin(exeDir);
  for (const fs::path& candidate : {bin / ".." / "python", bin / ".." / "lib" / "ddprun" / "python"}) {
    std::error_code ec;
    if (fs::is_regular_file(candidate / "ddprun" / "__init__.py", ec)) {
      return candidate.lexically_normal().string();
    }
  }
  return "";
}

std::string executableDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "" : exe.parent_path().string();
}

}  // namespace ddp::detail
