//! Built-in workloads: small real programs executed on the fly, emitting one record per
//! instruction with the real data values they load and store.
//!
//! Each workload is written as ordinary Rust over its own memory image (typed vectors at
//! fixed virtual addresses) plus a static code table: every executed instruction is one
//! entry of that table (stable pc, length, class, registers, access kind/size) with its
//! dynamic address, value and branch outcome. The program runs a little ahead into a small
//! queue of such dynamic entries, which `Exec::next` expands into [`Instr`] records, so
//! nothing is allocated per record and loads always see exactly the bytes last stored.
//!
//! Register numbering is x86-64 like: 0..=15 the GPRs (rax, rcx, rdx, rbx, rsp, rbp, rsi,
//! rdi, r8..r15), 16 the flags, 32..=63 the vector/fp registers.

pub mod chase;
pub mod hot;
pub mod mix;
pub mod stream;

pub use chase::Chase;
pub use hot::Hot;
pub use mix::Mix;
pub use stream::Stream;

use crate::record::{Access, Branch, Instr, OpClass, Reg, MAX_DST, MAX_SRC};
use crate::{TraceError, TraceSource};

/// The workload to run when none is named.
pub const DEFAULT_WORKLOAD: &str = "mix";

/// The built-in workloads: (name, one-line description).
pub fn builtin_workloads() -> &'static [(&'static str, &'static str)] {
    &[
        ("stream", "STREAM/swim-like f64 triad, copy, scale, add over three 4 MiB arrays: bandwidth-bound, many dirty write-backs"),
        ("chase", "mcf-like pointer chasing through a 16 MiB random cycle of 64-byte nodes, updating potentials: latency-bound"),
        ("hot", "gzip-like LZ77 hash-chain compression of 512 KiB of text, ~1.4 MiB working set: sensitive to L2 size"),
        ("mix", "phases of stream, chase and hot in turn, 2,000,000 instructions each (the default workload)"),
    ]
}

