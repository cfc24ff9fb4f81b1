#include "board.h"

#define REG(a) (*(volatile uint32_t*)(a))

#ifndef BOARD_TIMER_SYSTICK
// CMSDK APB timers.
#define TIMER0 0x40000000u
#define TIMER1 0x40001000u
#define T_CTRL 0x0
#define T_VALUE 0x4
#define T_RELOAD 0x8
#define T_INTCLEAR 0xC
#define T_CTRL_EN 1u
#define T_CTRL_IRQ 8u
#else
// mps3-an547 (no CMSDK timers): the clock is the SSE-300's 64-bit system
// counter, scaled to BOARD_TICK_HZ (board_config.h), and the 20 Hz wake-up
// the core's SysTick.
#define CNT_CTRL BOARD_COUNTER_BASE            // control frame
#define CNT_STATUS (BOARD_COUNTER_BASE + 0x1000u)  // status frame
#define CNTCR 0x0
#define CNTSCR 0x10
#define CNTCV_LO 0x0
#define CNTCV_HI 0x4
#define SYST_CSR 0xE000E010u
#define SYST_RVR 0xE000E014u
#define SYST_CVR 0xE000E018u
#endif

#define NVIC_ISER 0xE000E100u
#define NVIC_ICER 0xE000E180u
#define SCB_SHCSR 0xE000ED24u
#define MPU_CTRL 0xE000ED94u
#define MPU_RNR 0xE000ED98u
#define MPU_RBAR 0xE000ED9Cu
#define MPU_RASR 0xE000EDA0u  // ARMv7-M; ARMv8-M: RLAR
#define MPU_RLAR 0xE000EDA0u
#define MPU_MAIR0 0xE000EDC0u

#define STACK_PAINT 0xA5A5A5A5u
#define TICK_WAKE_HZ 20u

static volatile uint32_t g_wraps;
volatile uint32_t g_tick_flag;
static void (*g_eth_isr)(void);

#ifndef BOARD_TIMER_SYSTICK
void ts_irq_timer0(void) {
  REG(TIMER0 + T_INTCLEAR) = 1;
  g_wraps++;
}

void ts_irq_timer1(void) {
  REG(TIMER1 + T_INTCLEAR) = 1;
  g_tick_flag = 1;
}
#else
void ts_irq_systick(void) { g_tick_flag = 1; }
#endif

void ts_irq_ethernet(void) {
  if (g_eth_isr) g_eth_isr();
}

void board_set_ethernet_isr(void (*isr)(void)) { g_eth_isr = isr; }

void nvic_enable(int irq) { REG(NVIC_ISER + 4u * (unsigned)(irq / 32)) = 1u << (irq % 32); }
void nvic_disable(int irq) {
  REG(NVIC_ICER + 4u * (unsigned)(irq / 32)) = 1u << (irq % 32);
  __asm__ volatile("dsb\n isb" ::: "memory");
}

#ifndef BOARD_TIMER_SYSTICK
void board_init(void) {
  REG(TIMER0 + T_CTRL) = 0;
  REG(TIMER0 + T_RELOAD) = 0xFFFFFFFFu;
  REG(TIMER0 + T_VALUE) = 0xFFFFFFFFu;
  REG(TIMER0 + T_INTCLEAR) = 1;
  REG(TIMER0 + T_CTRL) = T_CTRL_EN | T_CTRL_IRQ;
  REG(TIMER1 + T_CTRL) = 0;
  REG(TIMER1 + T_RELOAD) = BOARD_TICK_HZ / TICK_WAKE_HZ - 1u;
  REG(TIMER1 + T_VALUE) = BOARD_TICK_HZ / TICK_WAKE_HZ - 1u;
  REG(TIMER1 + T_INTCLEAR) = 1;
  REG(TIMER1 + T_CTRL) = T_CTRL_EN | T_CTRL_IRQ;
  nvic_enable(IRQ_TIMER0);
  nvic_enable(IRQ_TIMER1);
  __asm__ volatile("cpsie i" ::: "memory");
}

uint64_t board_ticks(void) {
  uint32_t hi, lo;
  do {
    hi = g_wraps;
    lo = 0xFFFFFFFFu - REG(TIMER0 + T_VALUE);
  } while (hi != g_wraps);
  return ((uint64_t)hi << 32) | lo;
}

