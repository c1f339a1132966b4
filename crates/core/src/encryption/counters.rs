//! Counter organisations: how one 64-B node packs the counters of the nodes or lines below it
//! (the counter-tree family). A node keeps its counters in its first 56 bytes (448 bits); the
//! scheme that uses it keeps its MAC in the rest. Each format gives every child an *effective
//! counter* that only ever grows, so a (child, counter) pair never repeats: a pad or a MAC
//! bound to it is never reused.
//!
//! - `Mono`: eight 56-bit counters (SGX's version and tree nodes, Gueron 2016).
//! - `Split`: a 64-bit major and `arity` minors (Yan et al., ISCA 2006); counter =
//!   major·2^bits + minor. VAULT (Taassori et al., ASPLOS 2018) is split counters at arity 64,
//!   32 and 16 by level. With the node's MAC in the node the minors are 6, 12 and 24 bits
//!   ((448 − 64) / arity); the morphcounters artifact's VAULT configuration (SC-64 with 7-bit
//!   minors at the leaves) assumes the MAC outside the node.
//! - `Morphable`: 128 counters (Saileshwar et al., MICRO 2018), in one of two formats chosen per
//!   update, following the authors' simulator (github.com/gururaj-s/morphcounters,
//!   src_turbo/ctr_sim.c `check_overflow`, compression.c `ada_dyn0_comp`, `uncomp`,
//!   `try_rebase`; the configuration of run_MICRO_5Bn.sh, compression mode 8):
//!   - ZCC (zero-counter compression), format bit 0: a 56-bit major, a 128-bit vector of the
//!     non-zero counters, and 263 bits shared equally by the non-zero ones (⌊263/nnz⌋ bits
//!     each, at most 56); counter = major + minor;
//!   - uncompressed, format bit 1: a 49-bit major M, two 7-bit bases (one per half of 64
//!     counters) and 128 3-bit minors; counter = M·2^7 + base_half + minor.
//!
//!   An increment is kept in the current format if it fits, else in the uncompressed one (a
//!   line once uncompressed stays so until an overflow, as the authors' `comp_mode`); if
//!   neither fits, the half's minors are *rebased* (their smallest value moves into the half's
//!   base: no effective counter changes) and ZCC then uncompressed are tried again; if that
//!   fails too, the half *overflows*: its base grows by its largest minor + 1 and its minors
//!   restart at 0, so its 64 children change counters (re-encrypted or re-MACed by the
//!   caller). When the halves' bases then no longer share M, the whole node restarts at one
//!   base above its largest counter (all 128 children change).
//!
//! The bit layouts are this module's: the papers give field widths, not bit positions. The
//! authors' simulator counts bits with a 50-bit major and a 56-bit MAC outside the counters;
//! here the major and the MAC share the line with the counters (448 + 56 bits), so ZCC's
//! shared field is 263 bits where theirs is 277.

use std::ops::Range;

/// Bytes of a node that hold counters.
pub const PAYLOAD: usize = 56;

/// How a node packs its children's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Mono,
    Split { arity: u32, bits: u32 },
    Morphable,
}

/// An increment that would pass the largest counter the format can hold.
#[derive(Debug)]
pub struct Exhausted;

/// Bits `at..at+n` (n ≤ 64) of `b`, little-endian bit order.
fn get_bits(b: &[u8], at: usize, n: u32) -> u64 {
    if n == 0 {
        return 0;
    }
    let (start, end) = (at / 8, (at + n as usize).div_ceil(8));
    let mut v = 0u128;
    for (k, byte) in b[start..end].iter().enumerate() {
        v |= (*byte as u128) << (8 * k);
    }
    ((v >> (at % 8)) & ((1u128 << n) - 1)) as u64
}

fn set_bits(b: &mut [u8], at: usize, n: u32, v: u64) {
    if n == 0 {
        return;
    }
    let (start, end) = (at / 8, (at + n as usize).div_ceil(8));
    let shift = at % 8;
    let mask = ((1u128 << n) - 1) << shift;
    let mut w = 0u128;
    for (k, byte) in b[start..end].iter().enumerate() {
        w |= (*byte as u128) << (8 * k);
    }
    w = (w & !mask) | (((v as u128) << shift) & mask);
    for (k, byte) in b[start..end].iter_mut().enumerate() {
        *byte = (w >> (8 * k)) as u8;
    }
}

const MONO_BITS: u32 = 56;
const MONO_MAX: u64 = (1 << MONO_BITS) - 1;
const MAJOR_BITS: u32 = 64;

