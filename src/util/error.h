// The one error type of the host side: raised for bad input anywhere (a
// model, an image, a testbed, an option). The message is one line meant for
// the user; the CLI prints it and exits non-zero.
#pragma once

#include <stdexcept>

namespace ts {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace ts
