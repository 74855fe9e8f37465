// writeErrorFile (torchelastic error.json format) and runWorkerMain (exit codes + error file).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "rendezvous/base/error.hpp"
#include "worker_runtime/error_file.hpp"
#include "worker_runtime/worker_main.hpp"

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  const char* tmp = std::getenv("DDP_TEST_TMP");
  fs::path dir = fs::path(tmp != nullptr ? tmp : fs::temp_directory_path().string()) /
                 "error_file_test";
  fs::create_directories(dir);
  fs::path path = dir / name;
  fs::remove_all(path);
  return path;
}

nlohmann::json readJson(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// Sets TORCHELASTIC_ERROR_FILE for one test, restoring the previous value afterwards.
class ErrorFileEnv {
 public:
  explicit ErrorFileEnv(const std::string& value) {
    if (const char* old = std::getenv("TORCHELASTIC_ERROR_FILE")) old_ = old;
    ::setenv("TORCHELASTIC_ERROR_FILE", value.c_str(), 1);
  }
  ~ErrorFileEnv() {
    if (old_.empty()) {
      ::unsetenv("TORCHELASTIC_ERROR_FILE");
    } else {
      ::setenv("TORCHELASTIC_ERROR_FILE", old_.c_str(), 1);
    }
  }

 private:
  std::string old_;
};

}  // namespace

TEST_CASE("the error file has torchelastic's layout", "[error_file]") {
  auto path = scratch("nested/dir/error.json");
  ddp::writeErrorFile(path.string(), "ddp::CommError: allreduce timed out", "line 1\nline 2",
                      1700000000);
  auto doc = readJson(path);
  REQUIRE(doc.is_object());
  REQUIRE(doc.size() == 1);
  const auto& message = doc.at("message");
  CHECK(message.at("message") == "ddp::CommError: allreduce timed out");
  CHECK(message.at("extraInfo").at("py_callstack") == "line 1\nline 2");
  // torch writes the timestamp as a string of integer seconds.
  CHECK(message.at("extraInfo").at("timestamp") == "1700000000");
  CHECK_FALSE(message.at("extraInfo").contains("step"));
  // The step, when given (worker_runtime's last reportProgress, for ddprun's verdict).
  ddp::writeErrorFile(path.string(), "X: y", "", 1, 3, 41);
  CHECK(readJson(path).at("message").at("extraInfo").at("step") == "41");
  // Nothing but the file itself is left behind (the temporary was renamed).
  CHECK(std::distance(fs::directory_iterator(path.parent_path()), fs::directory_iterator()) == 1);
}

TEST_CASE("the error file replaces an older one", "[error_file]") {
  auto path = scratch("error.json");
  ddp::writeErrorFile(path.string(), "A: first", "", 1);
  ddp::writeErrorFile(path.string(), "B: second", "", 2);
  CHECK(readJson(path).at("message").at("message") == "B: second");
}

TEST_CASE("an unwritable error file path throws ddp::Error naming it", "[error_file]") {
  auto blocker = scratch("blocker");
  std::ofstream(blocker) << "a file, not a folder";
  auto path = blocker / "error.json";
  CHECK_THROWS_WITH(ddp::writeErrorFile(path.string(), "X: y", ""), Catch::Contains("blocker"));
}

TEST_CASE("describeException and exceptionChain name the type and nested causes",
          "[error_file]") {
  try {
    try {
      throw ddp::TimeoutError("store get timed out");
    } catch (...) {
      std::throw_with_nested(ddp::CommError("building the communicator failed"));
    }
  } catch (const std::exception& e) {
    CHECK(ddp::describeException(e) == "ddp::CommError: building the communicator failed");
    auto chain = ddp::exceptionChain(std::current_exception());
    CHECK_THAT(chain, Catch::Contains("ddp::CommError: building the communicator failed\n"));
    CHECK_THAT(chain, Catch::Contains("ddp::TimeoutError: store get timed out\n"));
  }
}

TEST_CASE("runWorkerMain passes the worker's own exit code through", "[worker_main]") {
  auto path = scratch("ok.json");
  ErrorFileEnv env(path.string());
  char arg0[] = "worker";
  char* argv[] = {arg0, nullptr};
  CHECK(ddp::runWorkerMain(1, argv, [](int argc, char** args) {
          return argc == 1 && std::string(args[0]) == "worker" ? 0 : 9;
        }) == 0);
  CHECK(ddp::runWorkerMain(1, argv, [](int, char**) { return 7; }) == 7);
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("runWorkerMain maps exceptions to documented codes and writes the error file",
          "[worker_main]") {
  struct Case {
    std::function<int(int, char**)> fn;
    int code;
    const char* message;
  };
  const Case cases[] = {
      {[](int, char**) -> int { throw ddp::CommError("allreduce timed out"); }, ddp::kExitCommError,
       "ddp::CommError: allreduce timed out"},
      {[](int, char**) -> int { throw ddp::ConfigError("RANK='x' is not an integer"); },
       ddp::kExitConfigError, "ddp::ConfigError: RANK='x' is not an integer"},
      {[](int, char**) -> int { throw ddp::TimeoutError("no store"); }, ddp::kExitStoreError,
       "ddp::TimeoutError: no store"},
      {[](int, char**) -> int { throw ddp::NetworkError("reset"); }, ddp::kExitStoreError,
       "ddp::NetworkError: reset"},
      {[](int, char**) -> int { throw std::out_of_range("index 9"); }, ddp::kExitFailure,
       "std::out_of_range: index 9"},
      {[](int, char**) -> int { throw 42; }, ddp::kExitFailure, "unknown exception"},
  };
  int i = 0;
  for (const auto& c : cases) {
    auto path = scratch("case" + std::to_string(i++) + ".json");
    ErrorFileEnv env(path.string());
    INFO(c.message);
    CHECK(ddp::runWorkerMain(0, nullptr, c.fn) == c.code);
    auto doc = readJson(path);
    CHECK_THAT(doc.at("message").at("message").get<std::string>(), Catch::StartsWith(c.message));
    CHECK_FALSE(doc.at("message").at("extraInfo").at("timestamp").get<std::string>().empty());
  }
}

TEST_CASE("the exit codes are distinct and non-zero", "[worker_main]") {
  const int codes[] = {ddp::kExitFailure, ddp::kExitConfigError, ddp::kExitCommError,
                       ddp::kExitStoreError};
  for (int a : codes) {
    CHECK(a != 0);
    CHECK(std::count(std::begin(codes), std::end(codes), a) == 1);
  }
}
