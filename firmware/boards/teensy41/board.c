// Teensy 4.1 board support: 600 MHz clock tree, caches and MPU, the DWT
// cycle counter as the clock, SysTick as the wake-up tick, idle, memory
// guards and the stack watermark (board.h).
#include "board.h"
#include "teensy41.h"

#define STACK_PAINT 0xA5A5A5A5u
#define TICK_WAKE_HZ 50u  // SysTick reload is 24 bits: at 600 MHz at least 36 Hz

volatile uint32_t g_tick_flag;
static void (*g_eth_isr)(void);
static uint32_t g_cyc_last, g_cyc_high;
static uint64_t g_idle_ticks;

static void wait_clear(uint32_t addr, uint32_t bits) {
  while (REG32(addr) & bits) {
  }
}

// Core at 600 MHz: ARM PLL at 1200 MHz (24 MHz x 100 / 2), ARM_PODF /2,
// AHB /1 (600 MHz), IPG /4 (150 MHz). The core supply goes to 1.25 V first,
// and the core runs from the 24 MHz crystal while the PLL is changed.
// Peripheral roots: LPUART and PIT from the 24 MHz crystal.
void teensy_clock_init(void) {
  // VDD_SOC target 1.25 V (0.8 V + 18 x 25 mV), wait for the DCDC.
  uint32_t dcdc = REG32(DCDC_REG3);
  if ((dcdc & 0x1Fu) < 18u) {
    REG32(DCDC_REG3) = (dcdc & ~0x1Fu) | 18u;
    while (!(REG32(DCDC_REG0) & (1u << 31))) {
    }
  }
  // periph_clk2 = crystal (CBCMR PERIPH_CLK2_SEL = 1, /1), core on it.
  REG32(CCM_CBCMR) = (REG32(CCM_CBCMR) & ~(3u << 12)) | (1u << 12);
  REG32(CCM_CBCDR) &= ~(7u << 27);  // PERIPH_CLK2_PODF /1
  REG32(CCM_CBCDR) |= 1u << 25;     // PERIPH_CLK_SEL: periph_clk2
  wait_clear(CCM_CDHIPR, 1u << 5);
  // ARM PLL: power up, DIV_SELECT 100, wait for lock, leave bypass.
  REG32(CCM_ANALOG_PLL_ARM) = PLL_BYPASS | PLL_ENABLE | 100u;
  while (!(REG32(CCM_ANALOG_PLL_ARM) & PLL_LOCK)) {
  }
  REG32(CCM_ANALOG_PLL_ARM) = PLL_ENABLE | 100u;
  REG32(CCM_CACR) = 1u;  // ARM_PODF /2
  wait_clear(CCM_CDHIPR, 1u << 16);
  // AHB_PODF /1 (bits 12:10), IPG_PODF /4 (bits 9:8).
  REG32(CCM_CBCDR) = (REG32(CCM_CBCDR) & ~((7u << 10) | (3u << 8))) | (3u << 8);
  wait_clear(CCM_CDHIPR, 1u << 1);
  // pre_periph = divided ARM PLL (CBCMR PRE_PERIPH_CLK_SEL = 3), core on it.
  REG32(CCM_CBCMR) |= 3u << 18;
  REG32(CCM_CBCDR) &= ~(1u << 25);
  wait_clear(CCM_CDHIPR, 1u << 5);
  // UART root: crystal /1 (CSCDR1 UART_CLK_SEL bit 6, PODF 5:0);
  // PERCLK (PIT): crystal /1 (CSCMR1 PERCLK_CLK_SEL bit 6, PODF 5:0).
  REG32(CCM_CSCDR1) = (REG32(CCM_CSCDR1) & ~0x7Fu) | (1u << 6);
  REG32(CCM_CSCMR1) = (REG32(CCM_CSCMR1) & ~0x7Fu) | (1u << 6);
}

// MPU region: base, log2 size, attributes (RASR without size/enable).
static void mpu_region(uint32_t region, uint32_t base, uint32_t log2, uint32_t attr) {
  REG32(MPU_RNR) = region;
  REG32(MPU_RBAR) = base & ~31u;
  REG32(MPU_RASR) = attr | ((log2 - 1u) << 1) | 1u;
}
#define MPU_XN (1u << 28)
#define MPU_AP_NONE (0u << 24)
#define MPU_AP_RW (3u << 24)
#define MPU_AP_RO (6u << 24)
#define MPU_NORMAL_WT (1u << 17)  // TEX 0, C 1, B 0: write-through, no write-allocate

