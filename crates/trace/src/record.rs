//! One executed instruction with the data values it loaded and stored.
//!
//! Records are filled in place by a [`crate::TraceSource`] so that streaming billions of
//! them allocates nothing per instruction.

/// Coarse execution class: decides functional-unit latency in the timing model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum OpClass {
    #[default]
    Alu = 0,
    Mul = 1,
    Div = 2,
    Fp = 3,
    FpDiv = 4,
    /// Any instruction whose only work is its memory accesses (mov to/from memory).
    Mem = 5,
    Branch = 6,
    /// A crypto/sign instruction (the tracer's system calls): waits at commit for every pending
    /// integrity check (003 §4.7) when the core takes them as barriers (`core.syscall_barriers`).
    Barrier = 7,
}

impl OpClass {
    pub fn from_u8(v: u8) -> Option<OpClass> {
        Some(match v {
            0 => OpClass::Alu,
            1 => OpClass::Mul,
            2 => OpClass::Div,
            3 => OpClass::Fp,
            4 => OpClass::FpDiv,
            5 => OpClass::Mem,
            6 => OpClass::Branch,
            7 => OpClass::Barrier,
            _ => return None,
        })
    }
}

/// Outcome of a control-flow instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Branch {
    #[default]
    None = 0,
    NotTaken = 1,
    Taken = 2,
}

/// `dst` extended by `src`, the value sizes loads and stores have (1-8 bytes, most of them)
/// as fixed-size copies the compiler inlines: a trace record is copied twice on its way to
/// the simulator (`ReadAhead`), and a call to memcpy for each of its few bytes cost about as
/// much as the rest of the copy (callgrind, gzip).
#[inline(always)]
pub(crate) fn append_bytes(dst: &mut Vec<u8>, src: &[u8]) {
    match src.len() {
        0 => {}
        1 => dst.push(src[0]),
        2 => dst.extend_from_slice(&<[u8; 2]>::try_from(src).expect("2 bytes")),
        4 => dst.extend_from_slice(&<[u8; 4]>::try_from(src).expect("4 bytes")),
        8 => dst.extend_from_slice(&<[u8; 8]>::try_from(src).expect("8 bytes")),
        _ => dst.extend_from_slice(src),
    }
}

/// `dst` extended by `src`, a record's accesses (most records have none or one).
#[inline(always)]
pub(crate) fn append_accesses(dst: &mut Vec<Access>, src: &[Access]) {
    match src {
        [] => {}
        [a] => dst.push(*a),
        _ => dst.extend_from_slice(src),
    }
}

/// One data access; its value bytes are `Instr::data[off .. off + size]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub store: bool,
    pub addr: u64,
    pub size: u32,
    pub off: u32,
}

/// Architectural register id (x86-64 numbering is the tracer's business; 0 is a real register).
pub type Reg = u8;

pub const MAX_SRC: usize = 6;
pub const MAX_DST: usize = 4;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Instr {
    pub pc: u64,
    pub len: u8,
    pub op: OpClass,
    pub nsrc: u8,
    pub src: [Reg; MAX_SRC],
    pub ndst: u8,
    pub dst: [Reg; MAX_DST],
    pub branch: Branch,
    /// Memory written by the environment rather than by this program's instructions
    /// (loader image, read() buffers, initial heap contents): the accesses are stores applied
    /// functionally before the next instruction, not timed and not counted as instructions.
    /// An external record whose accesses are loads of no bytes names pages (one per access,
    /// at its first byte) that the program touched before the trace began — while a tracer's
    /// `--skip` fast-forwarded — whose contents the trace does not carry ([`Instr::set_pages`]).
    pub external: bool,
    /// The thread that executed it (0 for single-threaded traces). A trace is one
    /// interleaving of all threads; the timing model runs it as one instruction stream.
    pub thread: u32,
    pub accesses: Vec<Access>,
    pub data: Vec<u8>,
}

impl Instr {
    /// Reset to an empty record (registers zeroed too, so equal records compare equal),
    /// keeping the buffers' capacity.
    #[inline]
    pub fn clear(&mut self) {
        self.pc = 0;
        self.len = 0;
        self.op = OpClass::Alu;
        self.nsrc = 0;
        self.src = [0; MAX_SRC];
        self.ndst = 0;
        self.dst = [0; MAX_DST];
        self.branch = Branch::None;
        self.external = false;
        self.thread = 0;
        self.accesses.clear();
        self.data.clear();
    }