#else
void board_init(void) {
  // The counter counts the machine's 32 MHz clock; its scale (8.24 fixed
  // point, written while it is stopped) makes that BOARD_TICK_HZ exactly.
  REG(CNT_CTRL + CNTCR) = 0;
  REG(CNT_CTRL + CNTSCR) = BOARD_COUNTER_SCALE;
  REG(CNT_CTRL + CNTCR) = 1u | 4u;  // enable, scaling
  REG(SYST_CSR) = 0;
  REG(SYST_RVR) = BOARD_SYSTICK_HZ / TICK_WAKE_HZ - 1u;
  REG(SYST_CVR) = 0;
  REG(SYST_CSR) = 7u;  // enable, interrupt, processor clock
  __asm__ volatile("cpsie i" ::: "memory");
}

// The counter is a pure function of (virtual) time: no wraps to count.
uint64_t board_ticks(void) {
  uint32_t hi, lo;
  do {
    hi = REG(CNT_STATUS + CNTCV_HI);
    lo = REG(CNT_STATUS + CNTCV_LO);
  } while (hi != REG(CNT_STATUS + CNTCV_HI));
  return ((uint64_t)hi << 32) | lo;
}
#endif

uint32_t board_us(void) { return (uint32_t)(board_ticks() / (BOARD_TICK_HZ / 1000000u)); }
uint32_t board_ms(void) { return (uint32_t)(board_ticks() / (BOARD_TICK_HZ / 1000u)); }

static uint64_t g_idle_ticks;

void board_idle(int (*ready)(void)) {
  __asm__ volatile("cpsid i" ::: "memory");
  if (!ready()) {
    const uint64_t t0 = board_ticks();
    __asm__ volatile("dsb\n wfi" ::: "memory");
    g_idle_ticks += board_ticks() - t0;
  }
  __asm__ volatile("cpsie i\n isb" ::: "memory");
}

uint64_t board_idle_ticks(void) { return g_idle_ticks; }

#ifndef BOARD_MPU_V8M
// One no-access, execute-never MPU region of 2^log2 bytes at `base`.
static void mpu_deny(uint32_t region, uint32_t base, uint32_t log2) {
  REG(MPU_RNR) = region;
  REG(MPU_RBAR) = base & ~31u;
  REG(MPU_RASR) = (1u << 28) /* XN */ | (0u << 24) /* no access */ | ((log2 - 1u) << 1) | 1u;
}

void board_guards(uint32_t arena_bytes) {
  const uint32_t stack_guard = ((uint32_t)(uintptr_t)__stack_limit + 31u) & ~31u;
  const uint32_t arena_guard = ((uint32_t)(uintptr_t)__arena_start + arena_bytes + 31u) & ~31u;
  mpu_deny(0, stack_guard, 5);                      // 32 bytes under the stack
  if (arena_guard + 32u <= (uint32_t)(uintptr_t)__arena_end) mpu_deny(1, arena_guard, 5);
  mpu_deny(2, (uint32_t)(uintptr_t)__arena_end, BOARD_ARENA_GUARD_LOG2);  // past the arena's RAM
  mpu_deny(3, BOARD_FLASH_GUARD, BOARD_FLASH_GUARD_LOG2);                  // past the board's flash
  REG(SCB_SHCSR) |= (1u << 16) | (1u << 17) | (1u << 18);  // MemManage, BusFault, UsageFault
  REG(MPU_CTRL) = 1u | 4u;  // enable, default map for everything else
  __asm__ volatile("dsb\n isb" ::: "memory");
}
#else
// ARMv8-M (PMSAv8) has no privileged no-access permission, so the guards are
// holes: the regions below cover what the firmware may touch, the default
// map stays off for privileged code too (PRIVDEFENA = 0), and any access
// outside them faults (MemManage): the 32 bytes under the stack, everything
// past `arena_bytes` of the arena, past the board's flash and the rest of
// the machine. The system space (NVIC, SysTick, SCB) is never subject to
// the MPU. RBAR: base | AP << 1 | XN; RLAR: limit | AttrIndx << 1 | enable.
#define AP_RW 0u      // read/write, privileged only
#define AP_RO 2u      // read-only, privileged only
#define ATTR_NORMAL 0u
#define ATTR_DEVICE 1u
static void mpu_allow(uint32_t region, uint32_t base, uint32_t end, uint32_t ap, int xn, uint32_t attr) {
  REG(MPU_RNR) = region;
  REG(MPU_RBAR) = (base & ~31u) | (ap << 1) | (xn ? 1u : 0u);
  REG(MPU_RLAR) = ((end - 1u) & ~31u) | (attr << 1) | 1u;
}

