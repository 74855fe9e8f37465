// errorOf<E>(fn): the message of the E that fn throws; a test failure when fn throws nothing (an
// exception of another type propagates and fails the test). Catch2 assertions: include only from
// test sources.
#pragma once

#include <catch2/catch.hpp>

#include <string>

namespace ddp::testing {

template <class E, class F>
std::string errorOf(F fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception of the given type");
  return "";
}

}  // namespace ddp::testing