    /// `self` = `r`, in `self`'s own buffers (the derived `clone_from` makes new ones and
    /// frees the old: two allocations and two frees per record cost bzip2's external records,
    /// which the core keeps this way, ~370 host instructions each: callgrind, docs/speed.md).
    #[inline]
    pub fn copy_from(&mut self, r: &Instr) {
        self.pc = r.pc;
        self.len = r.len;
        self.op = r.op;
        self.nsrc = r.nsrc;
        self.src = r.src;
        self.ndst = r.ndst;
        self.dst = r.dst;
        self.branch = r.branch;
        self.external = r.external;
        self.thread = r.thread;
        self.accesses.clear();
        append_accesses(&mut self.accesses, &r.accesses);
        self.data.clear();
        append_bytes(&mut self.data, &r.data);
    }

    /// Make this the external record naming 4 KiB pages (by number) the program touched
    /// before the trace began (see [`Instr::external`]).
    pub fn set_pages(&mut self, pages: impl Iterator<Item = u64>) {
        self.clear();
        self.external = true;
        for p in pages {
            self.accesses.push(Access { store: false, addr: p << 12, size: 0, off: 0 });
        }
    }

    /// Whether this is a record of [`Instr::set_pages`].
    pub fn is_pages(&self) -> bool {
        self.external && self.accesses.first().is_some_and(|a| !a.store && a.size == 0)
    }

    /// An external record that gives `pages` (page numbers) their frames in this order and
    /// writes nothing: zero-byte stores, one per page. A checkpointed window's file starts
    /// with the pages the input touched before it, in the order it first touched them, so
    /// that they land in the frames a run of the whole input gives them (`pages.order`).
    pub fn set_mapped(&mut self, pages: impl Iterator<Item = u64>) {
        self.clear();
        self.external = true;
        for p in pages {
            self.accesses.push(Access { store: true, addr: p << 12, size: 0, off: 0 });
        }
    }

    #[inline]
    pub fn srcs(&self) -> &[Reg] {
        &self.src[..self.nsrc as usize]
    }

    #[inline]
    pub fn dsts(&self) -> &[Reg] {
        &self.dst[..self.ndst as usize]
    }

    #[inline]
    pub fn add_src(&mut self, r: Reg) {
        if (self.nsrc as usize) < MAX_SRC {
            self.src[self.nsrc as usize] = r;
            self.nsrc += 1;
        }
    }

    #[inline]
    pub fn add_dst(&mut self, r: Reg) {
        if (self.ndst as usize) < MAX_DST {
            self.dst[self.ndst as usize] = r;
            self.ndst += 1;
        }
    }

    /// Append an access with its value bytes.
    #[inline]
    pub fn add_access(&mut self, store: bool, addr: u64, value: &[u8]) {
        let off = self.data.len() as u32;
        self.data.extend_from_slice(value);
        self.accesses.push(Access {
            store,
            addr,
            size: value.len() as u32,
            off,
        });
    }

    /// Why the record cannot come from a real program, if an access runs past the end of the
    /// 64-bit address space (ending at its last byte is fine): readers refuse such records
    /// with this text.
    #[inline]
    pub fn wrapping_access(&self) -> Option<String> {
        // Readers ask of every record: the common answer inline, the message out of line.
        if self.accesses.iter().all(|a| a.addr.checked_add((a.size as u64).saturating_sub(1)).is_some()) {
            return None;
        }
        self.wrapping_access_message()
    }

    #[cold]
    fn wrapping_access_message(&self) -> Option<String> {
        self.accesses
            .iter()
            .find(|a| a.size > 0 && a.addr.checked_add(a.size as u64 - 1).is_none())
            .map(|a| format!("an access of {} bytes at {:#x} runs past the end of the address space", a.size, a.addr))
    }

    #[inline]
    pub fn value(&self, a: &Access) -> &[u8] {
        &self.data[a.off as usize..(a.off + a.size) as usize]
    }
}

/// What the core model reads of a record: an [`Instr`], or a record read ahead into a packed
/// slot (`packed::View`), stepped by the same code.
pub trait Record {
    fn pc(&self) -> u64;
    fn op(&self) -> OpClass;
    fn branch(&self) -> Branch;
    fn srcs(&self) -> &[Reg];
    fn dsts(&self) -> &[Reg];
    fn ndst(&self) -> u8;
    fn naccesses(&self) -> usize;
    /// Access `k` (< `naccesses`): whether it is a store, its address, its value's bytes.
    fn access(&self, k: usize) -> (bool, u64, &[u8]);
    #[inline(always)]
    fn has_store(&self) -> bool {
        (0..self.naccesses()).any(|k| self.access(k).0)
    }
    #[inline(always)]
    fn has_load(&self) -> bool {
        (0..self.naccesses()).any(|k| !self.access(k).0)
    }
}