static void caches_on(void) {
  __asm__ volatile("dsb\n isb" ::: "memory");
  REG32(SCB_ICIALLU) = 0;
  __asm__ volatile("dsb\n isb" ::: "memory");
  REG32(SCB_CCR) |= SCB_CCR_IC;
  __asm__ volatile("dsb\n isb" ::: "memory");
  REG32(SCB_CSSELR) = 0;  // level 1 data cache
  __asm__ volatile("dsb" ::: "memory");
  const uint32_t ccsidr = REG32(SCB_CCSIDR);
  const uint32_t sets = ((ccsidr >> 13) & 0x7FFFu) + 1u, ways = ((ccsidr >> 3) & 0x3FFu) + 1u;
  const uint32_t line_shift = (ccsidr & 7u) + 4u;
  const uint32_t way_shift = ways > 1 ? (uint32_t)__builtin_clz(ways - 1u) : 0u;
  for (uint32_t s = 0; s < sets; ++s)
    for (uint32_t w = 0; w < ways; ++w) REG32(SCB_DCISW) = (w << way_shift) | (s << line_shift);
  __asm__ volatile("dsb" ::: "memory");
  REG32(SCB_CCR) |= SCB_CCR_DC;
  __asm__ volatile("dsb\n isb" ::: "memory");
}

void board_init(void) {
  // DWT cycle counter.
  REG32(DEMCR) |= 1u << 24;  // TRCENA
  REG32(DWT_LAR) = 0xC5ACCE55u;
  REG32(DWT_CYCCNT) = 0;
  REG32(DWT_CTRL) |= 1u;
  g_cyc_last = 0;
  g_cyc_high = 0;
  // MPU: flash is data only after startup (read-only, never executed, so no
  // speculative fetch reaches it while it is being programmed), cached
  // write-through; ITCM holds only code and constants: read-only. Guards
  // (board_guards) use regions 0-3. Everything else: the default map.
  REG32(MPU_CTRL) = 0;
  mpu_region(4, 0x00000000u, 19, MPU_AP_RO | MPU_NORMAL_WT);
  mpu_region(5, TEENSY_FLASH_BASE, 23, MPU_XN | MPU_AP_RO | MPU_NORMAL_WT);
  REG32(SCB_SHCSR) |= (1u << 16) | (1u << 17) | (1u << 18);  // MemManage, BusFault, UsageFault
  REG32(MPU_CTRL) = 1u | 4u;  // enable, default map for the rest
  __asm__ volatile("dsb\n isb" ::: "memory");
  caches_on();
  // SysTick from the core clock: the wake-up tick (and it keeps the 64-bit
  // cycle count's high word current: the 32-bit counter wraps every 7.2 s).
  REG32(SYST_RVR) = BOARD_TICK_HZ / TICK_WAKE_HZ - 1u;
  REG32(SYST_CVR) = 0;
  REG32(SYST_CSR) = 7u;  // processor clock, interrupt, enable
  __asm__ volatile("cpsie i" ::: "memory");
}

uint64_t board_ticks(void) {
  uint32_t primask;
  __asm__ volatile("mrs %0, primask\n cpsid i" : "=r"(primask)::"memory");
  const uint32_t now = REG32(DWT_CYCCNT);
  if (now < g_cyc_last) g_cyc_high++;
  g_cyc_last = now;
  const uint64_t t = ((uint64_t)g_cyc_high << 32) | now;
  __asm__ volatile("msr primask, %0" ::"r"(primask) : "memory");
  return t;
}

void ts_irq_systick(void) {
  (void)board_ticks();
  g_tick_flag = 1;
}

uint32_t board_us(void) { return (uint32_t)(board_ticks() / (BOARD_TICK_HZ / 1000000u)); }
uint32_t board_ms(void) { return (uint32_t)(board_ticks() / (BOARD_TICK_HZ / 1000u)); }
uint32_t teensy_cycles(void) { return REG32(DWT_CYCCNT); }

