// AddressAllowlist: the network blocks ("10.0.0.0/8", "::1", "192.168.1.7/32") a peer's address is
// checked against before a store server serves it (ddprund --allow, --allow-unauthenticated; the
// node addresses an agent-hosted store accepts).
//
// Grammar of parse(): entries separated by commas, semicolons and/or spaces (';' where the list
// itself sits in a comma-separated --rdzv-conf); each is an IPv4 or IPv6 address
// with an optional /prefix (none = the single address), or one of the words `any` (every
// address), `loopback` (127.0.0.0/8 and ::1) and `local` (loopback plus the networks of this
// host's interfaces: its own subnets). IPv4-mapped IPv6 addresses (::ffff:10.0.0.1, what a
// dual-stack listener sees for an IPv4 peer) are matched as the IPv4 address.
//
// Thread safety: a value type; const methods are safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/address.hpp>

namespace ddp {

class AddressAllowlist {
 public:
  // Matches nothing.
  AddressAllowlist() = default;

  // Parses the grammar above. Throws ConfigError naming the bad entry.
  static AddressAllowlist parse(std::string_view list);
  // Every address.
  static AddressAllowlist any();
  // 127.0.0.0/8 and ::1.
  static AddressAllowlist loopback();
  // loopback() plus the network (address and netmask) of every interface of this host.
  static AddressAllowlist localSubnets();

  // Adds one block; `prefixBits` is clamped to the address's width.
  void add(const boost::asio::ip::address& network, unsigned prefixBits);
  // Adds the single address `address` (/32 or /128).
  void add(const boost::asio::ip::address& address);
  // Adds every block of `other`.
  void add(const AddressAllowlist& other);

  // True when some block holds `address`.
  bool contains(const boost::asio::ip::address& address) const;
  bool empty() const { return blocks_.empty(); }
  // True when it holds every address (`any`).
  bool isAny() const;
  // "127.0.0.0/8, ::1/128" (or "any"), for logs and --help.
  std::string describe() const;

 private:
  struct Block {
    boost::asio::ip::address network;  // masked to prefixBits
    unsigned prefixBits = 0;
  };
  std::vector<Block> blocks_;
};

// The address as a peer's: an IPv4-mapped IPv6 address becomes the IPv4 address.
boost::asio::ip::address unmapped(const boost::asio::ip::address& address);

}  // namespace ddp
