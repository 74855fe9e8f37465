// TempDir: a fresh directory under $DDP_TEST_TMP (else /tmp), removed with everything in it.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace ddp::test {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("DDP_TEST_TMP");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/ddp-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace ddp::test
