// SlurmNodelist: expands Slurm hostlist expressions (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST)
// natively, without running `scontrol show hostnames`.
//
// Grammar (the subset Slurm 22.05's hostlist_create accepts, checked against scontrol):
//   list    := item { (',' | whitespace) item }        empty items are skipped
//   item    := text { '[' ranges ']' text }            no text after the last ']' (as Slurm)
//   ranges  := range { ',' range }
//   range   := digits [ '-' digits ]                    lo <= hi; width = digits of lo
// Several bracket groups expand as a cartesian product, the rightmost varying fastest:
// `a[1-2]-b[3-4]` -> a1-b3 a1-b4 a2-b3 a2-b4. Zero padding follows the low bound:
// `n[09-11]` -> n09 n10 n11, `n[1-02]` -> n1 n2. Order and duplicates are kept (`a,a` -> a a).
//
// Thread safety: pure functions, safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ddp {

// The most host names one expression may expand to; a larger one is a ConfigError (a typo such as
// `n[1-100000000]` must not exhaust memory).
inline constexpr std::size_t kMaxSlurmHosts = 1 << 20;

// Expands `nodelist` into host names in Slurm's order. An empty or all-blank list gives an empty
// vector. Does not block. Throws ConfigError naming the expression and the offending part for
// unbalanced or nested brackets, an empty or non-numeric range, hi < lo, text after the last
// bracket group, or more than kMaxSlurmHosts names.
std::vector<std::string> expandSlurmNodelist(std::string_view nodelist);

// The first host of `nodelist` (the rendezvous host under Slurm). Validates the whole expression.
// Throws ConfigError as expandSlurmNodelist, and when the list is empty.
std::string firstSlurmHost(std::string_view nodelist);

}  // namespace ddp