// Morphable layout (bit positions in the payload).
const M_ARITY: usize = 128;
const M_HALF: usize = 64;
const ZCC_MAJOR_AT: usize = 1;
const ZCC_MAJOR_BITS: u32 = 56;
const ZCC_VECTOR_AT: usize = 57;
const ZCC_FIELD_AT: usize = 185;
const ZCC_FIELD_BITS: usize = PAYLOAD * 8 - ZCC_FIELD_AT;
const ZCC_MAX_WIDTH: usize = 56;
const UNC_M_AT: usize = 1;
const UNC_M_BITS: u32 = 49;
const UNC_BASE_AT: usize = 50;
const UNC_BASE_BITS: u32 = 7;
const UNC_MINOR_AT: usize = 64;
const UNC_MINOR_BITS: u32 = 3;

/// A morphable node decoded: each half's base and every minor (counter = base + minor).
struct Morph {
    base: [u64; 2],
    minor: [u64; M_ARITY],
}

fn zcc_width(nnz: usize) -> usize {
    if nnz == 0 { ZCC_MAX_WIDTH } else { (ZCC_FIELD_BITS / nnz).min(ZCC_MAX_WIDTH) }
}

/// Fields appended from bit 0 of a payload (both morphable formats are contiguous fields).
struct Writer {
    out: [u8; PAYLOAD],
    acc: u128,
    n: u32,
    pos: usize,
}

impl Writer {
    fn new() -> Writer {
        Writer { out: [0; PAYLOAD], acc: 0, n: 0, pos: 0 }
    }

    fn put(&mut self, width: u32, v: u64) {
        self.acc |= (v as u128) << self.n;
        self.n += width;
        if self.n >= 64 {
            self.out[self.pos..self.pos + 8].copy_from_slice(&(self.acc as u64).to_le_bytes());
            self.pos += 8;
            self.acc >>= 64;
            self.n -= 64;
        }
    }

    fn finish(self, b: &mut [u8]) {
        let mut out = self.out;
        let rest = (self.n as usize).div_ceil(8);
        out[self.pos..self.pos + rest].copy_from_slice(&self.acc.to_le_bytes()[..rest]);
        b[..PAYLOAD].copy_from_slice(&out);
    }
}

/// Fields read in order from bit 0 of a payload.
struct Reader<'a> {
    b: &'a [u8],
    acc: u128,
    n: u32,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b, acc: 0, n: 0, pos: 0 }
    }

    fn get(&mut self, width: u32) -> u64 {
        if self.n < width {
            let mut w = [0u8; 8];
            let k = (PAYLOAD - self.pos).min(8);
            w[..k].copy_from_slice(&self.b[self.pos..self.pos + k]);
            self.pos += k;
            self.acc |= (u64::from_le_bytes(w) as u128) << self.n;
            self.n += 64;
        }
        let v = (self.acc & ((1u128 << width) - 1)) as u64;
        self.acc >>= width;
        self.n -= width;
        v
    }
}

impl Morph {
    fn decode(b: &[u8]) -> Morph {
        let mut s = Morph { base: [0; 2], minor: [0; M_ARITY] };
        let mut r = Reader::new(b);
        if r.get(1) == 0 {
            let major = r.get(ZCC_MAJOR_BITS);
            s.base = [major, major];
            let vector = r.get(64) as u128 | (r.get(64) as u128) << 64;
            let w = zcc_width(vector.count_ones() as usize) as u32;
            for i in 0..M_ARITY {
                if vector >> i & 1 == 1 {
                    s.minor[i] = r.get(w);
                }
            }
        } else {
            let m = r.get(UNC_M_BITS) << UNC_BASE_BITS;
            for h in 0..2 {
                s.base[h] = m + r.get(UNC_BASE_BITS);
            }
            for v in s.minor.iter_mut() {
                *v = r.get(UNC_MINOR_BITS);
            }
        }
        s
    }

    fn counter(&self, i: usize) -> u64 {
        self.base[i / M_HALF] + self.minor[i]
    }

