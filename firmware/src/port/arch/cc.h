// lwIP compiler/platform glue for the bare-metal Cortex-M7 build.
#pragma once

#include <stdint.h>

#include "semihost.h"

#define LWIP_PLATFORM_DIAG(x) do { ts_log x; } while (0)
#define LWIP_PLATFORM_ASSERT(x) do { ts_log("FATAL: lwIP assertion \"%s\" at %s:%d\n", x, __FILE__, __LINE__); sh_exit(5); } while (0)

// Random numbers for TCP initial sequence numbers and ports.
uint32_t lwip_port_rand(void);
#define LWIP_RAND() lwip_port_rand()

#define LWIP_ERRNO_STDINCLUDE 1
