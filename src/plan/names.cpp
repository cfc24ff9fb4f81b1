#include "plan/names.h"

#include "plan/plan.h"

namespace ts::plan {

static_assert(std::size(kRoutes) == 2 && int(Route::Relay) == 0 && int(Route::Direct) == 1,
              "kRoutes follows the Route enum");

const char* route_name(Route r) { return kRoutes[size_t(r)].name; }

Route parse_route(const std::string& s) {
  for (size_t i = 0; i < std::size(kRoutes); ++i)
    if (s == kRoutes[i].name) return Route(i);
  throw Error("unknown route '" + s + "' (expected " + join_names(kRoutes) + ")");
}

}  // namespace ts::plan
