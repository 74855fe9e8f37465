#include "worker_runtime/error_file.hpp"

#include <cxxabi.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <typeinfo>

#include <nlohmann/json.hpp>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

std::string demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                             std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

void appendChain(std::string& out, std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    out += describeException(e) + "\n";
    try {
      std::rethrow_if_nested(e);
    } catch (...) {
      appendChain(out, std::current_exception());
    }
  } catch (...) {
    out += "unknown exception\n";
  }
}

}  // namespace

std::string describeException(const std::exception& e) {
  std::string type = demangle(typeid(e).name());
  // std::throw_with_nested wraps the type; users care about the type they threw.
  const std::string wrapper = "std::_Nested_exception<";
  if (type.starts_with(wrapper) && type.ends_with(">")) {
    type = type.substr(wrapper.size(), type.size() - wrapper.size() - 1);
  }
  return type + ": " + e.what();
}

std::string exceptionChain(std::exception_ptr error) {
  std::string out;
  if (error) appendChain(out, error);
  return out;
}

void writeErrorFile(const std::string& path, const std::string& message,
                    const std::string& traceback, std::time_t timestamp,
                    std::optional<int64_t> failureSeq, std::optional<int64_t> step) {
  namespace fs = std::filesystem;
  nlohmann::json extra = {{"py_callstack", traceback}, {"timestamp", std::to_string(timestamp)}};
  if (failureSeq) extra["failure_seq"] = std::to_string(*failureSeq);
  if (step) extra["step"] = std::to_string(*step);
  nlohmann::json doc = {{"message", {{"message", message}, {"extraInfo", extra}}}};
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  const fs::path temp = target.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << doc.dump(2) << "\n";
    out.flush();
    if (!out) {
      fs::remove(temp, ec);
      throw Error("cannot write the error file " + temp.string());
    }
  }
  fs::rename(temp, target, ec);
  if (ec) {
    fs::remove(temp, ec);
    throw Error("cannot move the error file into place at " + path + ": " + ec.message());
  }
}

}  // namespace ddp
