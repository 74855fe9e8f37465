#include "rendezvous/security/token.hpp"

#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {
namespace {

using Digest = std::array<unsigned char, EVP_MAX_MD_SIZE>;

bool sha256(std::string_view text, Digest& out) {
  unsigned int size = 0;
  return EVP_Digest(text.data(), text.size(), out.data(), &size, EVP_sha256(), nullptr) == 1 &&
         size == 32;
}

std::string trimmed(const std::string& line) {
  const char* space = " \t\r\n\f\v";
  const std::size_t begin = line.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  return line.substr(begin, line.find_last_not_of(space) - begin + 1);
}

}  // namespace

std::string readTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read the token file '" + path + "': " + std::strerror(errno));
  std::string line;
  std::getline(in, line);
  if (in.bad()) throw ConfigError("cannot read the token file '" + path + "'");
  const std::string token = trimmed(line);
  if (token.empty()) throw ConfigError("the token file '" + path + "' holds no token (first line empty)");
  if (token.size() > kMaxTokenBytes) {
    throw ConfigError("the token in '" + path + "' is longer than " +
                      std::to_string(kMaxTokenBytes) + " bytes");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    logger("rdzv")->warn("the token file '{}' may be read by other users (mode {:o}); chmod 600 it",
                         path, st.st_mode & 0777);
  }
  return token;
}

bool tokensEqual(std::string_view presented, std::string_view expected) {
  Digest a{}, b{};
  if (!sha256(presented, a) || !sha256(expected, b)) return false;
  return CRYPTO_memcmp(a.data(), b.data(), 32) == 0;
}

}  // namespace ddp
