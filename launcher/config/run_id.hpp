// randomRunId: the run id a standalone job gets when it names none (torchrun's uuid4), made in one
// place for the command line and the agent.
//
// Thread safety: safe from any thread (each call seeds its own generator from std::random_device).
#pragma once

#include <string>

namespace ddp {

// A fresh RFC 4122 version-4 uuid, "xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx" (lower-case hex).
// Never throws unless std::random_device does (no entropy source).
std::string randomRunId();

}  // namespace ddp
