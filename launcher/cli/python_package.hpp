// Where the ddprun Python package is, for the workers' PYTHONPATH (docs/python.md): beside the
// ddprun executable, so that a worker imports the package of the agent that started it.
//
//   <bin>/../python/ddprun             the build tree (CMake links build/python/ddprun to
//                                      worker_runtime/python/ddprun)
//   <bin>/../lib/ddprun/python/ddprun  an installed ddprun (cmake/DdpInstall.cmake, <prefix>/bin):
//                                      a link to <prefix>/lib/python3/dist-packages/ddprun, where
//                                      Debian's python3 finds it too (the .deb's prefix is /usr)
//
// Never the dist-packages folder itself: that would put every system package ahead of a venv's
// own. Neither found: the workers' PYTHONPATH is the agent's, and `import ddprun` works where the
// interpreter has the package (dist-packages, pip).
// Thread safety: reads the file system only; no shared state.
#pragma once

#include <string>

namespace ddp::detail {

// The folder that holds ddprun/__init__.py among the candidates above, first match, lexically
// normal ("/opt/x/lib/ddprun/python"); "" when none has it or `exeDir` is "". Does not throw.
std::string findPythonPackage(const std::string& exeDir);

// The folder of the running executable (/proc/self/exe resolved); "" when unknown. Does not throw.
std::string executableDir();

}  // namespace ddp::detail
