#include "rendezvous/security/address_allowlist.hpp"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace asio = boost::asio;
using asio::ip::address;

namespace {

constexpr std::size_t kMaxBytes = 16;
using Bytes = std::array<unsigned char, kMaxBytes>;

unsigned widthOf(const address& a) { return a.is_v4() ? 32 : 128; }

Bytes bytesOf(const address& a) {
  Bytes out{};
  if (a.is_v4()) {
    const auto b = a.to_v4().to_bytes();
    std::copy(b.begin(), b.end(), out.begin());
  } else {
    const auto b = a.to_v6().to_bytes();
    std::copy(b.begin(), b.end(), out.begin());
  }
  return out;
}

// True when the first `bits` bits of `a` and `b` agree.
bool samePrefix(const Bytes& a, const Bytes& b, unsigned bits) {
  const unsigned whole = bits / 8;
  if (std::memcmp(a.data(), b.data(), whole) != 0) return false;
  const unsigned rest = bits % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<unsigned char>(0xFF << (8 - rest));
  return (a[whole] & mask) == (b[whole] & mask);
}

address masked(const address& a, unsigned bits) {
  Bytes b = bytesOf(a);
  const unsigned width = widthOf(a);
  for (unsigned i = bits; i < width; ++i) b[i / 8] &= static_cast<unsigned char>(~(0x80 >> (i % 8)));
  if (a.is_v4()) return asio::ip::address_v4({b[0], b[1], b[2], b[3]});
  asio::ip::address_v6::bytes_type v6{};
  std::copy(b.begin(), b.end(), v6.begin());
  return asio::ip::address_v6(v6);
}

// Number of leading one bits of a netmask.
unsigned prefixOfMask(const sockaddr* mask) {
  const unsigned char* p = nullptr;
  std::size_t n = 0;
  if (mask->sa_family == AF_INET) {
    p = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    n = 4;
  } else {
    p = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
    n = 16;
  }
  unsigned bits = 0;
  for (std::size_t i = 0; i < n; ++i) bits += static_cast<unsigned>(__builtin_popcount(p[i]));
  return bits;
}

address fromSockaddr(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(sa);
    asio::ip::address_v4::bytes_type b{};
    std::memcpy(b.data(), &v4->sin_addr, 4);
    return asio::ip::address_v4(b);
  }
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(sa);
  asio::ip::address_v6::bytes_type b{};
  std::memcpy(b.data(), &v6->sin6_addr, 16);
  return asio::ip::address_v6(b, v6->sin6_scope_id);
}

void parseEntry(AddressAllowlist& list, std::string_view entry) {
  if (entry == "any") return list.add(AddressAllowlist::any());
  if (entry == "loopback") return list.add(AddressAllowlist::loopback());
  if (entry == "local") return list.add(AddressAllowlist::localSubnets());
  const std::size_t slash = entry.find('/');
  std::string host(entry.substr(0, slash));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  const address network = asio::ip::make_address(host, ec);
  if (ec) {
    throw ConfigError("'" + std::string(entry) +
                      "' is not an address or CIDR block (like 10.0.0.0/8, ::1, any, loopback, local)");
  }
  unsigned bits = widthOf(network);
  if (slash != std::string_view::npos) {
    const std::string_view text = entry.substr(slash + 1);
    unsigned value = 0;
    const auto [ptr, err] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || err != std::errc() || ptr != text.data() + text.size() || value > bits) {
      throw ConfigError("'" + std::string(entry) + "': the prefix length must be 0.." +
                        std::to_string(bits));
    }
    bits = value;
  }
  list.add(network, bits);
}

}  // namespace

address unmapped(const address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  }
  return a;
}

AddressAllowlist AddressAllowlist::parse(std::string_view list) {
  AddressAllowlist out;
  std::size_t pos = 0;
  while (pos < list.size()) {
    const std::size_t end = std::min(list.find_first_of(",; ", pos), list.size());
    if (end > pos) parseEntry(out, list.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

AddressAllowlist AddressAllowlist::any() {
  AddressAllowlist out;
  out.add(asio::ip::address_v4::any(), 0);
  out.add(asio::ip::address_v6::any(), 0);
  return out;
}

AddressAllowlist AddressAllowlist::loopback() {
  AddressAllowlist out;
  out.add(asio::ip::address_v4::loopback(), 8);
  out.add(asio::ip::address_v6::loopback(), 128);
  return out;
}

AddressAllowlist AddressAllowlist::localSubnets() {
  AddressAllowlist out = loopback();
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_netmask == nullptr) continue;
    const int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    out.add(fromSockaddr(it->ifa_addr), prefixOfMask(it->ifa_netmask));
  }
  ::freeifaddrs(list);
  return out;
}

void AddressAllowlist::add(const address& network, unsigned prefixBits) {
  const address plain = unmapped(network);
  const unsigned bits = std::min(prefixBits, widthOf(plain));
  Block block{masked(plain, bits), bits};
  const bool known = std::any_of(blocks_.begin(), blocks_.end(), [&](const Block& b) {
    return b.prefixBits == block.prefixBits && b.network == block.network;
  });
  if (!known) blocks_.push_back(std::move(block));
}

void AddressAllowlist::add(const address& a) { add(a, widthOf(unmapped(a))); }

void AddressAllowlist::add(const AddressAllowlist& other) {
  for (const auto& b : other.blocks_) add(b.network, b.prefixBits);
}

bool AddressAllowlist::contains(const address& a) const {
  const address plain = unmapped(a);
  const Bytes bytes = bytesOf(plain);
  return std::any_of(blocks_.begin(), blocks_.end(), [&](const Block& b) {
    return b.network.is_v4() == plain.is_v4() && samePrefix(bytesOf(b.network), bytes, b.prefixBits);
  });
}

bool AddressAllowlist::isAny() const {
  return contains(asio::ip::address_v4::any()) && contains(asio::ip::make_address("::")) &&
         std::count_if(blocks_.begin(), blocks_.end(), [](const Block& b) { return b.prefixBits == 0; }) == 2;
}

std::string AddressAllowlist::describe() const {
  if (blocks_.empty()) return "none";
  if (isAny()) return "any";
  std::string out;
  for (const auto& b : blocks_) {
    if (!out.empty()) out += ", ";
    out += b.network.to_string() + "/" + std::to_string(b.prefixBits);
  }
  return out;
}

}  // namespace ddp