/// A built-in workload by name, generated deterministically from `seed`.
pub fn builtin(name: &str, seed: u64) -> Result<Box<dyn TraceSource>, TraceError> {
    Ok(match name {
        "stream" => Box::new(Stream::new(seed)),
        "chase" => Box::new(Chase::new(seed)),
        "hot" => Box::new(Hot::new(seed)),
        "mix" => Box::new(Mix::new(seed)),
        _ => {
            let names: Vec<&str> = builtin_workloads().iter().map(|w| w.0).collect();
            return Err(TraceError::Other(format!(
                "unknown workload '{name}'; built-in workloads: {}",
                names.join(", ")
            )));
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Registers (x86-64 numbering).

pub(crate) const RAX: Reg = 0;
pub(crate) const RCX: Reg = 1;
pub(crate) const RDX: Reg = 2;
pub(crate) const RBX: Reg = 3;
pub(crate) const RSP: Reg = 4;
pub(crate) const RBP: Reg = 5;
pub(crate) const RSI: Reg = 6;
pub(crate) const RDI: Reg = 7;
pub(crate) const R8: Reg = 8;
pub(crate) const R9: Reg = 9;
pub(crate) const R10: Reg = 10;
pub(crate) const R11: Reg = 11;
pub(crate) const R12: Reg = 12;
pub(crate) const R13: Reg = 13;
pub(crate) const R14: Reg = 14;
pub(crate) const R15: Reg = 15;
pub(crate) const FLAGS: Reg = 16;
pub(crate) const XMM0: Reg = 32;
pub(crate) const XMM1: Reg = 33;
pub(crate) const XMM2: Reg = 34;

/// Size of one external (loader/OS) record: one page.
pub(crate) const PAGE: usize = 4096;

// ---------------------------------------------------------------------------------------------
// Static code.

/// Memory operand of a static instruction.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mem {
    None,
    Load(u8),
    Store(u8),
}

/// One static instruction: everything about a record except its dynamic address/value.
#[derive(Clone, Copy)]
pub(crate) struct Static {
    pc: u64,
    len: u8,
    op: OpClass,
    nsrc: u8,
    src: [Reg; MAX_SRC],
    ndst: u8,
    dst: [Reg; MAX_DST],
    store: bool,
    /// Access size in bytes; 0 = no memory access.
    size: u8,
}

/// Lays out a program's static instructions consecutively from a text address, so that
/// fall-through pcs are `pc + len` as in real code.
pub(crate) struct Asm {
    pc: u64,
    code: Vec<Static>,
}

impl Asm {
    pub(crate) fn new(text: u64) -> Asm {
        Asm {
            pc: text,
            code: Vec::new(),
        }
    }

    /// Append one instruction; returns its id for [`Queue`] calls.
    pub(crate) fn ins(&mut self, len: u8, op: OpClass, src: &[Reg], dst: &[Reg], mem: Mem) -> u16 {
        assert!((3..=7).contains(&len) && src.len() <= MAX_SRC && dst.len() <= MAX_DST);
        let mut s = Static {
            pc: self.pc,
            len,
            op,
            nsrc: src.len() as u8,
            src: [0; MAX_SRC],
            ndst: dst.len() as u8,
            dst: [0; MAX_DST],
            store: matches!(mem, Mem::Store(_)),
            size: match mem {
                Mem::None => 0,
                Mem::Load(n) | Mem::Store(n) => n,
            },
        };
        s.src[..src.len()].copy_from_slice(src);
        s.dst[..dst.len()].copy_from_slice(dst);
        self.pc += len as u64;
        self.code.push(s);
        (self.code.len() - 1) as u16
    }

    /// Integer ALU op.
    pub(crate) fn alu(&mut self, len: u8, src: &[Reg], dst: &[Reg]) -> u16 {
        self.ins(len, OpClass::Alu, src, dst, Mem::None)
    }

    /// Conditional or unconditional branch reading the flags (or nothing).
    pub(crate) fn br(&mut self, len: u8, src: &[Reg]) -> u16 {
        self.ins(len, OpClass::Branch, src, &[], Mem::None)
    }

    /// Pure load (mov reg, [mem]).
    pub(crate) fn ld(&mut self, len: u8, size: u8, src: &[Reg], dst: &[Reg]) -> u16 {
        self.ins(len, OpClass::Mem, src, dst, Mem::Load(size))
    }

    /// Pure store (mov [mem], reg).
    pub(crate) fn st(&mut self, len: u8, size: u8, src: &[Reg]) -> u16 {
        self.ins(len, OpClass::Mem, src, &[], Mem::Store(size))
    }

    /// Pad to an alignment, as compilers align loop heads.
    pub(crate) fn align(&mut self, a: u64) {
        self.pc = self.pc.div_ceil(a) * a;
    }

    /// Address of instruction `id` plus its length: a return address.
    pub(crate) fn next_pc(&self, id: u16) -> u64 {
        let s = &self.code[id as usize];
        s.pc + s.len as u64
    }

    pub(crate) fn end(&self) -> u64 {
        self.pc
    }
}

// ---------------------------------------------------------------------------------------------
// Dynamic instructions.

/// One executed instruction: static id plus what only execution knows.
#[derive(Clone, Copy)]
pub(crate) struct Dyn {
    addr: u64,
    /// Little-endian value of the access (low `size` bytes).
    val: u64,
    id: u16,
    br: Branch,
}

/// The instructions executed so far and not yet handed out.
pub(crate) struct Queue {
    v: Vec<Dyn>,
}

impl Queue {
    /// An instruction without memory access (an unconditional branch counts as taken).
    #[inline(always)]
    pub(crate) fn op(&mut self, id: u16) {
        self.v.push(Dyn {
            addr: 0,
            val: 0,
            id,
            br: Branch::Taken,
        });
    }

    /// A conditional branch with its real outcome.
    #[inline(always)]
    pub(crate) fn br(&mut self, id: u16, taken: bool) {
        let br = if taken {
            Branch::Taken
        } else {
            Branch::NotTaken
        };
        self.v.push(Dyn {
            addr: 0,
            val: 0,
            id,
            br,
        });
    }

    /// An instruction with its one access; `val` holds the bytes loaded or stored.
    #[inline(always)]
    pub(crate) fn mem(&mut self, id: u16, addr: u64, val: u64) {
        self.v.push(Dyn {
            addr,
            val,
            id,
            br: Branch::Taken,
        });
    }

    pub(crate) fn len(&self) -> usize {
        self.v.len()
    }
}

/// A program the executor can run: its initial memory image and its execution.
pub(crate) trait Program {
    /// Fill `out` with external record `k` (page `k` of the initial image); false when done.
    fn external(&mut self, k: u32, out: &mut Instr) -> bool;
    /// Execute a little further (at least one instruction), appending to `q`.
    fn run(&mut self, q: &mut Queue);
}

/// Expands a program's executed instructions into records.
pub(crate) struct Exec {
    code: Box<[Static]>,
    q: Queue,
    pos: usize,
    ext: u32,
    ext_done: bool,
}

impl Exec {
    pub(crate) fn new(asm: Asm) -> Exec {
        Exec {
            code: asm.code.into_boxed_slice(),
            q: Queue {
                v: Vec::with_capacity(4096),
            },
            pos: 0,
            ext: 0,
            ext_done: false,
        }
    }

    /// The next external page of `prog`'s initial image, if any is left.
    #[inline(always)]
    pub(crate) fn next_external<P: Program>(&mut self, prog: &mut P, out: &mut Instr) -> bool {
        if !self.ext_done {
            if prog.external(self.ext, out) {
                self.ext += 1;
                return true;
            }
            self.ext_done = true;
        }
        false
    }

    /// Next record of `prog`: first its external pages, then its instructions.
    /// Returns true if the record was an instruction (false: external).
    #[inline(always)]
    pub(crate) fn next<P: Program>(&mut self, prog: &mut P, out: &mut Instr) -> bool {
        if self.next_external(prog, out) {
            return false;
        }
        if self.pos == self.q.v.len() {
            self.q.v.clear();
            self.pos = 0;
            while self.q.v.is_empty() {
                prog.run(&mut self.q);
            }
        }
        let d = self.q.v[self.pos];
        self.pos += 1;
        let s = &self.code[d.id as usize];
        out.pc = s.pc;
        out.len = s.len;
        out.op = s.op;
        out.nsrc = s.nsrc;
        out.src = s.src;
        out.ndst = s.ndst;
        out.dst = s.dst;
        out.branch = if s.op == OpClass::Branch {
            d.br
        } else {
            Branch::None
        };
        out.external = false;
        out.accesses.clear();
        out.data.clear();
        if s.size != 0 {
            out.data
                .extend_from_slice(&d.val.to_le_bytes()[..s.size as usize]);
            out.accesses.push(Access {
                store: s.store,
                addr: d.addr,
                size: s.size as u32,
                off: 0,
            });
        }
        true
    }
}

/// Fill `out` as an external record storing `bytes` at `addr` (pc 0, stores only).
pub(crate) fn external_record(out: &mut Instr, addr: u64, fill: impl FnOnce(&mut Vec<u8>)) {
    out.clear();
    out.src = [0; MAX_SRC];
    out.dst = [0; MAX_DST];
    out.op = OpClass::Mem;
    out.external = true;
    fill(&mut out.data);
    let size = out.data.len() as u32;
    out.accesses.push(Access {
        store: true,
        addr,
        size,
        off: 0,
    });
}

/// Append page `k` of a region of u64 words, little-endian.
pub(crate) fn page_of_words(words: &[u64], k: usize, out: &mut Vec<u8>) {
    let per = PAGE / 8;
    for w in &words[k * per..((k + 1) * per).min(words.len())] {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// Deterministic randomness (no external crate: the streams must never change under us).

/// SplitMix64: tiny, fast, and good enough for generating data and permutations.
#[derive(Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next();
        r
    }

    #[inline]
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (Lemire's multiply-shift; the tiny bias is irrelevant here).
    #[inline]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Shared checks: a shadow byte memory and a small set-associative LRU cache model.
    use super::*;
    use std::collections::HashMap;

    /// Replays records against a shadow memory; panics on the first load whose value
    /// differs from the bytes last stored there (zero if never written).
    #[derive(Default)]
    pub struct Shadow {
        pages: HashMap<u64, Box<[u8; 4096]>>,
        pub loads: u64,
        pub stores: u64,
        pub branches: u64,
        pub instrs: u64,
        pub externals: u64,
    }

    impl Shadow {
        fn page(&mut self, a: u64) -> &mut [u8; 4096] {
            self.pages
                .entry(a >> 12)
                .or_insert_with(|| Box::new([0; 4096]))
        }

        pub fn apply(&mut self, r: &Instr, n: u64) {
            if r.external {
                self.externals += 1;
                assert_eq!(r.pc, 0, "record {n}: external record with a pc");
            } else {
                self.instrs += 1;
                assert!((3..=7).contains(&r.len), "record {n}: len {}", r.len);
                assert!(r.pc != 0);
                if r.op == OpClass::Branch {
                    self.branches += 1;
                    assert_ne!(r.branch, Branch::None, "record {n}: branch without outcome");
                } else {
                    assert_eq!(
                        r.branch,
                        Branch::None,
                        "record {n}: outcome on a non-branch"
                    );
                }
            }
            for a in &r.accesses {
                let v = r.value(a);
                if a.store {
                    self.stores += !r.external as u64;
                } else {
                    assert!(!r.external, "record {n}: external load");
                    self.loads += 1;
                }
                // Page by page: one lookup per page the access touches.
                let mut i = 0;
                while i < v.len() {
                    let addr = a.addr + i as u64;
                    let o = (addr & 4095) as usize;
                    let k = (4096 - o).min(v.len() - i);
                    let page = self.page(addr);
                    if a.store {
                        page[o..o + k].copy_from_slice(&v[i..i + k]);
                    } else if page[o..o + k] != v[i..i + k] {
                        panic!(
                            "record {n} pc {:#x}: load of {} bytes at {:#x} got {:02x?}, memory holds {:02x?}",
                            r.pc, a.size, a.addr, v, &page[o..o + k]
                        );
                    }
                    i += k;
                }
            }
        }
    }

    /// Replay `n` records of `src` against a shadow memory (asserting value consistency).
    pub fn replay(src: &mut dyn TraceSource, n: u64) -> Shadow {
        let mut sh = Shadow::default();
        let mut r = Instr::default();
        for i in 0..n {
            assert!(src.next_into(&mut r).unwrap());
            sh.apply(&r, i);
        }
        sh
    }

    /// Set-associative LRU write-back cache of 64-byte lines, timed accesses only.
    pub struct Cache {
        sets: usize,
        ways: usize,
        tags: Vec<u64>,
        stamp: Vec<u64>,
        dirty: Vec<bool>,
        now: u64,
        pub accesses: u64,
        pub misses: u64,
        pub dirty_evictions: u64,
    }

    impl Cache {
        pub fn new(bytes: usize, ways: usize) -> Cache {
            let sets = bytes / 64 / ways;
            Cache {
                sets,
                ways,
                tags: vec![u64::MAX; sets * ways],
                stamp: vec![0; sets * ways],
                dirty: vec![false; sets * ways],
                now: 0,
                accesses: 0,
                misses: 0,
                dirty_evictions: 0,
            }
        }

        pub fn access(&mut self, addr: u64, store: bool) {
            let line = addr >> 6;
            let set = (line as usize) % self.sets;
            let ways = set * self.ways..(set + 1) * self.ways;
            self.now += 1;
            self.accesses += 1;
            if let Some(i) = ways.clone().find(|&i| self.tags[i] == line) {
                self.stamp[i] = self.now;
                self.dirty[i] |= store;
                return;
            }
            self.misses += 1;
            let v = ways.min_by_key(|&i| self.stamp[i]).unwrap();
            if self.tags[v] != u64::MAX && self.dirty[v] {
                self.dirty_evictions += 1;
            }
            self.tags[v] = line;
            self.stamp[v] = self.now;
            self.dirty[v] = store;
        }

        pub fn miss_rate(&self) -> f64 {
            self.misses as f64 / self.accesses.max(1) as f64
        }
    }

    /// Run timed records through caches of the given sizes: `warm` records to warm them
    /// up, then `n` records counted in the statistics.
    pub fn cache_run(src: &mut dyn TraceSource, warm: u64, n: u64, sizes: &[usize]) -> Vec<Cache> {
        let mut caches: Vec<Cache> = sizes.iter().map(|&s| Cache::new(s, 16)).collect();
        let mut r = Instr::default();
        let mut timed = 0;
        while timed < warm + n {
            assert!(src.next_into(&mut r).unwrap());
            if r.external {
                continue;
            }
            timed += 1;
            if timed == warm + 1 {
                for c in caches.iter_mut() {
                    (c.accesses, c.misses, c.dirty_evictions) = (0, 0, 0);
                }
            }
            for a in &r.accesses {
                for c in caches.iter_mut() {
                    c.access(a.addr, a.store);
                }
            }
        }
        caches
    }

    /// Distinct 64-byte lines touched by the first `n` timed records.
    pub fn distinct_lines(src: &mut dyn TraceSource, n: u64) -> usize {
        let mut lines = std::collections::HashSet::new();
        let mut r = Instr::default();
        let mut timed = 0;
        while timed < n {
            assert!(src.next_into(&mut r).unwrap());
            if r.external {
                continue;
            }
            timed += 1;
            for a in &r.accesses {
                lines.insert(a.addr >> 6);
                lines.insert((a.addr + a.size as u64 - 1) >> 6);
            }
        }
        lines.len()
    }

    /// The first `n` records.
    pub fn take(src: &mut dyn TraceSource, n: usize) -> Vec<Instr> {
        let mut v = Vec::with_capacity(n);
        let mut r = Instr::default();
        for _ in 0..n {
            assert!(src.next_into(&mut r).unwrap());
            v.push(r.clone());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_lists_and_builds_every_workload() {
        for (name, desc) in builtin_workloads() {
            assert!(!desc.is_empty());
            let mut w = builtin(name, 1).unwrap();
            assert_eq!(w.name(), *name);
            let mut r = Instr::default();
            assert!(w.next_into(&mut r).unwrap());
        }
    }

    #[test]
    fn unknown_workload_names_the_choices() {
        let e = builtin("nope", 0).err().unwrap().to_string();
        assert_eq!(
            e,
            "unknown workload 'nope'; built-in workloads: stream, chase, hot, mix"
        );
    }

    #[test]
    fn rng_below_stays_in_range() {
        let mut r = Rng::new(5, 1);
        assert!((0..10_000).all(|_| r.below(7) < 7));
        let u = r.unit();
        assert!((0.0..1.0).contains(&u));
    }
}