impl Record for Instr {
    #[inline(always)]
    fn pc(&self) -> u64 {
        self.pc
    }
    #[inline(always)]
    fn op(&self) -> OpClass {
        self.op
    }
    #[inline(always)]
    fn branch(&self) -> Branch {
        self.branch
    }
    #[inline(always)]
    fn srcs(&self) -> &[Reg] {
        Instr::srcs(self)
    }
    #[inline(always)]
    fn dsts(&self) -> &[Reg] {
        Instr::dsts(self)
    }
    #[inline(always)]
    fn ndst(&self) -> u8 {
        self.ndst
    }
    #[inline(always)]
    fn naccesses(&self) -> usize {
        self.accesses.len()
    }
    #[inline(always)]
    fn access(&self, k: usize) -> (bool, u64, &[u8]) {
        let a = &self.accesses[k];
        (a.store, a.addr, self.value(a))
    }
    #[inline(always)]
    fn has_store(&self) -> bool {
        self.accesses.iter().any(|a| a.store)
    }
    #[inline(always)]
    fn has_load(&self) -> bool {
        self.accesses.iter().any(|a| !a.store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inline check and the message agree: a record is refused exactly when one of its
    /// accesses ends past the last byte of the address space (size 0 never does).
    #[test]
    fn wrapping_access_refuses_exactly_the_accesses_past_the_end() {
        for (addr, size, wraps) in [
            (u64::MAX, 0, false),
            (u64::MAX, 1, false),
            (u64::MAX, 2, true),
            (u64::MAX - 7, 8, false),
            (u64::MAX - 6, 8, true),
            (0, 64, false),
            (u64::MAX - (1 << 20) + 2, 1 << 20, true),
        ] {
            let mut r = Instr::default();
            r.add_access(false, 0x1000, &[1, 2]);
            r.accesses.push(Access { store: true, addr, size, off: 2 });
            r.data.resize(2 + size as usize, 0);
            let why = r.wrapping_access();
            assert_eq!(why.is_some(), wraps, "{size} bytes at {addr:#x}");
            if let Some(w) = why {
                assert_eq!(w, format!("an access of {size} bytes at {addr:#x} runs past the end of the address space"));
            }
        }
    }

    /// The fixed-size copies append what `extend_from_slice` appends, at every length.
    #[test]
    fn appending_small_values_and_accesses_as_extend_does() {
        let src: Vec<u8> = (0..70u8).map(|b| b.wrapping_mul(37)).collect();
        for n in 0..=src.len() {
            for start in [0usize, 3] {
                let mut a: Vec<u8> = (0..start as u8).collect();
                let mut b = a.clone();
                append_bytes(&mut a, &src[..n]);
                b.extend_from_slice(&src[..n]);
                assert_eq!(a, b, "{n} bytes after {start}");
            }
        }
        let acc: Vec<Access> = (0..5u32).map(|k| Access { store: k % 2 == 1, addr: 64 * k as u64, size: k, off: k }).collect();
        for n in 0..=acc.len() {
            let mut a = vec![acc[4]];
            let mut b = a.clone();
            append_accesses(&mut a, &acc[..n]);
            b.extend_from_slice(&acc[..n]);
            assert_eq!(a, b, "{n} accesses");
        }
    }

    #[test]
    fn copy_from_copies_into_the_records_own_buffers() {
        let mut a = Instr { pc: 0x40_1000, len: 3, op: OpClass::Mem, branch: Branch::Taken, external: true, thread: 2, ..Instr::default() };
        a.add_src(5);
        a.add_dst(7);
        a.add_access(true, 0x1000, &[1, 2, 3, 4]);
        a.add_access(false, 0x2000, &[9; 8]);
        let mut out = Instr { accesses: Vec::with_capacity(8), data: Vec::with_capacity(64), ..Instr::default() };
        out.add_access(false, 0x3000, &[7; 16]);
        let (acc, data) = (out.accesses.as_ptr(), out.data.as_ptr());
        out.copy_from(&a);
        assert_eq!(out, a);
        assert_eq!((out.accesses.as_ptr(), out.data.as_ptr()), (acc, data), "the same buffers");
    }
}
