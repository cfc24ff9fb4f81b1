#include "core/act_code.h"

namespace ts {
namespace core {

bool CodeParams::from_mode(uint8_t mode, uint8_t fill, CodeParams* out) {
  if ((mode & ~7u) || ((mode & 4) && (mode & 3))) return false;
  out->fill = fill;
  out->flag = (mode & 1) != 0;
  out->zigzag = (mode & 2) != 0;
  out->mask = (mode & 4) != 0;
  return true;
}

CodeParams code_params_for(int32_t out_zp, int32_t act_min, bool mask) {
  // Clamped at (or above) the zero point: no value lies below the clamp, and
  // after a ReLU many sit on it.
  const bool clamped = act_min >= out_zp;
  CodeParams p;
  p.fill = uint8_t(int8_t(clamped ? act_min : out_zp));
  p.mask = mask;
  p.flag = !mask && clamped;
  p.zigzag = !mask && !clamped;
  return p;
}

namespace {

// The code's u for value v, or -1 for a flagged fill value (one bit, no u).
inline int32_t code_of(uint8_t v, const CodeParams& p) {
  const uint32_t d = uint8_t(v - p.fill);
  if (p.flag && d == 0) return -1;
  uint32_t u = d;
  if (p.zigzag) {
    const int32_t s = int8_t(uint8_t(d));
    u = s >= 0 ? uint32_t(2 * s) : uint32_t(-2 * s - 1);
  }
  return int32_t(p.flag ? u - 1 : u);
}

// The bits of value v (the lowest `*len` of the result), and the Rice
// state moved past it.
inline uint32_t code_bits(uint8_t v, const CodeParams& p, RiceState* rice, uint32_t* len) {
  const int32_t u = code_of(v, p);
  if (u < 0) {
    *len = 1;
    return 1;  // the flag alone
  }
  const uint32_t k = rice->k();
  const uint32_t q = uint32_t(u) >> k;
  uint32_t code, n;
  if (q >= kCodeEscape) {
    code = ((1u << kCodeEscape) - 1u) | (uint32_t(u) << kCodeEscape);
    n = kCodeEscape + 8;
  } else {
    // q ones, a zero, the k low bits.
    code = ((1u << q) - 1u) | ((uint32_t(u) & ((1u << k) - 1u)) << (q + 1));
    n = q + 1 + k;
  }
  rice->update(uint32_t(u));
  if (p.flag) {
    code <<= 1;  // the flag bit, 0
    ++n;
  }
  *len = n;
  return code;
}

}  // namespace

size_t CodeWriter::code_masked(const uint8_t* v, size_t n) {
  State s = s_;
  const uint8_t fill = p_.fill;
  const uint64_t cap = cap_bits_ / 8;
  uint8_t* const out = out_;
  size_t i = 0;
  // Whole groups with room for all 8 values, without a branch per value.
  if (out && s.nacc == 0)
    while (n - i >= 8 && s.at + 9 <= cap) {
      uint8_t* o = out + s.at + 1;
      uint32_t m = 0;
      for (uint32_t j = 0; j < 8; ++j) {
        const uint8_t x = v[i + j];
        const uint32_t same = x == fill;
        *o = x;
        o += 1 - same;
        m |= same << j;
      }
      out[s.at] = uint8_t(m);
      s.at = size_t(o - out);
      i += 8;
    }
  for (; i < n; ++i) {
    const bool open = s.nacc != 0;  // a group has room
    const bool is_fill = v[i] == fill;
    if (s.at + (open ? 0 : 1) + (is_fill ? 0 : 1) > cap) break;
    if (!open) {
      s.mask_at = s.at++;
      s.acc = 0;
    }
    if (is_fill) s.acc |= 1u << s.nacc;
    else if (out) out[s.at++] = v[i];
    else ++s.at;
    if (out) out[s.mask_at] = uint8_t(s.acc);
    s.nacc = (s.nacc + 1) & 7;
  }
  s_ = s;
  return i;
}

size_t CodeWriter::code(const uint8_t* v, size_t n) {
  if (p_.mask) return code_masked(v, n);
  // The state in locals: the compiler need not reload it after each store
  // to out_ (a byte pointer may alias anything).
  State s = s_;
  const CodeParams p = p_;
  uint8_t* const out = out_;
  size_t i = 0;
  while (i < n) {
    // Values that fit whatever their codes: no check for each.
    const uint64_t room = cap_bits_ - (uint64_t(s.at) * 8 + s.nacc);
    size_t sure = size_t(room / kCodeMaxBits);
    if (sure > n - i) sure = n - i;
    if (sure == 0) {
      // Near the end: one value, if its code fits.
      RiceState r = s.rice;
      uint32_t len;
      const uint32_t code = code_bits(v[i], p, &r, &len);
      if (len > room) break;
      s.rice = r;
      s.acc |= code << s.nacc;
      s.nacc += len;
      ++i;
    }
    for (const size_t end = i + sure; i < end; ++i) {
      uint32_t len;
      s.acc |= code_bits(v[i], p, &s.rice, &len) << s.nacc;  // nacc < 8, len <= 21: within 32 bits
      s.nacc += len;
      for (; s.nacc >= 8; s.nacc -= 8, s.acc >>= 8) {
        if (out) out[s.at] = uint8_t(s.acc);
        ++s.at;
      }
    }
    for (; s.nacc >= 8; s.nacc -= 8, s.acc >>= 8) {
      if (out) out[s.at] = uint8_t(s.acc);
      ++s.at;
    }
  }
  s_ = s;
  return i;
}

bool CodeWriter::put(const uint8_t* v, size_t n) {
  const State saved = s_;
  if (code(v, n) == n) return true;
  s_ = saved;
  return false;
}

size_t CodeWriter::put_most(const uint8_t* v, size_t n) { return code(v, n); }

size_t CodeWriter::finish() {
  if (p_.mask) {
    // The open group's mask again (a put() taken back may have set more
    // bits in it), and the group ends here.
    if (out_ && s_.nacc != 0) out_[s_.mask_at] = uint8_t(s_.acc);
    s_.nacc = 0;
    return s_.at;
  }
  if (s_.nacc > 0) {
    if (out_) out_[s_.at] = uint8_t(s_.acc);
    ++s_.at;
    s_.acc = s_.nacc = 0;
  }
  return s_.at;
}

bool CodeReader::get_masked(uint8_t* dst, size_t n) {
  const uint8_t fill = p_.fill;
  uint32_t mask = buf_, left = nbuf_;
  size_t at = at_;
  bool ok = true;
  size_t i = 0;
  // Whole groups whose bytes are surely there, without a branch per value.
  if (dst && left == 0) {
    uint32_t bad = 0;
    while (n - i >= 8 && len_ - at >= 9) {
      const uint32_t m = in_[at++];
      for (uint32_t j = 0; j < 8; ++j) {
        const uint32_t same = (m >> j) & 1u;
        const uint8_t x = in_[at];
        bad |= (1u - same) & uint32_t(x == fill);  // the fill belongs in the mask
        dst[i + j] = same ? fill : x;
        at += 1 - same;
      }
      i += 8;
    }
    if (bad) ok = false, i = n;
  }
  for (; i < n; ++i) {
    if (left == 0) {
      if (at >= len_) {
        ok = false;
        break;
      }
      mask = in_[at++];
      left = 8;
    }
    uint8_t x = fill;
    if (!(mask & 1u)) {
      if (at >= len_) {
        ok = false;
        break;
      }
      x = in_[at++];
      if (x == fill) {  // the fill goes in the mask: one code per value
        ok = false;
        break;
      }
    }
    if (dst) dst[i] = x;
    mask >>= 1;
    --left;
  }
  buf_ = mask;
  nbuf_ = left;
  at_ = at;
  return ok;
}

bool CodeReader::get(uint8_t* dst, size_t n) {
  if (p_.mask) return get_masked(dst, n);
  // The largest u a mode can code: flagged codes leave out d == 0.
  const uint32_t max_u = p_.flag ? 254u : 255u;
  const bool flag = p_.flag, zigzag = p_.zigzag;
  const uint8_t fill = p_.fill;
  // The state in locals (see CodeWriter::code).
  uint32_t buf = buf_, nbuf = nbuf_;
  size_t at = at_;
  RiceState rice = rice_;
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    // At least kCodeMaxBits (21) bits, or all that are left: 8 at a time
    // while 24 or fewer are held.
    while (nbuf <= 24 && at < len_) {
      buf |= uint32_t(in_[at++]) << nbuf;
      nbuf += 8;
    }
    uint32_t used = 0;
    if (flag) {
      if (buf & 1u) {  // bits past the input are 0: this one is real
        buf >>= 1;
        --nbuf;
        if (dst) dst[i] = fill;
        continue;
      }
      used = 1;
    }
    const uint32_t b = buf >> used;
    const uint32_t k = rice.k();
    const uint32_t ones = uint32_t(__builtin_ctz(~b | (1u << kCodeEscape)));
    uint32_t u;
    if (ones == kCodeEscape) {
      u = (b >> kCodeEscape) & 0xFFu;
      // Escaped only when Rice's quotient is kCodeEscape or more: one code
      // per value.
      if ((u >> k) < kCodeEscape) {
        ok = false;
        break;
      }
      used += kCodeEscape + 8;
    } else {
      u = (ones << k) | ((b >> (ones + 1)) & ((1u << k) - 1u));
      used += ones + 1 + k;
    }
    if (used > nbuf || u > max_u) {
      ok = false;
      break;
    }
    buf >>= used;  // used <= 21
    nbuf -= used;
    rice.update(u);
    if (flag) ++u;
    uint32_t d = u;
    if (zigzag) d = (u & 1u) ? uint32_t(-int32_t((u + 1) >> 1)) : (u >> 1);
    if (dst) dst[i] = uint8_t(fill + d);
  }
  buf_ = buf;
  nbuf_ = nbuf;
  at_ = at;
  rice_ = rice;
  return ok;
}

bool CodeReader::finish() const {
  // Every byte taken; Rice: fewer than 8 bits left of them, and those 0;
  // mask: the last group's unused mask bits 0.
  if (p_.mask) return at_ == len_ && buf_ == 0;
  return at_ == len_ && nbuf_ < 8 && buf_ == 0;
}

size_t coded_bytes(const uint8_t* v, size_t n, CodeParams p) {
  CodeWriter w(nullptr, ~size_t(0) / 8, p);
  w.put(v, n);
  return w.bytes();
}

}  // namespace core
}  // namespace ts