void teensy_delay_us(uint32_t us) {
  const uint32_t start = REG32(DWT_CYCCNT), n = us * (BOARD_TICK_HZ / 1000000u);
  while (REG32(DWT_CYCCNT) - start < n) {
  }
}

uint32_t teensy_measure_core_khz(void) {
  REG32(CCM_CCGR1) |= 3u << 12;  // PIT clock gate
  REG32(PIT_MCR) = 0;            // module on
  REG32(PIT_TCTRL0) = 0;
  REG32(PIT_LDVAL0) = 0xFFFFFFFFu;
  REG32(PIT_TCTRL0) = 1u;  // TEN: counts down at 24 MHz
  const uint32_t p0 = REG32(PIT_CVAL0), c0 = REG32(DWT_CYCCNT);
  while (p0 - REG32(PIT_CVAL0) < 2400000u) {  // 100 ms of the crystal
  }
  const uint32_t c1 = REG32(DWT_CYCCNT), p1 = REG32(PIT_CVAL0);
  REG32(PIT_TCTRL0) = 0;
  const uint64_t pit = p0 - p1;
  return (uint32_t)((uint64_t)(c1 - c0) * 24000u / pit);
}

void teensy_fuse_mac(uint8_t mac[6]) {
  REG32(CCM_CCGR2) |= 3u << 12;  // OCOTP clock gate
  const uint32_t m0 = REG32(OCOTP_MAC0), m1 = REG32(OCOTP_MAC1);
  mac[0] = (uint8_t)(m1 >> 8);
  mac[1] = (uint8_t)m1;
  mac[2] = (uint8_t)(m0 >> 24);
  mac[3] = (uint8_t)(m0 >> 16);
  mac[4] = (uint8_t)(m0 >> 8);
  mac[5] = (uint8_t)m0;
  if ((m0 | (m1 & 0xFFFFu)) == 0) {  // blank fuses: locally administered
    mac[0] = 0x02;
    mac[1] = 0x54;
    mac[2] = 0x53;  // "TS"
  }
}

void nvic_enable(int irq) { REG32(NVIC_ISER + 4u * (unsigned)(irq / 32)) = 1u << (irq % 32); }
void nvic_disable(int irq) {
  REG32(NVIC_ICER + 4u * (unsigned)(irq / 32)) = 1u << (irq % 32);
  __asm__ volatile("dsb\n isb" ::: "memory");
}

void board_set_ethernet_isr(void (*isr)(void)) { g_eth_isr = isr; }
void ts_irq_enet(void) {
  if (g_eth_isr) g_eth_isr();
}

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

void board_guards(uint32_t arena_bytes) {
  const uint32_t stack_guard = ((uint32_t)(uintptr_t)__stack_limit + 31u) & ~31u;
  const uint32_t arena_guard = ((uint32_t)(uintptr_t)__arena_start + arena_bytes + 31u) & ~31u;
  REG32(MPU_CTRL) = 0;
  __asm__ volatile("dsb\n isb" ::: "memory");
  mpu_region(0, stack_guard, 5, MPU_XN | MPU_AP_NONE);
  if (arena_guard + 32u <= (uint32_t)(uintptr_t)__arena_end) mpu_region(1, arena_guard, 5, MPU_XN | MPU_AP_NONE);
  mpu_region(2, (uint32_t)(uintptr_t)__arena_end, 19, MPU_XN | MPU_AP_NONE);  // 512 KB past OCRAM
  mpu_region(3, TEENSY_FLASH_BASE + TEENSY_FLASH_SIZE, 23, MPU_XN | MPU_AP_NONE);
  REG32(MPU_CTRL) = 1u | 4u;
  __asm__ volatile("dsb\n isb" ::: "memory");
}

uint32_t board_stack_used(void) {
  const uint32_t* p = (const uint32_t*)(((uintptr_t)__stack_limit + 63u) & ~(uintptr_t)31u);
  const uint32_t* top = (const uint32_t*)__stack_top;
  while (p < top && *p == STACK_PAINT) ++p;
  return (uint32_t)((uintptr_t)top - (uintptr_t)p);
}

uint32_t board_stack_size(void) { return (uint32_t)((uintptr_t)__stack_top - (uintptr_t)__stack_limit); }
