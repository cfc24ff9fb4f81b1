// What the i.MX RT1062 boot ROM reads from the start of the QSPI flash
// (reference manual, "System Boot": FlexSPI NOR boot):
//  - 0x60000000: the FlexSPI NOR configuration block (512 bytes): how to
//    talk to the flash (pads, clock, the read command in LUT sequence 0),
//  - 0x60001000: the image vector table (IVT), 32 bytes: header, entry
//    point, boot data pointer, its own address,
//  - right after it, the boot data: where the image starts and its size.
// The Teensy 4.1's flash is a Winbond W25Q64JV (8 MB, 4 KB sectors, 256 B
// pages, quad I/O fast read 0xEB with 6 dummy cycles).
#include <stddef.h>
#include <stdint.h>

#include "teensy41.h"

extern void ts_reset(void);
extern uint8_t __flash_image_bytes[];

// FlexSPI LUT instruction: opcode (6 bits), pads (2 bits: 1/2/4/8 lines as
// 0..3), operand (8 bits); two per 32-bit LUT word, the first in the low half.
#define LUT_INSTR(op, pads, arg) ((uint32_t)(((op) << 10) | ((pads) << 8) | (arg)))
#define LUT_WORD(i0, i1) ((i0) | ((i1) << 16))

// One LUT sequence is 4 words (8 instructions). Indices follow the boot
// ROM's convention (read 0, read status 1, write enable 3, sector erase 5,
// page program 9); flexspi.c loads the same sequences again before using them.
#define SEQ_WORDS 4
#define SEQ(n) [(n) * SEQ_WORDS]

typedef struct {
  uint32_t tag;             // 0x000 'FCFB'
  uint32_t version;         // 0x004 'V' 1.4.0
  uint32_t reserved0;       // 0x008
  uint8_t read_sample_clk;  // 0x00c 1: loopback from the DQS pad
  uint8_t cs_hold_time;     // 0x00d
  uint8_t cs_setup_time;    // 0x00e
  uint8_t column_addr_width;  // 0x00f
  uint8_t device_mode_cfg_enable;  // 0x010
  uint8_t device_mode_type;        // 0x011
  uint16_t wait_time_cfg_commands; // 0x012
  uint32_t device_mode_seq;        // 0x014
  uint32_t device_mode_arg;        // 0x018
  uint8_t config_cmd_enable;       // 0x01c
  uint8_t config_mode_type[3];     // 0x01d
  uint32_t config_cmd_seqs[3];     // 0x020
  uint32_t reserved1;              // 0x02c
  uint32_t config_cmd_args[3];     // 0x030
  uint32_t reserved2;              // 0x03c
  uint32_t controller_misc_option; // 0x040
  uint8_t device_type;             // 0x044 1: serial NOR
  uint8_t sflash_pad_type;         // 0x045 4: quad
  uint8_t serial_clk_freq;         // 0x046 RT1060 code 6: 100 MHz
  uint8_t lut_custom_seq_enable;   // 0x047
  uint32_t reserved3[2];           // 0x048
  uint32_t sflash_a1_size;         // 0x050
  uint32_t sflash_a2_size, sflash_b1_size, sflash_b2_size;  // 0x054
  uint32_t pad_overrides[4];       // 0x060 cs, sclk, data, dqs
  uint32_t timeout_ms;             // 0x070
  uint32_t command_interval;       // 0x074
  uint16_t data_valid_time[2];     // 0x078
  uint16_t busy_offset;            // 0x07c
  uint16_t busy_bit_polarity;      // 0x07e
  uint32_t lut[64];                // 0x080 16 sequences
  uint32_t lut_custom_seq[12];     // 0x180
  uint32_t reserved4[4];           // 0x1b0
  // serial NOR part
  uint32_t page_size;              // 0x1c0
  uint32_t sector_size;            // 0x1c4
  uint8_t ipcmd_serial_clk_freq;   // 0x1c8
  uint8_t is_uniform_block_size;   // 0x1c9
  uint8_t reserved5[2];            // 0x1ca
  uint8_t serial_nor_type;         // 0x1cc
  uint8_t need_exit_nocmd_mode;    // 0x1cd
  uint8_t half_clk_for_non_read_cmd;  // 0x1ce
  uint8_t need_restore_nocmd_mode; // 0x1cf
  uint32_t block_size;             // 0x1d0
  uint32_t reserved6[11];          // 0x1d4
} FlexspiNorConfig;

