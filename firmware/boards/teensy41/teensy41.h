// i.MX RT1062 registers used by the Teensy 4.1 board code (addresses and
// bits from the i.MX RT1060 reference manual; only what this firmware uses).
#pragma once

#include <stdint.h>

#include "board_config.h"

#define REG32(a) (*(volatile uint32_t*)(uintptr_t)(a))
#define REG16(a) (*(volatile uint16_t*)(uintptr_t)(a))

// ---- Cortex-M7 system control
#define SCB_CPACR 0xE000ED88u
#define SCB_VTOR 0xE000ED08u
#define SCB_AIRCR 0xE000ED0Cu
#define SCB_CCR 0xE000ED14u
#define SCB_SHCSR 0xE000ED24u
#define SCB_CCSIDR 0xE000ED80u
#define SCB_CSSELR 0xE000ED84u
#define SCB_ICIALLU 0xE000EF50u
#define SCB_DCIMVAC 0xE000EF5Cu
#define SCB_DCISW 0xE000EF60u
#define SCB_CCR_DC (1u << 16)
#define SCB_CCR_IC (1u << 17)
#define SYST_CSR 0xE000E010u
#define SYST_RVR 0xE000E014u
#define SYST_CVR 0xE000E018u
#define DEMCR 0xE000EDFCu
#define DWT_CTRL 0xE0001000u
#define DWT_CYCCNT 0xE0001004u
#define DWT_LAR 0xE0001FB0u
#define NVIC_ISER 0xE000E100u
#define NVIC_ICER 0xE000E180u
#define NVIC_IPR 0xE000E400u
#define MPU_CTRL 0xE000ED94u
#define MPU_RNR 0xE000ED98u
#define MPU_RBAR 0xE000ED9Cu
#define MPU_RASR 0xE000EDA0u

// ---- CCM (clock controller) and CCM_ANALOG (PLLs)
#define CCM_BASE 0x400FC000u
#define CCM_CACR (CCM_BASE + 0x10u)
#define CCM_CBCDR (CCM_BASE + 0x14u)
#define CCM_CBCMR (CCM_BASE + 0x18u)
#define CCM_CSCMR1 (CCM_BASE + 0x1Cu)
#define CCM_CSCDR1 (CCM_BASE + 0x24u)
#define CCM_CDHIPR (CCM_BASE + 0x48u)
#define CCM_CCGR0 (CCM_BASE + 0x68u)
#define CCM_CCGR1 (CCM_BASE + 0x6Cu)
#define CCM_CCGR2 (CCM_BASE + 0x70u)
#define CCM_CCGR3 (CCM_BASE + 0x74u)
#define CCM_ANALOG_PLL_ARM 0x400D8000u
#define CCM_ANALOG_PLL_ENET 0x400D80E0u
#define PLL_LOCK (1u << 31)
#define PLL_BYPASS (1u << 16)
#define PLL_ENABLE (1u << 13)
#define PLL_POWERDOWN (1u << 12)

// ---- DCDC (core supply)
#define DCDC_REG0 0x40080000u
#define DCDC_REG3 0x4008000Cu

// ---- watchdogs
#define WDOG1_WMCR 0x400B8008u
#define WDOG2_WMCR 0x400D0008u
#define RTWDOG_CS 0x400BC000u
#define RTWDOG_CNT 0x400BC004u
#define RTWDOG_TOVAL 0x400BC008u

// ---- IOMUXC
#define IOMUXC_GPR_BASE 0x400AC000u
#define IOMUXC_GPR_GPR1 (IOMUXC_GPR_BASE + 0x04u)
#define IOMUXC_GPR_GPR14 (IOMUXC_GPR_BASE + 0x38u)
#define IOMUXC_GPR_GPR16 (IOMUXC_GPR_BASE + 0x40u)
#define IOMUXC_GPR_GPR17 (IOMUXC_GPR_BASE + 0x44u)
#define IOMUXC_GPR_GPR27 (IOMUXC_GPR_BASE + 0x6Cu)
#define IOMUXC_BASE 0x401F8000u
// Pad mux / pad control register of a pad, by its index from GPIO_AD_B0_00
// (AD_B0 0-15, AD_B1 16-31, B0 32-47, B1 48-63).
#define PAD_AD_B0(n) (n)
#define PAD_B0(n) (32 + (n))
#define PAD_B1(n) (48 + (n))
#define IOMUXC_MUX(pad) (IOMUXC_BASE + 0x0BCu + 4u * (uint32_t)(pad))
#define IOMUXC_PAD(pad) (IOMUXC_BASE + 0x2ACu + 4u * (uint32_t)(pad))
#define IOMUXC_SION 0x10u
#define IOMUXC_ENET_IPG_CLK_RMII_SELECT_INPUT (IOMUXC_BASE + 0x42Cu)
#define IOMUXC_ENET_MDIO_SELECT_INPUT (IOMUXC_BASE + 0x430u)
#define IOMUXC_ENET0_RXDATA_SELECT_INPUT (IOMUXC_BASE + 0x434u)
#define IOMUXC_ENET1_RXDATA_SELECT_INPUT (IOMUXC_BASE + 0x438u)
#define IOMUXC_ENET_RXEN_SELECT_INPUT (IOMUXC_BASE + 0x43Cu)
#define IOMUXC_ENET_RXERR_SELECT_INPUT (IOMUXC_BASE + 0x440u)
#define IOMUXC_LPUART6_RX_SELECT_INPUT (IOMUXC_BASE + 0x550u)
#define IOMUXC_LPUART6_TX_SELECT_INPUT (IOMUXC_BASE + 0x554u)
// Pad control fields.
#define PAD_SRE 1u
#define PAD_DSE(n) ((uint32_t)(n) << 3)
#define PAD_SPEED(n) ((uint32_t)(n) << 6)
#define PAD_PKE (1u << 12)
#define PAD_PUE (1u << 13)
#define PAD_PUS(n) ((uint32_t)(n) << 14)
#define PAD_HYS (1u << 16)

