//! Records read ahead in the layout the core model reads: a [`Packed`] slot of one cache line
//! holding what changes from one execution of an instruction to the next (op class, branch
//! outcome, thread, addresses, values inline), and an index into a table of [`Shape`]s, the
//! static parts (pc, length, registers, the accesses' kinds and sizes), which repeat in 98% of
//! a tracer's records.
//!
//! An [`Instr`] slot took the static part's fields copied into it for every record and its
//! accesses and values in two heap buffers of its own: three or more lines a record written
//! on the reader's core and read on the simulator's. One line instead took 3-18% off the CPU
//! per instruction on the side-by-side traces, the host instructions within 2%
//! (docs/speed.md, fifth pass).
//! A record that does not fit (an external record, more than [`PACKED_ACCESSES`] accesses,
//! more than [`PACKED_BYTES`] bytes of values) is kept whole in a spill slot, an `Instr`,
//! which the packed slot names; a source that packs ([`crate::NativeReader`]) packs every
//! other record, however it read it.

use crate::record::{Access, Branch, Instr, OpClass, Record, Reg, MAX_DST, MAX_SRC};

/// Accesses a packed record holds.
pub const PACKED_ACCESSES: usize = 2;
/// Bytes of values a packed record holds.
pub const PACKED_BYTES: usize = 32;
/// `Packed::shape` of a record kept in a spill slot.
const SPILLED: u32 = u32::MAX;

/// The static part of an instruction of at most [`PACKED_ACCESSES`] accesses and
/// [`PACKED_BYTES`] bytes of values: the value of access k is `data[off[k]..off[k] + size[k]]`
/// of its [`Packed`] slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    pub pc: u64,
    pub len: u8,
    pub nsrc: u8,
    pub src: [Reg; MAX_SRC],
    pub ndst: u8,
    pub dst: [Reg; MAX_DST],
    pub nacc: u8,
    pub store: [bool; PACKED_ACCESSES],
    pub size: [u8; PACKED_ACCESSES],
    pub off: [u8; PACKED_ACCESSES],
}

impl Shape {
    /// The shape of an instruction at `pc` of these registers and accesses ((store, size)
    /// each), if it fits a packed slot.
    pub fn new(pc: u64, len: u8, srcs: &[Reg], dsts: &[Reg], acc: &[(bool, u32)]) -> Option<Shape> {
        if acc.len() > PACKED_ACCESSES || srcs.len() > MAX_SRC || dsts.len() > MAX_DST {
            return None;
        }
        let mut s = Shape { pc, len, nsrc: srcs.len() as u8, ndst: dsts.len() as u8, nacc: acc.len() as u8, ..Shape::default() };
        s.src[..srcs.len()].copy_from_slice(srcs);
        s.dst[..dsts.len()].copy_from_slice(dsts);
        let mut off = 0;
        for (k, &(store, size)) in acc.iter().enumerate() {
            if size as usize > PACKED_BYTES - off {
                return None;
            }
            (s.store[k], s.size[k], s.off[k]) = (store, size as u8, off as u8);
            off += size as usize;
        }
        Some(s)
    }

    /// The shape of record `r`, if it is not external and fits a packed slot.
    pub fn of(r: &Instr) -> Option<Shape> {
        if r.external || r.accesses.len() > PACKED_ACCESSES {
            return None;
        }
        let mut acc = [(false, 0u32); PACKED_ACCESSES];
        for (k, a) in r.accesses.iter().enumerate() {
            acc[k] = (a.store, a.size);
        }
        let (srcs, dsts) = (&r.src[..r.nsrc as usize], &r.dst[..r.ndst as usize]);
        Shape::new(r.pc, r.len, srcs, dsts, &acc[..r.accesses.len()])
    }
}

/// Four words rather than field by field: a reader looks a shape up each time a static part
/// sent in full is repeated again (3% of xz's records), and std's hasher took ~6 host
/// instructions a record there (callgrind).
impl std::hash::Hash for Shape {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let [s0, s1, s2, s3, s4, s5] = self.src;
        let [d0, d1, d2, d3] = self.dst;
        h.write_u64(self.pc);
        h.write_u64(u64::from_le_bytes([self.len, self.nsrc, self.ndst, self.nacc, s0, s1, s2, s3]));
        h.write_u64(u64::from_le_bytes([s4, s5, d0, d1, d2, d3, self.size[0], self.size[1]]));
        h.write_u64(u64::from_le_bytes([self.store[0] as u8, self.store[1] as u8, self.off[0], self.off[1], 0, 0, 0, 0]));
    }
}

/// One record read ahead: see the module documentation. One cache line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Packed {
    /// Index of its shape, or `SPILLED`.
    pub(crate) shape: u32,
    /// The spill slot holding the record, when `shape` is `SPILLED`.
    pub(crate) spill: u32,
    pub(crate) thread: u32,
    pub(crate) op: OpClass,
    pub(crate) branch: Branch,
    pub(crate) addr: [u64; PACKED_ACCESSES],
    pub(crate) data: [u8; PACKED_BYTES],
}