_Static_assert(offsetof(FlexspiNorConfig, controller_misc_option) == 0x40, "FCFB layout");
_Static_assert(offsetof(FlexspiNorConfig, sflash_a1_size) == 0x50, "FCFB layout");
_Static_assert(offsetof(FlexspiNorConfig, lut) == 0x80, "FCFB layout");
_Static_assert(offsetof(FlexspiNorConfig, page_size) == 0x1c0, "FCFB layout");
_Static_assert(sizeof(FlexspiNorConfig) == 512, "FCFB size");

__attribute__((section(".fcfb"), used)) const FlexspiNorConfig ts_fcfb = {
    .tag = 0x42464346u,  // "FCFB" read as a little-endian word
    .version = 0x56010400u,
    .read_sample_clk = 1,
    .cs_hold_time = 3,
    .cs_setup_time = 3,
    .device_type = 1,
    .sflash_pad_type = 4,
    .serial_clk_freq = 6,
    .sflash_a1_size = TEENSY_FLASH_SIZE,
    .lut =
        {
            SEQ(FLEXSPI_SEQ_READ) = LUT_WORD(LUT_INSTR(FLEXSPI_OP_CMD, 0, 0xEB), LUT_INSTR(FLEXSPI_OP_RADDR, 2, 24)),
            LUT_WORD(LUT_INSTR(FLEXSPI_OP_DUMMY, 2, 6), LUT_INSTR(FLEXSPI_OP_READ, 2, 4)),
            SEQ(FLEXSPI_SEQ_STATUS) = LUT_WORD(LUT_INSTR(FLEXSPI_OP_CMD, 0, 0x05), LUT_INSTR(FLEXSPI_OP_READ, 0, 1)),
            SEQ(FLEXSPI_SEQ_WREN) = LUT_WORD(LUT_INSTR(FLEXSPI_OP_CMD, 0, 0x06), 0),
            SEQ(FLEXSPI_SEQ_ERASE4K) = LUT_WORD(LUT_INSTR(FLEXSPI_OP_CMD, 0, 0x20), LUT_INSTR(FLEXSPI_OP_RADDR, 0, 24)),
            SEQ(FLEXSPI_SEQ_PROGRAM) = LUT_WORD(LUT_INSTR(FLEXSPI_OP_CMD, 0, 0x02), LUT_INSTR(FLEXSPI_OP_RADDR, 0, 24)),
            LUT_WORD(LUT_INSTR(FLEXSPI_OP_WRITE, 0, 4), 0),
        },
    .page_size = 256,
    .sector_size = 4096,
    .ipcmd_serial_clk_freq = 0,
    .block_size = 65536,
};

// Boot data: image start, image size in bytes, plugin flag (0: a normal
// image), reserved.
__attribute__((section(".bootdata"), used)) const uint32_t ts_boot_data[4] = {
    TEENSY_FLASH_BASE,
    (uint32_t)__flash_image_bytes,
    0,
    0,
};

// IVT: header (tag 0xD1, length 0x0020 big-endian, version 0x43), entry,
// reserved, DCD (none), boot data, self, CSF (none), reserved.
__attribute__((section(".ivt"), used)) const uint32_t ts_ivt[8] = {
    0x432000D1u, (uint32_t)ts_reset, 0, 0, (uint32_t)ts_boot_data, (uint32_t)ts_ivt, 0, 0,
};
