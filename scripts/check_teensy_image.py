#!/usr/bin/python3
"""Checks a Teensy 4.1 (i.MX RT1062) image of the board firmware.

    check_teensy_image.py ELF HEX            check the image; exit 0 if good
    check_teensy_image.py --negative-tests ELF HEX
                                             make broken copies of the .hex and
                                             check that each one is rejected

What a good image must have (i.MX RT1060 reference manual, "System Boot"):
  - the .hex parses (record checksums, an end record) and every byte lies in
    the Teensy 4.1's program flash (0x60000000, 8 MB minus the reserved 256 KB)
  - the FlexSPI NOR configuration block at 0x60000000: tag 'FCFB', version
    'V' x.y.z, serial NOR of 8 MB, 256-byte pages, 4 KB sectors, and a read
    command in LUT sequence 0
  - the image vector table at 0x60001000: header tag 0xD1, length 0x0020,
    version 0x40-0x43; entry point (Thumb) inside the program image and equal
    to the ELF's; boot data pointer inside the image; self pointer 0x60001000
  - boot data: start 0x60000000, a size covering the whole image, no plugin
  - every loadable ELF segment inside the Teensy 4.1 memory map (ITCM
    0x00000000, DTCM 0x20000000, OCRAM 0x20200000: 512 KB each; flash), its
    load image in flash and equal to the .hex's bytes; code + data banks fit
    the 512 KB FlexRAM
  - the vector table (ts_vectors) aligned for VTOR (1024 bytes for 176
    entries), its initial stack pointer in DTCM and its reset vector Thumb
  - Debian's teensy_loader_cli parses the .hex for --mcu=TEENSY41 (it reads
    the file before it looks for a board; without a board it then stops
    with "Unable to open device")
Standard library only; run with Debian's /usr/bin/python3.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

FLASH = 0x60000000
FLASH_SIZE = 8 << 20
FLASH_USABLE = FLASH_SIZE - (256 << 10)  # the top 256 KB belong to the Teensy (EEPROM, recovery)
REGIONS = {
    "ITCM": (0x00000000, 512 << 10),
    "DTCM": (0x20000000, 512 << 10),
    "OCRAM": (0x20200000, 512 << 10),
    "flash": (FLASH, FLASH_SIZE),
}
IVT = FLASH + 0x1000
FLEXRAM_BANK = 32 << 10
FLEXRAM_BANKS = 16


class Bad(Exception):
    pass


def read_hex(text):
    """Intel HEX -> {address: byte}. Raises Bad with the line number."""
    mem = {}
    base = 0
    ended = False
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if ended:
            raise Bad(f"hex line {n}: data after the end record")
        if not line.startswith(":") or len(line) < 11 or len(line) % 2 == 0:
            raise Bad(f"hex line {n}: not an Intel HEX record")
        try:
            rec = bytes.fromhex(line[1:])
        except ValueError:
            raise Bad(f"hex line {n}: not hexadecimal")
        count, addr, kind = rec[0], (rec[1] << 8) | rec[2], rec[3]
        if len(rec) != count + 5:
            raise Bad(f"hex line {n}: length field {count} does not match the record")
        if sum(rec) & 0xFF:
            raise Bad(f"hex line {n}: bad checksum")
        data = rec[4:-1]
        if kind == 0:
            for i, b in enumerate(data):
                a = base + addr + i
                if a in mem:
                    raise Bad(f"hex line {n}: address {a:08x} given twice")
                mem[a] = b
        elif kind == 1:
            ended = True
        elif kind == 2:
            base = int.from_bytes(data, "big") << 4
        elif kind == 4:
            base = int.from_bytes(data, "big") << 16
        elif kind in (3, 5):
            pass  # start address records: the boot ROM uses the IVT
        else:
            raise Bad(f"hex line {n}: unknown record type {kind}")
    if not ended:
        raise Bad("hex: no end record")
    if not mem:
        raise Bad("hex: no data")
    return mem


def write_hex(mem):
    """{address: byte} -> Intel HEX text (16-byte records)."""
    out = []

    def rec(kind, addr, data):
        body = bytes([len(data), (addr >> 8) & 0xFF, addr & 0xFF, kind]) + bytes(data)
        out.append(":" + (body + bytes([(-sum(body)) & 0xFF])).hex().upper())

    upper = None
    addrs = sorted(mem)
    i = 0
    while i < len(addrs):
        a = addrs[i]
        if a >> 16 != upper:
            upper = a >> 16
            rec(4, 0, upper.to_bytes(2, "big"))
        chunk = [mem[a]]
        while i + len(chunk) < len(addrs) and addrs[i + len(chunk)] == a + len(chunk) and len(chunk) < 16 and \
                (a + len(chunk)) & 0xFFFF:
            chunk.append(mem[a + len(chunk)])
        rec(0, a & 0xFFFF, chunk)
        i += len(chunk)
    rec(1, 0, b"")
    return "\n".join(out) + "\n"


def word(mem, addr, what):
    try:
        return struct.unpack("<I", bytes(mem[addr + i] for i in range(4)))[0]
    except KeyError:
        raise Bad(f"{what} at {addr:08x} is not in the image")


def read_elf(path):
    with open(path, "rb") as f:
        elf = f.read()
    if elf[:4] != b"\x7fELF" or elf[4] != 1 or elf[5] != 1:
        raise Bad(f"{path}: not a 32-bit little-endian ELF file")
    (e_entry, e_phoff, e_shoff) = struct.unpack_from("<III", elf, 24)
    e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHHHH", elf, 42)
    if struct.unpack_from("<H", elf, 18)[0] != 40:
        raise Bad(f"{path}: not an ARM ELF file")
    segs = []
    for i in range(e_phnum):
        p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, _flags, _align = struct.unpack_from(
            "<IIIIIIII", elf, e_phoff + i * e_phentsize)
        if p_type == 1:  # PT_LOAD
            segs.append((p_vaddr, p_paddr, p_filesz, p_memsz, elf[p_offset:p_offset + p_filesz]))
    syms = {}
    sections = [struct.unpack_from("<IIIIIIIIII", elf, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    for sh in sections:
        if sh[1] == 2:  # SHT_SYMTAB
            strtab = sections[sh[6]]
            for off in range(sh[4], sh[4] + sh[5], 16):
                st_name, st_value, st_size = struct.unpack_from("<III", elf, off)
                end = elf.index(b"\0", strtab[4] + st_name)
                name = elf[strtab[4] + st_name:end].decode()
                if name:
                    syms[name] = (st_value, st_size)
    return e_entry, segs, syms


def region_of(addr, size):
    for name, (base, length) in REGIONS.items():
        if base <= addr and addr + size <= base + length:
            return name
    return None


def check(elf_path, hex_path, run_loader=True):
    """Returns a list of what was checked; raises Bad on the first problem."""
    done = []
    if not os.path.isfile(hex_path):
        raise Bad(f"{hex_path}: missing (build it: bash scripts/build_firmware.sh --board teensy41)")
    if not os.path.isfile(elf_path):
        raise Bad(f"{elf_path}: missing (build it: bash scripts/build_firmware.sh --board teensy41)")
    with open(hex_path) as f:
        mem = read_hex(f.read())
    lo, hi = min(mem), max(mem) + 1
    if lo < FLASH or hi > FLASH + FLASH_USABLE:
        raise Bad(f"hex data {lo:08x}..{hi:08x} lies outside the Teensy 4.1's program flash "
                  f"{FLASH:08x}..{FLASH + FLASH_USABLE:08x}")
    done.append(f"hex: {len(mem)} bytes at {lo:08x}..{hi:08x}, all in program flash")

    # FlexSPI NOR configuration block.
    if bytes(mem.get(FLASH + i, 0) for i in range(4)) != b"FCFB":
        raise Bad(f"no FlexSPI configuration block at {FLASH:08x} (tag is not 'FCFB')")
    version = word(mem, FLASH + 4, "FCFB version")
    if version >> 24 != ord("V"):
        raise Bad(f"FCFB version {version:08x} does not start with 'V'")
    dev_type, pads = mem.get(FLASH + 0x44), mem.get(FLASH + 0x45)
    a1 = word(mem, FLASH + 0x50, "FCFB flash size")
    page, sector = word(mem, FLASH + 0x1C0, "FCFB page size"), word(mem, FLASH + 0x1C4, "FCFB sector size")
    if dev_type != 1 or pads not in (1, 2, 4, 8):
        raise Bad(f"FCFB: device type {dev_type} / pads {pads}: not a serial NOR flash")
    if a1 != FLASH_SIZE or page != 256 or sector != 4096:
        raise Bad(f"FCFB: flash {a1} B, page {page}, sector {sector}: not the Teensy 4.1's W25Q64 (8 MB, 256, 4096)")
    lut0 = word(mem, FLASH + 0x80, "FCFB LUT")
    op, cmd = (lut0 >> 10) & 0x3F, lut0 & 0xFF
    if op != 0x01 or cmd not in (0x03, 0x0B, 0x3B, 0x6B, 0xBB, 0xEB):
        raise Bad(f"FCFB: LUT sequence 0 does not start with a read command (opcode {op:#x}, command {cmd:#x})")
    done.append(f"FCFB at {FLASH:08x}: version {version:08x}, 8 MB serial NOR, {pads} pads, read command {cmd:#04x}")

    # Image vector table and boot data.
    hdr = word(mem, IVT, "IVT")
    if hdr & 0xFF != 0xD1:
        raise Bad(f"IVT at {IVT:08x}: header tag {hdr & 0xFF:#04x}, not 0xD1")
    if (hdr >> 8) & 0xFFFF != 0x2000 or not 0x40 <= hdr >> 24 <= 0x43:
        raise Bad(f"IVT at {IVT:08x}: header {hdr:08x}: length must be 0x0020, version 0x40-0x43")
    entry, _r1, dcd, boot_data, self_ptr, csf = (word(mem, IVT + 4 * i, "IVT") for i in (1, 2, 3, 4, 5, 6))
    if self_ptr != IVT:
        raise Bad(f"IVT self pointer {self_ptr:08x}, not {IVT:08x}")
    if not entry & 1:
        raise Bad(f"IVT entry {entry:08x} is not a Thumb address")
    if region_of(entry & ~1, 2) is None:
        raise Bad(f"IVT entry {entry:08x} lies outside the Teensy 4.1 memory map")
    if not lo <= (entry & ~1) < hi or (entry & ~1) not in mem:
        raise Bad(f"IVT entry {entry:08x} is not inside the program image in flash")
    if not lo <= boot_data < hi:
        raise Bad(f"IVT boot data pointer {boot_data:08x} is not inside the image")
    if dcd != 0 or csf != 0:
        raise Bad(f"IVT: DCD {dcd:08x} / CSF {csf:08x} set, but the image has none")
    bd_start, bd_size, bd_plugin = (word(mem, boot_data + 4 * i, "boot data") for i in range(3))
    if bd_start != FLASH or bd_size < hi - FLASH or bd_size > FLASH_SIZE or bd_plugin != 0:
        raise Bad(f"boot data: start {bd_start:08x}, size {bd_size}, plugin {bd_plugin}: want start {FLASH:08x}, "
                  f"a size of at least {hi - FLASH} (the image), plugin 0")
    done.append(f"IVT at {IVT:08x}: header {hdr:08x}, entry {entry:08x}, boot data {boot_data:08x} "
                f"(start {bd_start:08x}, size {bd_size})")

    # ELF: entry, segments, FlexRAM, vector table.
    e_entry, segs, syms = read_elf(elf_path)
    if e_entry != entry:
        raise Bad(f"the IVT entry {entry:08x} differs from the ELF entry point {e_entry:08x}")
    itcm_end = dtcm_end = 0
    for vaddr, paddr, filesz, memsz, data in segs:
        if memsz == 0:
            continue
        where = region_of(vaddr, memsz)
        if where is None:
            raise Bad(f"segment {vaddr:08x}+{memsz} lies outside the Teensy 4.1 memory map")
        if where == "ITCM":
            itcm_end = max(itcm_end, vaddr + memsz)
        if where == "DTCM":
            dtcm_end = max(dtcm_end, vaddr + memsz - REGIONS["DTCM"][0])
        if filesz:
            if region_of(paddr, filesz) != "flash":
                raise Bad(f"segment {vaddr:08x} is loaded from {paddr:08x}, not from flash")
            if any(mem.get(paddr + i) != b for i, b in enumerate(data)):
                raise Bad(f"the hex differs from the ELF's segment at {paddr:08x}")
        done.append(f"segment {vaddr:08x}+{memsz:#x} in {where}" + (f", loaded from {paddr:08x}" if filesz else ""))
    if "__stack_top" not in syms or "ts_vectors" not in syms:
        raise Bad("the ELF lacks __stack_top or ts_vectors")
    stack_top = syms["__stack_top"][0]
    itcm_banks = -(-itcm_end // FLEXRAM_BANK)
    dtcm_banks = -(-(stack_top - REGIONS["DTCM"][0]) // FLEXRAM_BANK)
    if dtcm_end > stack_top - REGIONS["DTCM"][0] or itcm_banks + dtcm_banks > FLEXRAM_BANKS:
        raise Bad(f"FlexRAM: {itcm_banks} ITCM + {dtcm_banks} DTCM banks (data to {dtcm_end:#x}) exceed "
                  f"{FLEXRAM_BANKS} banks of 32 KB")
    done.append(f"FlexRAM: {itcm_banks} ITCM + {dtcm_banks} DTCM banks of {FLEXRAM_BANKS}, stack top {stack_top:08x}")
    vt, vt_size = syms["ts_vectors"]
    align = 128
    while align < vt_size:
        align *= 2
    if vt % align or vt_size < 4 * (16 + 160):
        raise Bad(f"vector table at {vt:08x} ({vt_size} B) is not aligned to {align} bytes for VTOR "
                  f"or has fewer than 176 entries")
    vt_load = next((p + vt - v for v, p, fs, ms, d in segs if fs and v <= vt < v + fs), None)
    if vt_load is None:
        raise Bad("the vector table is not in a loaded segment")
    sp0, reset = word(mem, vt_load, "vector table"), word(mem, vt_load + 4, "vector table")
    if region_of(sp0 - 4, 4) != "DTCM" or not reset & 1 or region_of(reset & ~1, 2) is None:
        raise Bad(f"vector table: initial SP {sp0:08x} / reset {reset:08x} not in DTCM / not Thumb code")
    done.append(f"vector table at {vt:08x} ({vt_size} B, {align}-byte aligned), SP {sp0:08x}, reset {reset:08x}")

    if run_loader:
        done.append(run_teensy_loader(hex_path, len(mem)))
    return done


def run_teensy_loader(hex_path, nbytes):
    tool = shutil.which("teensy_loader_cli")
    if not tool:
        raise Bad("teensy_loader_cli is not installed (Debian package teensy-loader-cli; "
                  "scripts/build_firmware.sh --board teensy41 installs it)")
    # Without -w it reads the file, then fails to find a board: exit code 1.
    r = subprocess.run([tool, "--mcu=TEENSY41", "-v", hex_path], capture_output=True, text=True, timeout=30)
    out = r.stdout + r.stderr
    m = re.search(r'Read "[^"]*": (\d+) bytes', out)
    if "error" in out.lower() or not m:
        raise Bad("teensy_loader_cli does not accept the hex: " + " | ".join(out.split("\n")).strip())
    if int(m.group(1)) != nbytes:
        raise Bad(f"teensy_loader_cli read {m.group(1)} bytes, the hex holds {nbytes}")
    return f"teensy_loader_cli --mcu=TEENSY41: read {m.group(1)} bytes"


def negative_tests(elf_path, hex_path):
    """Each broken copy must be rejected, with the expected reason."""
    check(elf_path, hex_path, run_loader=False)  # the original is good
    with open(hex_path) as f:
        text = f.read()
    mem = read_hex(text)

    def mutated(changes):
        m = dict(mem)
        for addr, value in changes.items():
            m[addr] = value
        return write_hex(m)

    entry = word(mem, IVT + 4, "IVT")
    bad_checksum = text.splitlines()
    for i, line in enumerate(bad_checksum):
        if line[7:9] == "00" and len(line) > 13:  # a data record
            last = int(line[-2:], 16)
            bad_checksum[i] = line[:-2] + f"{(last + 1) & 0xFF:02X}"
            break
    cases = [
        ("IVT tag flipped", mutated({IVT: mem[IVT] ^ 0xFF}), "header tag", False),
        ("FCFB tag broken", mutated({FLASH: ord("X")}), "FCFB", False),
        ("IVT self pointer wrong", mutated({IVT + 0x15: mem[IVT + 0x15] ^ 0x01}), "self pointer", False),
        ("IVT entry outside the map", mutated({IVT + 7: 0x70}), "IVT entry", False),
        ("boot data size too small", mutated({word(mem, IVT + 16, "") + 4 + i: 0 for i in range(4)}),
         "boot data", False),
        ("code byte changed (hex != ELF)", mutated({(entry & ~1) + 64: mem[(entry & ~1) + 64] ^ 0x5A}),
         "differs from the ELF", False),
        ("data outside the flash", mutated({FLASH + FLASH_USABLE + 16: 0}), "outside", False),
        ("record with a bad checksum", "\n".join(bad_checksum) + "\n", "bad checksum", True),
    ]
    failures = 0
    tmp = tempfile.mkdtemp(prefix="teensy-neg-")
    try:
        for name, hex_text, reason, also_loader in cases:
            path = os.path.join(tmp, "broken.hex")
            with open(path, "w") as f:
                f.write(hex_text)
            try:
                check(elf_path, path, run_loader=False)
                print(f"NOT REJECTED: {name}")
                failures += 1
                continue
            except Bad as e:
                if reason not in str(e):
                    print(f"REJECTED FOR THE WRONG REASON: {name}: {e}")
                    failures += 1
                    continue
                print(f"rejected as expected: {name}: {e}")
            if also_loader:
                # The loader itself must refuse a corrupt file too.
                try:
                    run_teensy_loader(path, 0)
                    print(f"NOT REJECTED by teensy_loader_cli: {name}")
                    failures += 1
                except Bad as e:
                    print(f"  teensy_loader_cli refuses it too: {e}")
    finally:
        shutil.rmtree(tmp)
    return failures


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 2 or any(a not in ("--negative-tests",) for a in argv if a.startswith("--")):
        print("usage: check_teensy_image.py [--negative-tests] ELF HEX", file=sys.stderr)
        return 2
    elf_path, hex_path = args
    try:
        if "--negative-tests" in argv:
            failures = negative_tests(elf_path, hex_path)
            print("negative tests: " + ("ok" if not failures else f"{failures} FAILED"))
            return 1 if failures else 0
        for line in check(elf_path, hex_path):
            print("ok: " + line)
        print("teensy image: ok")
        return 0
    except Bad as e:
        print(f"check_teensy_image: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