impl Default for Packed {
    fn default() -> Packed {
        Packed { shape: SPILLED, spill: 0, thread: 0, op: OpClass::Alu, branch: Branch::None, addr: [0; PACKED_ACCESSES], data: [0; PACKED_BYTES] }
    }
}

impl Packed {
    /// The record kept in spill slot `k`.
    #[inline(always)]
    pub(crate) fn spilled(k: usize) -> Packed {
        Packed { spill: k as u32, ..Packed::default() }
    }

    /// Record `r` in a slot of shape number `shape`, `sh` (`Shape::of(r)`): read back through
    /// its [`View`], it is `r`.
    pub(crate) fn of(r: &Instr, shape: u32, sh: &Shape) -> Packed {
        let mut p = Packed { shape, spill: 0, thread: r.thread, op: r.op, branch: r.branch, addr: [0; PACKED_ACCESSES], data: [0; PACKED_BYTES] };
        for (k, a) in r.accesses.iter().enumerate() {
            let (off, size) = (sh.off[k] as usize, a.size as usize);
            p.addr[k] = a.addr;
            p.data[off..off + size].copy_from_slice(&r.data[a.off as usize..a.off as usize + size]);
        }
        p
    }
}

/// A packed record with its shape, read as a [`Record`].
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    s: &'a Packed,
    sh: &'a Shape,
}

impl View<'_> {
    /// The record as an [`Instr`], in `out`'s buffers (what the source read).
    pub fn to_instr(&self, out: &mut Instr) {
        let sh = self.sh;
        out.clear();
        out.pc = sh.pc;
        out.len = sh.len;
        out.op = self.s.op;
        out.branch = self.s.branch;
        (out.nsrc, out.src, out.ndst, out.dst) = (sh.nsrc, sh.src, sh.ndst, sh.dst);
        out.thread = self.s.thread;
        for k in 0..sh.nacc as usize {
            let (store, addr, v) = self.access(k);
            out.accesses.push(Access { store, addr, size: v.len() as u32, off: out.data.len() as u32 });
            out.data.extend_from_slice(v);
        }
    }
}

impl Record for View<'_> {
    #[inline(always)]
    fn pc(&self) -> u64 {
        self.sh.pc
    }
    #[inline(always)]
    fn op(&self) -> OpClass {
        self.s.op
    }
    #[inline(always)]
    fn branch(&self) -> Branch {
        self.s.branch
    }
    #[inline(always)]
    fn srcs(&self) -> &[Reg] {
        &self.sh.src[..self.sh.nsrc as usize]
    }
    #[inline(always)]
    fn dsts(&self) -> &[Reg] {
        &self.sh.dst[..self.sh.ndst as usize]
    }
    #[inline(always)]
    fn ndst(&self) -> u8 {
        self.sh.ndst
    }
    #[inline(always)]
    fn naccesses(&self) -> usize {
        self.sh.nacc as usize
    }
    #[inline(always)]
    fn access(&self, k: usize) -> (bool, u64, &[u8]) {
        let (off, size) = (self.sh.off[k] as usize, self.sh.size[k] as usize);
        (self.sh.store[k], self.s.addr[k], &self.s.data[off..off + size])
    }
}