    /// Encode in ZCC if `zcc_first` and it fits, else uncompressed if it fits.
    fn encode(&self, b: &mut [u8], zcc_first: bool) -> bool {
        if zcc_first && self.base[0] == self.base[1] && self.base[0] >> ZCC_MAJOR_BITS == 0 {
            let vector = self.minor.iter().enumerate().fold(0u128, |v, (i, &m)| v | ((m != 0) as u128) << i);
            let w = zcc_width(vector.count_ones() as usize);
            if self.minor.iter().all(|&v| v >> w == 0) {
                let mut o = Writer::new();
                o.put(1, 0);
                o.put(ZCC_MAJOR_BITS, self.base[0]);
                o.put(64, vector as u64);
                o.put(64, (vector >> 64) as u64);
                for &v in self.minor.iter().filter(|&&v| v != 0) {
                    o.put(w as u32, v);
                }
                o.finish(b);
                return true;
            }
        }
        let m = self.base[0] >> UNC_BASE_BITS;
        if m == self.base[1] >> UNC_BASE_BITS && m >> UNC_M_BITS == 0 && self.minor.iter().all(|&v| v >> UNC_MINOR_BITS == 0) {
            let mut o = Writer::new();
            o.put(1, 1);
            o.put(UNC_M_BITS, m);
            for h in 0..2 {
                o.put(UNC_BASE_BITS, self.base[h] & ((1 << UNC_BASE_BITS) - 1));
            }
            for &v in self.minor.iter() {
                o.put(UNC_MINOR_BITS, v);
            }
            o.finish(b);
            return true;
        }
        false
    }
}

impl Format {
    /// Children one node counts.
    pub fn arity(&self) -> u64 {
        match self {
            Format::Mono => (PAYLOAD * 8) as u64 / MONO_BITS as u64,
            Format::Split { arity, .. } => *arity as u64,
            Format::Morphable => M_ARITY as u64,
        }
    }

    /// Split counters at `arity` with as many bits a minor as the payload leaves.
    pub fn split(arity: u32) -> Format {
        Format::Split { arity, bits: (PAYLOAD as u32 * 8 - MAJOR_BITS) / arity }
    }

    /// Child `i`'s counter in node bytes `b`.
    pub fn get(&self, b: &[u8], i: usize) -> u64 {
        match *self {
            Format::Mono => get_bits(b, i * MONO_BITS as usize, MONO_BITS),
            Format::Split { bits, .. } => get_bits(b, 0, MAJOR_BITS) << bits | get_bits(b, MAJOR_BITS as usize + i * bits as usize, bits),
            Format::Morphable => {
                if get_bits(b, 0, 1) == 0 {
                    let major = get_bits(b, ZCC_MAJOR_AT, ZCC_MAJOR_BITS);
                    let vector = get_bits(b, ZCC_VECTOR_AT, 64) as u128 | (get_bits(b, ZCC_VECTOR_AT + 64, 64) as u128) << 64;
                    if vector >> i & 1 == 0 {
                        return major;
                    }
                    let w = zcc_width(vector.count_ones() as usize);
                    let rank = (vector & ((1u128 << i) - 1)).count_ones() as usize;
                    major + get_bits(b, ZCC_FIELD_AT + rank * w, w as u32)
                } else {
                    (get_bits(b, UNC_M_AT, UNC_M_BITS) << UNC_BASE_BITS)
                        + get_bits(b, UNC_BASE_AT + (i / M_HALF) * UNC_BASE_BITS as usize, UNC_BASE_BITS)
                        + get_bits(b, UNC_MINOR_AT + i * UNC_MINOR_BITS as usize, UNC_MINOR_BITS)
                }
            }
        }
    }