void board_guards(uint32_t arena_bytes) {
  const uint32_t stack_guard = ((uint32_t)(uintptr_t)__stack_limit + 31u) & ~31u;
  uint32_t arena_end = ((uint32_t)(uintptr_t)__arena_start + arena_bytes + 31u) & ~31u;
  if (arena_end > (uint32_t)(uintptr_t)__arena_end) arena_end = (uint32_t)(uintptr_t)__arena_end;
  REG(MPU_CTRL) = 0;
  __asm__ volatile("dsb\n isb" ::: "memory");
  REG(MPU_MAIR0) = 0xFFu | (0x00u << 8);  // attr 0: normal write-back; attr 1: device nGnRnE
  mpu_allow(0, 0, ((uint32_t)(uintptr_t)__itcm_end + 31u) & ~31u, AP_RO, 0, ATTR_NORMAL);  // code, constants
  mpu_allow(1, (uint32_t)(uintptr_t)__data_start, stack_guard, AP_RW, 1, ATTR_NORMAL);     // .data, .bss
  mpu_allow(2, stack_guard + 32u, (uint32_t)(uintptr_t)__stack_top, AP_RW, 1, ATTR_NORMAL);  // the stack
  if (arena_end > (uint32_t)(uintptr_t)__arena_start)
    mpu_allow(3, (uint32_t)(uintptr_t)__arena_start, arena_end, AP_RW, 1, ATTR_NORMAL);  // the arena budget
  // The flash (image, store, provisioning record); executable: the reset
  // code that called main runs from it again when main returns.
  mpu_allow(4, BOARD_FLASH_BASE, BOARD_FLASH_GUARD, AP_RW, 0, ATTR_NORMAL);
  mpu_allow(5, BOARD_PERIPH_BASE, BOARD_PERIPH_LIMIT, AP_RW, 1, ATTR_DEVICE);  // the LAN9118
  mpu_allow(6, BOARD_COUNTER_BASE, BOARD_COUNTER_BASE + 0x2000u, AP_RW, 1, ATTR_DEVICE);  // the system counter
  // MemManage, BusFault, UsageFault, SecureFault
  REG(SCB_SHCSR) |= (1u << 16) | (1u << 17) | (1u << 18) | (1u << 19);
  REG(MPU_CTRL) = 1u;  // enable; no default map, even for privileged code
  __asm__ volatile("dsb\n isb" ::: "memory");
}
#endif

uint32_t board_stack_used(void) {
  const uint32_t* p = (const uint32_t*)(((uintptr_t)__stack_limit + 63u) & ~(uintptr_t)31u);
  const uint32_t* top = (const uint32_t*)__stack_top;
  while (p < top && *p == STACK_PAINT) ++p;
  return (uint32_t)((uintptr_t)top - (uintptr_t)p);
}

uint32_t board_stack_size(void) { return (uint32_t)((uintptr_t)__stack_top - (uintptr_t)__stack_limit); }

// The emulator's flash is RAM: erase and program are plain stores, with the
// NOR rule checked (programming can only clear bits).
int board_flash_erase(uint8_t* sector) {
  for (uint32_t i = 0; i < 4096u; ++i) sector[i] = 0xFF;
  return 1;
}

int board_flash_program(uint8_t* dst, const uint8_t* src, uint32_t len) {
  int ok = 1;
  for (uint32_t i = 0; i < len; ++i) {
    if ((dst[i] & src[i]) != src[i]) ok = 0;  // a 0 -> 1 change needs an erase
    dst[i] &= src[i];
  }
  return ok;
}
