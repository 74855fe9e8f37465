// The table of ddprun's flags and the CLI11 pass that turns argv into raw strings.
//
// Each flag has a torchrun "dest" (nproc_per_node), its spellings, the environment variables that
// supply it when the command line does not (PET_NPROC_PER_NODE, ...), and its help line. Values
// stay strings here; cli.cpp converts them so that a bad PET_* value and a bad flag get the same
// checks and messages.
// Thread safety: pure functions over immutable tables.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ddp::detail {

struct OptionSpec {
  std::string dest;               // torchrun's argparse dest, e.g. "nproc_per_node"
  std::vector<std::string> names;  // "-r", "--redirects"; dashed long name first
  std::vector<std::string> env;   // variables consulted in order when the flag is absent
  bool isFlag = false;            // a boolean switch (no value)
  std::string metavar;            // value placeholder in --help
  std::string help;               // one line; "(accepted, ignored)" for compatibility-only flags
  std::string section;            // --help section
};

// Every option, in --help order.
const std::vector<OptionSpec>& optionTable();

// The option with this dest; throws std::out_of_range for an unknown dest (a programming error).
const OptionSpec& optionSpec(const std::string& dest);

// The command line split by CLI11.
struct RawArgs {
  std::map<std::string, std::string> values;  // dest -> last value given ("1" for flags)
  std::map<std::string, std::vector<std::string>> every;  // dest -> each value given, in order
  std::vector<std::string> entrypoint;        // the script/program and everything after it
  bool help = false;
  bool version = false;
};

// Rewrites argparse-style abbreviations of long flags before the entry point ("--redirect=3" ->
// "--redirects=3", "--nproc 2" -> "--nproc_per_node 2") as torchrun accepts them, and marks the
// empty value of "--flag=" so that it stays a value (argparse's reading; an unset shell variable
// in practice) instead of taking the next word. Throws UsageError for an ambiguous prefix and for
// a switch given "=" ("--standalone=", as argparse). Arguments after the entry point are never
// touched.
std::vector<std::string> expandAbbreviations(const std::vector<std::string>& args);

// Splits args (argv without the program name). Throws UsageError for unknown flags, a missing
// value, or a flag given a value it cannot take. Does not check values.
RawArgs splitCommandLine(const std::vector<std::string>& args);

// The --help text, generated from the table.
std::string formatHelp();

}  // namespace ddp::detail
