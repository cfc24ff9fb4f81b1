// Where the project's files are: the folder holding models/ and data/ (and
// the firmware image), found from $TINYSPLIT_HOME, else from the running
// executable's folder upwards, else from the current folder upwards, else
// the source tree the binary was built from (TS_BUILD_SOURCE_DIR).
#pragma once

#include <string>

namespace ts {

std::string project_home();

}  // namespace ts