/// Records as a source hands them to the run loop (`TraceSource::next_slice`): plain
/// records, or packed slots with the spill slots and shapes they name.
#[derive(Clone, Copy, Debug)]
pub enum Recs<'a> {
    Plain(&'a [Instr]),
    Packed { slots: &'a [Packed], spill: &'a [Instr], shapes: &'a [Shape] },
}

/// One record of [`Recs`].
#[derive(Clone, Copy, Debug)]
pub enum One<'a> {
    Plain(&'a Instr),
    View(View<'a>),
}

impl<'a> One<'a> {
    /// The record if it is external (only plain records are).
    #[inline]
    pub fn external(&self) -> Option<&'a Instr> {
        match *self {
            One::Plain(r) if r.external => Some(r),
            _ => None,
        }
    }

    /// The record as an [`Instr`] in `out`'s buffers.
    pub fn to_instr(&self, out: &mut Instr) {
        match self {
            One::Plain(r) => out.copy_from(r),
            One::View(v) => v.to_instr(out),
        }
    }
}

impl<'a> Recs<'a> {
    pub const EMPTY: Recs<'static> = Recs::Plain(&[]);

    #[inline]
    pub fn len(&self) -> usize {
        match self {
            Recs::Plain(r) => r.len(),
            Recs::Packed { slots, .. } => slots.len(),
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record `k`.
    #[inline(always)]
    pub fn get(&self, k: usize) -> One<'a> {
        match *self {
            Recs::Plain(r) => One::Plain(&r[k]),
            Recs::Packed { slots, spill, shapes } => {
                let s = &slots[k];
                if s.shape == SPILLED {
                    One::Plain(&spill[s.spill as usize])
                } else {
                    One::View(View { s, sh: &shapes[s.shape as usize] })
                }
            }
        }
    }

    /// How many of the first `most` records come before the first external one.
    #[inline]
    pub fn before_external(&self, most: usize) -> usize {
        match *self {
            Recs::Plain(r) => r[..most].iter().position(|r| r.external).unwrap_or(most),
            Recs::Packed { slots, spill, .. } => {
                slots[..most].iter().position(|s| s.shape == SPILLED && spill[s.spill as usize].external).unwrap_or(most)
            }
        }
    }

    /// The first `k` records and the rest.
    #[inline]
    pub fn split_at(&self, k: usize) -> (Recs<'a>, Recs<'a>) {
        match *self {
            Recs::Plain(r) => {
                let (a, b) = r.split_at(k);
                (Recs::Plain(a), Recs::Plain(b))
            }
            Recs::Packed { slots, spill, shapes } => {
                let (a, b) = slots.split_at(k);
                (Recs::Packed { slots: a, spill, shapes }, Recs::Packed { slots: b, spill, shapes })
            }
        }
    }

    /// The first record and the rest, if there is one.
    #[inline]
    pub fn split_first(&self) -> Option<(One<'a>, Recs<'a>)> {
        (!self.is_empty()).then(|| (self.get(0), self.split_at(1).1))
    }

    /// Each record as an [`Instr`] (tests).
    pub fn to_vec(&self) -> Vec<Instr> {
        (0..self.len())
            .map(|k| {
                let mut r = Instr::default();
                self.get(k).to_instr(&mut r);
                r
            })
            .collect()
    }
}

/// What a source fills for the read-ahead thread (`TraceSource::fill_packed`): packed slots,
/// spill slots (`spill[..nspill]` used), and the shapes first named in this batch, which the
/// consumer appends to the table it has (a shape's index is its place in that table); or,
/// `plain`, every record in the spill slots in order and the packed slots unused (a source
/// with no packed form: its records are stepped as plain records, with no slot to read
/// first and no step out of line, which cost ChampSim traces ~30% more CPU).
pub struct PackedBatch {
    pub slots: Vec<Packed>,
    pub spill: Vec<Instr>,
    pub nspill: usize,
    pub shapes: Vec<Shape>,
    pub plain: bool,
}

impl PackedBatch {
    pub fn new(n: usize) -> PackedBatch {
        PackedBatch { slots: vec![Packed::default(); n], spill: vec![Instr::default(); n], nspill: 0, shapes: Vec::new(), plain: false }
    }

    /// Records `from..to` of the `n` filled.
    #[inline]
    pub fn recs<'a>(&'a self, shapes: &'a [Shape], from: usize, to: usize) -> Recs<'a> {
        if self.plain {
            Recs::Plain(&self.spill[from..to])
        } else {
            Recs::Packed { slots: &self.slots[from..to], spill: &self.spill[..self.nspill], shapes }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_slot_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Packed>(), 64);
        assert_eq!(std::mem::align_of::<Packed>(), 64);
    }

    /// Shapes take the accesses that fit, their values laid out in order.
    #[test]
    fn shapes_lay_values_out_in_order_and_refuse_what_does_not_fit() {
        let s = Shape::new(0x40, 3, &[1, 2], &[3], &[(false, 8), (true, 24)]).unwrap();
        assert_eq!((s.nacc, s.off, s.size, s.store), (2, [0, 8], [8, 24], [false, true]));
        assert!(Shape::new(0x40, 3, &[], &[], &[(false, 8), (true, 25)]).is_none(), "33 bytes");
        assert!(Shape::new(0x40, 3, &[], &[], &[(false, 1); 3]).is_none(), "3 accesses");
        assert!(Shape::new(0x40, 3, &[], &[], &[(false, 1 << 20)]).is_none(), "a big value");
        let mut p = Packed { shape: 0, op: OpClass::Mem, branch: Branch::Taken, thread: 2, ..Packed::default() };
        p.addr = [0x1000, 0x2000];
        p.data[..32].copy_from_slice(&(0..32u8).collect::<Vec<_>>());
        let mut r = Instr::default();
        View { s: &p, sh: &s }.to_instr(&mut r);
        let mut want = Instr { pc: 0x40, len: 3, op: OpClass::Mem, branch: Branch::Taken, thread: 2, ..Instr::default() };
        want.add_src(1);
        want.add_src(2);
        want.add_dst(3);
        want.add_access(false, 0x1000, &(0..8).collect::<Vec<_>>());
        want.add_access(true, 0x2000, &(8..32).collect::<Vec<_>>());
        assert_eq!(r, want);
    }
}