// ---- GPIO2 (pads GPIO_B0_xx are bits 0-15)
#define GPIO2_BASE 0x401BC000u
#define GPIO_DR 0x00u
#define GPIO_GDIR 0x04u
#define GPIO_DR_SET 0x84u
#define GPIO_DR_CLEAR 0x88u

// ---- LPUART6 (Teensy pins 0 = RX on GPIO_AD_B0_03, 1 = TX on GPIO_AD_B0_02)
#define LPUART6_BASE 0x40198000u
#define LPUART_GLOBAL 0x08u
#define LPUART_BAUD 0x10u
#define LPUART_STAT 0x14u
#define LPUART_CTRL 0x18u
#define LPUART_DATA 0x1Cu
#define LPUART_STAT_TDRE (1u << 23)
#define LPUART_STAT_TC (1u << 22)
#define LPUART_STAT_RDRF (1u << 21)
#define LPUART_STAT_OR (1u << 19)
#define LPUART_CTRL_TIE (1u << 23)
#define LPUART_CTRL_TE (1u << 19)
#define LPUART_CTRL_RE (1u << 18)

// ---- PIT (periodic timer), clocked from the 24 MHz crystal here
#define PIT_BASE 0x40084000u
#define PIT_MCR (PIT_BASE + 0x00u)
#define PIT_LDVAL0 (PIT_BASE + 0x100u)
#define PIT_CVAL0 (PIT_BASE + 0x104u)
#define PIT_TCTRL0 (PIT_BASE + 0x108u)

// ---- OCOTP (fuses): the factory MAC address
#define OCOTP_MAC0 0x401F4620u
#define OCOTP_MAC1 0x401F4630u

// ---- FlexSPI (QSPI flash controller)
#define FLEXSPI_BASE 0x402A8000u
#define FLEXSPI_MCR0 (FLEXSPI_BASE + 0x00u)
#define FLEXSPI_INTR (FLEXSPI_BASE + 0x14u)
#define FLEXSPI_LUTKEY (FLEXSPI_BASE + 0x18u)
#define FLEXSPI_LUTCR (FLEXSPI_BASE + 0x1Cu)
#define FLEXSPI_IPCR0 (FLEXSPI_BASE + 0xA0u)
#define FLEXSPI_IPCR1 (FLEXSPI_BASE + 0xA4u)
#define FLEXSPI_IPCMD (FLEXSPI_BASE + 0xB0u)
#define FLEXSPI_IPRXFCR (FLEXSPI_BASE + 0xB8u)
#define FLEXSPI_IPTXFCR (FLEXSPI_BASE + 0xBCu)
#define FLEXSPI_STS0 (FLEXSPI_BASE + 0xE0u)
#define FLEXSPI_RFDR (FLEXSPI_BASE + 0x100u)
#define FLEXSPI_TFDR (FLEXSPI_BASE + 0x180u)
#define FLEXSPI_LUT (FLEXSPI_BASE + 0x200u)
#define FLEXSPI_INTR_IPCMDDONE (1u << 0)
#define FLEXSPI_INTR_IPCMDGE (1u << 1)
#define FLEXSPI_INTR_IPCMDERR (1u << 3)
#define FLEXSPI_INTR_IPTXWE (1u << 6)
#define FLEXSPI_LUT_KEY 0x5AF05AF0u
// LUT opcodes (SDR) and the sequence slots used.
#define FLEXSPI_OP_STOP 0x00u
#define FLEXSPI_OP_CMD 0x01u
#define FLEXSPI_OP_RADDR 0x02u
#define FLEXSPI_OP_WRITE 0x08u
#define FLEXSPI_OP_READ 0x09u
#define FLEXSPI_OP_DUMMY 0x0Cu
#define FLEXSPI_SEQ_READ 0
#define FLEXSPI_SEQ_STATUS 1
#define FLEXSPI_SEQ_WREN 3
#define FLEXSPI_SEQ_ERASE4K 5
#define FLEXSPI_SEQ_PROGRAM 9

// ---- ENET (10/100 Ethernet MAC)
#define ENET_BASE 0x402D8000u

#ifdef __cplusplus
extern "C" {
#endif
// Board helpers (board.c).
void teensy_delay_us(uint32_t us);
uint32_t teensy_cycles(void);
// Core clock measured against the 24 MHz crystal (PIT), in kHz.
uint32_t teensy_measure_core_khz(void);
// The factory MAC address from the fuses (a locally administered one derived
// from the chip's unique id when the fuses are blank).
void teensy_fuse_mac(uint8_t mac[6]);
// Console (console.c).
int console_getc(void);  // -1 when nothing arrived
void console_flush(void);
#ifdef __cplusplus
}
#endif