    /// Increment child `i`'s counter in `b`. Ok(None): only its counter changed; Ok(Some(r)):
    /// an overflow gave every child in `r` (i among them) a new, larger counter.
    pub fn bump(&self, b: &mut [u8], i: usize) -> Result<Option<Range<usize>>, Exhausted> {
        match *self {
            Format::Mono => {
                let v = self.get(b, i);
                if v >= MONO_MAX {
                    return Err(Exhausted);
                }
                set_bits(b, i * MONO_BITS as usize, MONO_BITS, v + 1);
                Ok(None)
            }
            Format::Split { arity, bits } => {
                let minor = get_bits(b, MAJOR_BITS as usize + i * bits as usize, bits) + 1;
                if minor >> bits == 0 {
                    set_bits(b, MAJOR_BITS as usize + i * bits as usize, bits, minor);
                    return Ok(None);
                }
                let major = get_bits(b, 0, MAJOR_BITS) + 1;
                if major >> (MAJOR_BITS - bits) != 0 {
                    return Err(Exhausted);
                }
                b[..PAYLOAD].fill(0);
                set_bits(b, 0, MAJOR_BITS, major);
                Ok(Some(0..arity as usize))
            }
            Format::Morphable => {
                let zcc = get_bits(b, 0, 1) == 0;
                // Fast paths: the counter grows in place, no other field moves.
                if zcc {
                    let vector = get_bits(b, ZCC_VECTOR_AT, 64) as u128 | (get_bits(b, ZCC_VECTOR_AT + 64, 64) as u128) << 64;
                    if vector >> i & 1 == 1 {
                        let w = zcc_width(vector.count_ones() as usize);
                        let at = ZCC_FIELD_AT + (vector & ((1u128 << i) - 1)).count_ones() as usize * w;
                        let v = get_bits(b, at, w as u32) + 1;
                        if v >> w == 0 {
                            set_bits(b, at, w as u32, v);
                            return Ok(None);
                        }
                    }
                } else {
                    let at = UNC_MINOR_AT + i * UNC_MINOR_BITS as usize;
                    let v = get_bits(b, at, UNC_MINOR_BITS) + 1;
                    if v >> UNC_MINOR_BITS == 0 {
                        set_bits(b, at, UNC_MINOR_BITS, v);
                        return Ok(None);
                    }
                }
                let mut s = Morph::decode(b);
                let half = i / M_HALF;
                let span = half * M_HALF..(half + 1) * M_HALF;
                let old_max = s.minor[span.clone()].iter().copied().max().unwrap_or(0);
                s.minor[i] += 1;
                if s.encode(b, zcc) {
                    return Ok(None);
                }
                let low = s.minor[span.clone()].iter().copied().min().unwrap_or(0);
                if low > 0 {
                    s.base[half] += low;
                    s.minor[span.clone()].iter_mut().for_each(|v| *v -= low);
                    if s.encode(b, true) {
                        return Ok(None);
                    }
                    s.base[half] -= low;
                    s.minor[span.clone()].iter_mut().for_each(|v| *v += low);
                }
                s.minor[i] -= 1;
                // The half overflows: every counter in it moves above its largest.
                let mut o = Morph { base: s.base, minor: s.minor };
                o.base[half] += old_max + 1;
                o.minor[span.clone()].iter_mut().for_each(|v| *v = 0);
                if o.encode(b, true) {
                    return Ok(Some(span));
                }
                let top = (0..M_ARITY).map(|j| s.counter(j)).max().unwrap_or(0) + 1;
                let all = Morph { base: [top, top], minor: [0; M_ARITY] };
                if !all.encode(b, true) {
                    return Err(Exhausted);
                }
                Ok(Some(0..M_ARITY))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::xorshift;

    /// Drive `f` with increments from `seq`, checking against a model: counters only grow,
    /// an increment raises exactly its child's counter unless it reports an overflow, and
    /// an overflow raises every counter it names and only those.
    fn check(f: Format, seq: impl Iterator<Item = usize>) -> (u64, Vec<u64>) {
        let mut b = [0u8; PAYLOAD];
        let n = f.arity() as usize;
        let mut model = vec![0u64; n];
        let mut overflows = 0;
        for i in seq {
            let r = f.bump(&mut b, i).expect("not exhausted");
            let now: Vec<u64> = (0..n).map(|j| f.get(&b, j)).collect();
            match r {
                None => {
                    for j in 0..n {
                        if j == i {
                            assert!(now[j] > model[j], "{:?}: child {} did not grow", f, j);
                        } else {
                            assert_eq!(now[j], model[j], "{:?}: child {} changed without an overflow", f, j);
                        }
                    }
                }
                Some(r) => {
                    overflows += 1;
                    assert!(r.contains(&i));
                    for j in 0..n {
                        if r.contains(&j) {
                            assert!(now[j] > model[j], "{:?}: child {} in the overflow did not grow", f, j);
                        } else {
                            assert_eq!(now[j], model[j], "{:?}: child {} outside the overflow changed", f, j);
                        }
                    }
                }
            }
            model = now;
        }
        (overflows, model)
    }

    #[test]
    fn the_sequential_fields_sit_where_the_layout_constants_say() {
        // ZCC: format, major, vector, field; uncompressed: format, M, bases, minors.
        assert_eq!((ZCC_MAJOR_AT, ZCC_VECTOR_AT, ZCC_FIELD_AT), (1, 1 + 56, 1 + 56 + 128));
        assert_eq!((UNC_M_AT, UNC_BASE_AT, UNC_MINOR_AT), (1, 1 + 49, 1 + 49 + 14));
        assert_eq!(UNC_MINOR_AT + M_ARITY * UNC_MINOR_BITS as usize, PAYLOAD * 8);
        let mut s = Morph { base: [0xABCDE, 0xABCDE], minor: [0; M_ARITY] };
        for (i, v) in [(3usize, 5u64), (77, 1), (127, 300)] {
            s.minor[i] = v;
        }
        let mut b = [0u8; PAYLOAD];
        assert!(s.encode(&mut b, true));
        assert_eq!(get_bits(&b, ZCC_MAJOR_AT, ZCC_MAJOR_BITS), 0xABCDE);
        assert_eq!(get_bits(&b, ZCC_VECTOR_AT + 77, 1), 1);
        assert_eq!(get_bits(&b, ZCC_FIELD_AT + 2 * zcc_width(3), zcc_width(3) as u32), 300);
        for i in 0..M_ARITY {
            assert_eq!(Format::Morphable.get(&b, i), s.counter(i));
        }
        let mut u = Morph { base: [0x1234 << 7 | 5, 0x1234 << 7 | 9], minor: [0; M_ARITY] };
        u.minor[100] = 6;
        assert!(u.encode(&mut b, true), "bases differ: uncompressed");
        assert_eq!(get_bits(&b, UNC_MINOR_AT + 100 * 3, 3), 6);
        assert_eq!(get_bits(&b, UNC_BASE_AT + 7, 7), 9);
        for i in 0..M_ARITY {
            assert_eq!(Format::Morphable.get(&b, i), u.counter(i));
        }
    }

    #[test]
    fn mono_matches_sgx_seven_byte_counters() {
        let mut b = [0u8; PAYLOAD];
        b[7..14].copy_from_slice(&0x00AB_CDEF_0123_45u64.to_le_bytes()[..7]);
        assert_eq!(Format::Mono.get(&b, 1), 0x00AB_CDEF_0123_45);
        assert_eq!(Format::Mono.arity(), 8);
        Format::Mono.bump(&mut b, 1).unwrap();
        assert_eq!(&b[7..14], &0x00AB_CDEF_0123_46u64.to_le_bytes()[..7]);
    }

    #[test]
    fn vault_levels_have_6_12_24_bit_minors_and_overflow_at_their_limit() {
        for (arity, bits) in [(64u32, 6u32), (32, 12), (16, 24)] {
            let f = Format::split(arity);
            assert_eq!(f, Format::Split { arity, bits });
            // Child 3 written 2^bits times: the last write overflows, once.
            let (o, model) = check(f, std::iter::repeat(3).take(1 << bits.min(12)));
            if bits <= 12 {
                assert_eq!(o, 1, "arity {}", arity);
                assert_eq!(model[3], 1 << bits, "the major moved to 1, minors to 0");
            }
        }
    }

    #[test]
    fn morphable_compresses_few_writers_and_morphs_rebases_and_overflows_with_many() {
        let f = Format::Morphable;
        // One hot child: ZCC gives it 56 bits; no overflow in 5000 writes.
        let (o, model) = check(f, std::iter::repeat(5).take(5000));
        assert_eq!((o, model[5]), (0, 5000));
        // Every child written once (ZCC at 2 bits each), then child 0 again and again: it
        // moves to the uncompressed format, rebases half 0 once (min 1), then overflows half 0
        // every 8 writes; half 1 never changes.
        let seq = (0..128).chain(std::iter::repeat(0).take(40));
        let (o, model) = check(f, seq);
        assert!(o >= 3, "{}", o);
        assert_eq!(model[100], 1);
        let mut b = [0u8; PAYLOAD];
        for i in 0..128 {
            f.bump(&mut b, i).unwrap();
        }
        assert_eq!(get_bits(&b, 0, 1), 0, "128 ones fit ZCC (2 bits each)");
        for _ in 0..3 {
            f.bump(&mut b, 0).unwrap();
        }
        assert_eq!(get_bits(&b, 0, 1), 1, "a 4 does not fit 2 bits: uncompressed");
        // A pseudo-random mix over all children: the model check holds throughout.
        let mut x = 7u64;
        let seq = (0..20_000).map(move |_| {
            let x = xorshift(&mut x);
            if x % 4 == 0 { (x >> 8) as usize % 128 } else { (x >> 8) as usize % 3 }
        });
        let (o, _) = check(f, seq);
        assert!(o > 0);
    }
}
