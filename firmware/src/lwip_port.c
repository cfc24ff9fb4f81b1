// lwIP's platform hooks: the millisecond clock and random numbers.
#include <stdint.h>

#include "board.h"
#include "lwip/sys.h"

u32_t sys_now(void) { return board_ms(); }

uint32_t lwip_port_rand(void) {
  // Deterministic but varied: a xorshift seeded from the clock at first use.
  static uint32_t s;
  if (s == 0) s = (uint32_t)board_ticks() | 1u;
  s ^= s << 13;
  s ^= s >> 17;
  s ^= s << 5;
  return s;
}
