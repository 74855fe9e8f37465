// Helpers shared by the trainer tests: scratch directories under $DDP_TEST_TMP.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace ddp::test {

// A fresh, empty directory $DDP_TEST_TMP/<name> (or /tmp/ddp-trainer-test/<name>).
inline std::filesystem::path scratchDir(const std::string& name) {
  const char* base = std::getenv("DDP_TEST_TMP");
  std::filesystem::path dir = base ? base : "/tmp/ddp-trainer-test";
  dir /= name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace ddp::test
