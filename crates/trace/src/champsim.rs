//! ChampSim traces: a stream of 64-byte `input_instr` records (ChampSim's
//! `inc/trace_instruction.h`), raw or xz/gzip/zstd-compressed. Layout, little-endian:
//!
//! ```text
//! offset 0   u64 ip
//!        8   u8  is_branch
//!        9   u8  branch_taken
//!       10   u8  destination_registers[2]
//!       12   u8  source_registers[4]
//!       16   u64 destination_memory[2]      (stores)
//!       32   u64 source_memory[4]           (loads)
//! ```
//!
//! Raw (uncompressed) files have no checksum: a flipped bit in an address or register is read
//! as what it now says, silently (inherent to the format; xz/gzip/zstd files are checked by
//! their compression's CRC).
//!
//! A zero register or address means "none". ChampSim traces carry **no data values and no
//! access sizes**: every memory operand becomes a 1-byte access at its address whose value
//! is zero (so the simulator's load-value check stays consistent, but anything that depends
//! on values — encryption of real data, frequent values — is meaningless). One byte is what
//! ChampSim itself assumes: an operand touches the one block holding its address, and a load
//! takes a store's data when their addresses are equal (`ooo_cpu.cc`, do_memory_scheduling)
//! — with 1-byte accesses secmem's store queue forwards exactly then, where any longer guess
//! would make neighbouring accesses overlap. See `docs/trace-formats.md`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::compress::{remember, repeat_err, Buffered, Decoded};
use crate::record::{Branch, Instr, OpClass, Record, Reg, MAX_DST, MAX_SRC};
use crate::{TraceError, TraceSource};

/// Bytes per record.
pub const RECORD_LEN: usize = 64;
/// Size given to every memory operand (ChampSim records no sizes; see the module doc).
pub const ACCESS_SIZE: usize = 1;
/// ChampSim's special register ids (`champsim::REG_*`).
pub const REG_STACK_POINTER: u8 = 6;
pub const REG_FLAGS: u8 = 25;
/// Written by every branch: not a data dependency, so the reader drops it (see the docs).
pub const REG_INSTRUCTION_POINTER: u8 = 26;
/// Register slots of a record.
const SRC_SLOTS: usize = 4;
const DST_SLOTS: usize = 2;

/// ChampSim's branch types (`inc/instruction.h`, `branch_type`), which it derives from the
/// registers a branch reads and writes; [`ChampSimRecord::from_instr`] writes the registers
/// that make ChampSim derive the type named here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BranchType {
    DirectJump = 0,
    Indirect = 1,
    Conditional = 2,
    DirectCall = 3,
    IndirectCall = 4,
    Return = 5,
}

impl BranchType {
    /// ChampSim's name (`branch_type_names`), by `BranchType as usize`.
    pub const NAMES: [&'static str; 6] =
        ["BRANCH_DIRECT_JUMP", "BRANCH_INDIRECT", "BRANCH_CONDITIONAL", "BRANCH_DIRECT_CALL", "BRANCH_INDIRECT_CALL", "BRANCH_RETURN"];
}

impl BranchType {
    /// The type of branch `ins` is (None if it is no branch), read off its registers and
    /// accesses: reads and writes the stack pointer with a store → call (indirect if it reads
    /// another register), with a load → return; reads the flags or was not taken →
    /// conditional; reads another register → indirect; else a direct jump. The type ChampSim
    /// derives from the record [`ChampSimRecord::from_instr`] writes; the core model's BTB
    /// uses it too. Allocates nothing (the core calls it on every branch).
    #[inline]
    pub fn of<R: Record + ?Sized>(ins: &R, numbering: Numbering) -> Option<BranchType> {
        if ins.branch() == Branch::None {
            return None;
        }
        let g = Signature::of(ins, numbering);
        Some(if g.sp && g.stores {
            if g.other { BranchType::IndirectCall } else { BranchType::DirectCall }
        } else if g.sp && g.loads {
            BranchType::Return
        } else if g.flags || ins.branch() == Branch::NotTaken {
            BranchType::Conditional
        } else if g.other {
            BranchType::Indirect
        } else {
            BranchType::DirectJump
        })
    }
}

/// What ChampSim's branch types are told apart by, in ChampSim's register ids.
struct Signature {
    /// Reads and writes the stack pointer.
    sp: bool,
    flags: bool,
    /// Reads a register other than the stack pointer, the flags and the instruction pointer.
    other: bool,
    loads: bool,
    stores: bool,
}

impl Signature {
    #[inline]
    fn of<R: Record + ?Sized>(ins: &R, numbering: Numbering) -> Signature {
        let reads = |x: u8| ins.srcs().iter().any(|&r| champsim_reg(r, numbering) == x);
        let writes_sp = ins.dsts().iter().any(|&r| champsim_reg(r, numbering) == REG_STACK_POINTER);
        Signature {
            sp: reads(REG_STACK_POINTER) && writes_sp,
            flags: reads(REG_FLAGS),
            other: ins.srcs().iter().map(|&r| champsim_reg(r, numbering)).any(|x| ![REG_STACK_POINTER, REG_FLAGS, REG_INSTRUCTION_POINTER].contains(&x)),
            loads: ins.has_load(),
            stores: ins.has_store(),
        }
    }
}

/// Which numbering a stream of instructions uses, learned as they come: registers 17-31 are
/// unused by x86 numbering and hold ChampSim's flags (25) and instruction pointer (26), which
/// every conditional branch and every branch read and write, so a ChampSim trace shows
/// itself at its first branch.
#[derive(Clone, Copy, Debug, Default)]
pub struct NumberingGuess {
    champsim: bool,
}

impl NumberingGuess {
    #[inline]
    pub fn update<R: Record + ?Sized>(&mut self, ins: &R) -> Numbering {
        self.champsim |= ins.srcs().iter().chain(ins.dsts()).any(|&r| (17..32).contains(&r));
        if self.champsim {
            Numbering::ChampSim
        } else {
            Numbering::X86
        }
    }
}

/// ChampSim's stack-pointer folding (src/ooo_cpu.cc, `do_stack_pointer_folding`): the front
/// end knows the stack pointer a call, return, push or pop leaves, so such an instruction's
/// write of it makes no register dependence. Returns the stack pointer's id in `ins`'s own
/// numbering when `ins` writes it and either is a branch, accesses memory or reads no other
/// register than the stack pointer, flags and instruction pointer (`add rsp, 16`); a
/// variable change (`mov rsp, rbp`) keeps its dependence.
#[inline]
pub fn folded_stack_pointer<R: Record + ?Sized>(ins: &R, numbering: Numbering) -> Option<Reg> {
    let sp = ins.dsts().iter().copied().find(|&r| champsim_reg(r, numbering) == REG_STACK_POINTER)?;
    let reads_other = ins.srcs().iter().any(|&r| ![REG_STACK_POINTER, REG_FLAGS, REG_INSTRUCTION_POINTER].contains(&champsim_reg(r, numbering)));
    (ins.branch() != Branch::None || ins.naccesses() > 0 || !reads_other).then_some(sp)
}

/// How the registers of the records being encoded are numbered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numbering {
    /// x86-64 as secmem's tracer and built-in workloads number them (0–15 GPRs, rsp = 4,
    /// 16 = flags, 32–63 vector/x87; `docs/trace-format.md`).
    X86,
    /// Already ChampSim's (records read from a ChampSim trace).
    ChampSim,
}

const X86_RSP: Reg = 4;
const X86_FLAGS: Reg = 16;

/// ChampSim's id for a register: rsp and flags become its stack pointer and flags; every
/// other x86 register moves up by 32 (clear of ChampSim's special ids 6, 25 and 26).
#[inline]
fn champsim_reg(r: Reg, numbering: Numbering) -> u8 {
    match numbering {
        Numbering::ChampSim => r,
        Numbering::X86 => match r {
            X86_RSP => REG_STACK_POINTER,
            X86_FLAGS => REG_FLAGS,
            r => r.wrapping_add(32),
        },
    }
}

/// What encoding one instruction as a ChampSim record could not keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Registers beyond the record's 4 sources and 2 destinations.
    pub registers: u32,
    /// Loads beyond 4 or stores beyond 2 (or at address 0, which means "none").
    pub accesses: u32,
}

/// One ChampSim `input_instr`, decoded as is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChampSimRecord {
    pub ip: u64,
    pub is_branch: u8,
    pub branch_taken: u8,
    pub destination_registers: [u8; 2],
    pub source_registers: [u8; 4],
    pub destination_memory: [u64; 2],
    pub source_memory: [u64; 4],
}

#[inline(always)]
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

impl ChampSimRecord {
    /// Decode the first 64 bytes of `b` (which must hold them).
    #[inline]
    pub fn decode(b: &[u8]) -> ChampSimRecord {
        let b = &b[..RECORD_LEN];
        ChampSimRecord {
            ip: u64_at(b, 0),
            is_branch: b[8],
            branch_taken: b[9],
            destination_registers: [b[10], b[11]],
            source_registers: [b[12], b[13], b[14], b[15]],
            destination_memory: [u64_at(b, 16), u64_at(b, 24)],
            source_memory: [u64_at(b, 32), u64_at(b, 40), u64_at(b, 48), u64_at(b, 56)],
        }
    }

    /// The record's 64 bytes (for writing ChampSim traces and test fixtures).
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[..8].copy_from_slice(&self.ip.to_le_bytes());
        b[8] = self.is_branch;
        b[9] = self.branch_taken;
        b[10..12].copy_from_slice(&self.destination_registers);
        b[12..16].copy_from_slice(&self.source_registers);
        for (k, a) in self.destination_memory.iter().enumerate() {
            b[16 + 8 * k..24 + 8 * k].copy_from_slice(&a.to_le_bytes());
        }
        for (k, a) in self.source_memory.iter().enumerate() {
            b[32 + 8 * k..40 + 8 * k].copy_from_slice(&a.to_le_bytes());
        }
        b
    }

    /// The record ChampSim's tracer would have written for `ins`: the start address of each
    /// load and store, and registers mapped to ChampSim's ids. A branch gets the register
    /// signature from which ChampSim derives its type (`ooo_model_instr`'s constructor): it
    /// writes the instruction pointer; calls read and write the stack pointer and read the
    /// instruction pointer; returns read and write the stack pointer; conditional branches
    /// read the instruction pointer and the flags (or another register). The type is
    /// [`BranchType::of`]. Values and access sizes, which ChampSim does not record, are
    /// dropped.
    pub fn from_instr(ins: &Instr, numbering: Numbering) -> (ChampSimRecord, Option<BranchType>, Lost) {
        let mut r = ChampSimRecord { ip: ins.pc, ..Default::default() };
        let mut lost = Lost::default();
        let (mut ns, mut nd) = (0, 0);
        let mut src = |r: &mut ChampSimRecord, reg: u8, lost: &mut Lost| {
            if reg == 0 || r.source_registers[..ns].contains(&reg) {
                return;
            }
            if ns < SRC_SLOTS {
                r.source_registers[ns] = reg;
                ns += 1;
            } else {
                lost.registers += 1;
            }
        };
        let mut dst = |r: &mut ChampSimRecord, reg: u8, lost: &mut Lost| {
            if reg == 0 || r.destination_registers[..nd].contains(&reg) {
                return;
            }
            if nd < DST_SLOTS {
                r.destination_registers[nd] = reg;
                nd += 1;
            } else {
                lost.registers += 1;
            }
        };
        let ty = BranchType::of(ins, numbering).map(|ty| {
            let regs: Vec<u8> = ins.srcs().iter().map(|&x| champsim_reg(x, numbering)).collect();
            let writes: Vec<u8> = ins.dsts().iter().map(|&x| champsim_reg(x, numbering)).collect();
            let Signature { flags, other, .. } = Signature::of(ins, numbering);
            match ty {
                BranchType::DirectCall | BranchType::IndirectCall => {
                    src(&mut r, REG_STACK_POINTER, &mut lost);
                    src(&mut r, REG_INSTRUCTION_POINTER, &mut lost);
                    dst(&mut r, REG_STACK_POINTER, &mut lost);
                }
                BranchType::Return => {
                    src(&mut r, REG_STACK_POINTER, &mut lost);
                    dst(&mut r, REG_STACK_POINTER, &mut lost);
                }
                BranchType::Conditional => {
                    src(&mut r, REG_INSTRUCTION_POINTER, &mut lost);
                    if !flags && !other {
                        // Not taken yet reading nothing: ChampSim needs a condition input.
                        src(&mut r, REG_FLAGS, &mut lost);
                    }
                }
                BranchType::Indirect | BranchType::DirectJump => {}
            }
            dst(&mut r, REG_INSTRUCTION_POINTER, &mut lost);
            // The remaining registers; the stack pointer only where the type has it.
            let keep_sp = matches!(ty, BranchType::DirectCall | BranchType::IndirectCall | BranchType::Return);
            for &x in &regs {
                if x != REG_STACK_POINTER || keep_sp {
                    src(&mut r, x, &mut lost);
                }
            }
            for &x in &writes {
                if x != REG_STACK_POINTER || keep_sp {
                    dst(&mut r, x, &mut lost);
                }
            }
            r.is_branch = 1;
            r.branch_taken = (ins.branch == Branch::Taken) as u8;
            ty
        });
        if ty.is_none() {
            for &x in ins.srcs() {
                src(&mut r, champsim_reg(x, numbering), &mut lost);
            }
            for &x in ins.dsts() {
                dst(&mut r, champsim_reg(x, numbering), &mut lost);
            }
        }
        let (mut nl, mut nst) = (0, 0);
        for a in &ins.accesses {
            let slots: &mut [u64] = if a.store { &mut r.destination_memory } else { &mut r.source_memory };
            let n = if a.store { &mut nst } else { &mut nl };
            if *n < slots.len() && a.addr != 0 {
                slots[*n] = a.addr;
                *n += 1;
            } else {
                lost.accesses += 1;
            }
        }
        (r, ty, lost)
    }

    /// Whether the record could be a ChampSim record (format detection's test).
    pub fn plausible(&self) -> bool {
        self.ip != 0
            && self.is_branch <= 1
            && self.branch_taken <= 1
            && (self.branch_taken == 0 || self.is_branch == 1)
    }

    /// The secmem record, with instruction length `len` (ChampSim records none: see
    /// [`ChampSimReader`]). Loads (source memory) come before stores (destination memory).
    pub fn to_instr(&self, len: u8, out: &mut Instr) {
        out.clear();
        // Unused register slots read as 0, as from every other reader.
        out.src = [0; MAX_SRC];
        out.dst = [0; MAX_DST];
        out.pc = self.ip;
        out.len = len;
        for &r in &self.source_registers {
            if r != 0 && r != REG_INSTRUCTION_POINTER {
                out.add_src(r);
            }
        }
        for &r in &self.destination_registers {
            if r != 0 && r != REG_INSTRUCTION_POINTER {
                out.add_dst(r);
            }
        }
        const ZERO: [u8; ACCESS_SIZE] = [0; ACCESS_SIZE];
        for &a in &self.source_memory {
            if a != 0 {
                out.add_access(false, a, &ZERO);
            }
        }
        for &a in &self.destination_memory {
            if a != 0 {
                out.add_access(true, a, &ZERO);
            }
        }
        out.op = if self.is_branch != 0 {
            out.branch = if self.branch_taken != 0 {
                Branch::Taken
            } else {
                Branch::NotTaken
            };
            OpClass::Branch
        } else if out.accesses.is_empty() {
            OpClass::Alu
        } else {
            OpClass::Mem
        };
    }
}

/// Writes a ChampSim trace: raw, or xz/gzip-compressed when the name ends in `.xz`/`.gz`
/// (what ChampSim's trace reader decompresses). The file appears under its name only when
/// [`ChampSimWriter::finish`] succeeds (written to a temporary name, then renamed).
pub struct ChampSimWriter {
    path: PathBuf,
    /// The temporary file (or FIFO/device written in place); dropped unfinished, it goes.
    tmp: Option<secmem_files::Output>,
    out: Option<Sink>,
    count: u64,
}

/// xz preset of exported traces: 3, the slowest of xz's fast presets (hash-chain match
/// finder). On 1 M records of hot and of mix it compresses 20-40x faster than the default
/// preset 6 (0.6-0.9 s against 18-23 s of CPU) into files within 1% of its size; ChampSim
/// reads any preset.
pub const EXPORT_XZ_PRESET: u32 = 3;

/// Uncompressed bytes of each block of an exported .xz (196,608 records): three times
/// preset 3's 4 MiB dictionary, what xz itself takes for multithreaded compression. The
/// blocks are compressed independently, so the file is the same whatever the threads.
pub const EXPORT_XZ_BLOCK: u64 = 12 << 20;

/// Threads compressing an export's blocks: the host's cores, at most 4 (each holds about
/// three blocks, 36 MiB).
fn export_xz_threads() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4)) as u32
}

/// The multithreaded xz encoder of exports (`EXPORT_XZ_PRESET`, `EXPORT_XZ_BLOCK`, CRC64 as
/// xz's own default) writing to `out`. One stream of independent blocks: liblzma's stream
/// decoder, which ChampSim's trace reader uses (`inc/inf_stream.h`), and `xz -d` read it.
pub fn export_xz<W: Write>(out: W, threads: u32) -> std::io::Result<liblzma::write::XzEncoder<W>> {
    let stream = liblzma::stream::MtStreamBuilder::new()
        .threads(threads.max(1))
        .preset(EXPORT_XZ_PRESET)
        .block_size(EXPORT_XZ_BLOCK)
        .check(liblzma::stream::Check::Crc64)
        .encoder()?;
    Ok(liblzma::write::XzEncoder::new_stream(out, stream))
}

enum Sink {
    Raw(BufWriter<File>),
    Xz(liblzma::write::XzEncoder<BufWriter<File>>),
    Gz(flate2::write::GzEncoder<BufWriter<File>>),
}

impl Sink {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::Raw(w) => w,
            Sink::Xz(w) => w,
            Sink::Gz(w) => w,
        }
    }

    /// End the compressed stream and flush everything to the file.
    fn finish(self) -> std::io::Result<()> {
        let buf = match self {
            Sink::Raw(w) => w,
            Sink::Xz(w) => w.finish()?,
            Sink::Gz(w) => w.finish()?,
        };
        // Flushed only: the commit syncs a temporary file (a FIFO or device cannot be).
        buf.into_inner().map_err(|e| e.into_error()).map(drop)
    }
}

impl ChampSimWriter {
    pub fn create(path: impl AsRef<Path>) -> Result<ChampSimWriter, TraceError> {
        let path = path.as_ref().to_path_buf();
        let mut tmp = secmem_files::Output::create(&path, secmem_files::PUBLIC).map_err(|e| TraceError::Other(e.to_string()))?;
        let f = BufWriter::with_capacity(1 << 16, tmp.take_file().map_err(|e| TraceError::Other(e.to_string()))?);
        let name = path.to_string_lossy().to_ascii_lowercase();
        let out = if name.ends_with(".xz") {
            Sink::Xz(export_xz(f, export_xz_threads()).map_err(|e| io(&path, e))?)
        } else if name.ends_with(".gz") {
            Sink::Gz(flate2::write::GzEncoder::new(f, flate2::Compression::default()))
        } else {
            Sink::Raw(f)
        };
        Ok(ChampSimWriter { path, tmp: Some(tmp), out: Some(out), count: 0 })
    }

    pub fn write(&mut self, r: &ChampSimRecord) -> Result<(), TraceError> {
        let out = self.out.as_mut().expect("writer used after finish");
        out.writer().write_all(&r.encode()).map_err(|e| io(&self.path, e))?;
        self.count += 1;
        Ok(())
    }

    /// Finish the compressed stream, flush, and give the file its name; returns the records.
    pub fn finish(mut self) -> Result<u64, TraceError> {
        let out = self.out.take().expect("finished twice");
        let tmp = self.tmp.take().expect("finished twice");
        // An error drops `tmp`, which removes the temporary file.
        out.finish().map_err(|e| io(&self.path, e))?;
        tmp.commit().map_err(|e| TraceError::Other(e.to_string()))?;
        Ok(self.count)
    }
}

fn io(path: &Path, source: std::io::Error) -> TraceError {
    TraceError::Io { path: path.display().to_string(), source }
}

/// Learned instruction lengths: 4096 (pc, len) slots.
const LEN_SLOTS: usize = 4096;

#[inline(always)]
fn len_slot(pc: u64) -> usize {
    (pc ^ (pc >> 12) ^ (pc >> 24)) as usize & (LEN_SLOTS - 1)
}

/// Reads a ChampSim trace record by record.
///
/// Instruction lengths, which ChampSim does not record, are inferred: an instruction that
/// is not a taken branch falls through, so its length is the next record's ip minus its
/// own when that is 1..=15 bytes. Other records get the length last inferred for the same
/// pc (a small table), else 0, meaning unknown.
pub struct ChampSimReader {
    name: String,
    s: Buffered,
    lens: Box<[(u64, u8)]>,
    rec: ChampSimRecord,
    count: u64,
    failed: Option<TraceError>,
}

impl ChampSimReader {
    /// Open a ChampSim trace (raw, xz, gzip or zstd: recognised by its first bytes).
    pub fn open(path: impl AsRef<Path>) -> Result<ChampSimReader, TraceError> {
        let p = path.as_ref();
        let path = p.display().to_string();
        let d = Decoded::open(&path)?;
        let name = p
            .file_name()
            .map_or(path.clone(), |n| n.to_string_lossy().into_owned());
        Ok(ChampSimReader {
            name,
            s: Buffered::new(d, RECORD_LEN << 12),
            lens: vec![(u64::MAX, 0); LEN_SLOTS].into_boxed_slice(),
            rec: ChampSimRecord::default(),
            count: 0,
            failed: None,
        })
    }

    /// Records read so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The last raw record read (what the last `next_into` converted).
    pub fn raw(&self) -> &ChampSimRecord {
        &self.rec
    }

    fn corrupt(&self, offset: u64, what: String) -> TraceError {
        TraceError::Corrupt {
            path: self.s.d.path.clone(),
            offset,
            what,
        }
    }

    fn next_record(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        // Two records: this one and the next one's ip (for the length).
        self.s.fill(2 * RECORD_LEN);
        let avail = self.s.avail();
        if avail < RECORD_LEN {
            if let Some(e) = self.s.pending.take() {
                return Err(e);
            }
            if avail == 0 {
                return Ok(false);
            }
            return Err(self.corrupt(
                self.s.offset(),
                format!("truncated: the last record has {avail} of its {RECORD_LEN} bytes"),
            ));
        }
        let at = self.s.offset();
        let b = self.s.rest();
        let r = ChampSimRecord::decode(b);
        let next_ip = (avail >= 2 * RECORD_LEN).then(|| u64_at(b, RECORD_LEN));
        if r.is_branch > 1 || r.branch_taken > 1 {
            let (field, off, v) = if r.is_branch > 1 {
                ("is_branch", 8, r.is_branch)
            } else {
                ("branch_taken", 9, r.branch_taken)
            };
            return Err(self.corrupt(
                at + off,
                format!(
                    "not a ChampSim record: {field} is {v:#04x} (0 or 1 expected) in record {}",
                    self.count
                ),
            ));
        }
        let slot = len_slot(r.ip);
        let mut len = 0u8;
        let falls_through = r.is_branch == 0 || r.branch_taken == 0;
        if let (true, Some(n)) = (falls_through, next_ip) {
            let d = n.wrapping_sub(r.ip);
            if (1..=15).contains(&d) {
                len = d as u8;
                self.lens[slot] = (r.ip, len);
            }
        }
        if len == 0 && self.lens[slot].0 == r.ip {
            len = self.lens[slot].1;
        }
        r.to_instr(len, out);
        if let Some(why) = out.wrapping_access() {
            return Err(self.corrupt(at, format!("record {}: {why}", self.count)));
        }
        self.rec = r;
        self.s.pos += RECORD_LEN;
        self.count += 1;
        Ok(true)
    }
}

impl TraceSource for ChampSimReader {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if let Some(e) = &self.failed {
            return Err(repeat_err(e));
        }
        let r = self.next_record(out);
        remember(&mut self.failed, r)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod folding_tests {
    use super::*;

    fn ins(srcs: &[Reg], dsts: &[Reg], access: Option<bool>, branch: Branch) -> Instr {
        let mut i = Instr { pc: 0x1000, len: 1, branch, ..Default::default() };
        srcs.iter().for_each(|&r| i.add_src(r));
        dsts.iter().for_each(|&r| i.add_dst(r));
        if let Some(store) = access {
            i.add_access(store, 0x7000, &[0; 8]);
        }
        i
    }

    #[test]
    fn the_stack_pointer_is_folded_as_champsim_folds_it() {
        let (rsp, rbx, rbp, flags) = (X86_RSP, 3, 5, X86_FLAGS);
        let x86 = |i: &Instr| folded_stack_pointer(i, Numbering::X86);
        // push rbx, pop rbx, call, ret, add rsp, 16: folded.
        assert_eq!(x86(&ins(&[rsp, rbx], &[rsp], Some(true), Branch::None)), Some(rsp));
        assert_eq!(x86(&ins(&[rsp], &[rbx, rsp], Some(false), Branch::None)), Some(rsp));
        assert_eq!(x86(&ins(&[rsp], &[rsp], Some(true), Branch::Taken)), Some(rsp));
        assert_eq!(x86(&ins(&[rsp], &[rsp], Some(false), Branch::Taken)), Some(rsp));
        assert_eq!(x86(&ins(&[rsp], &[rsp, flags], None, Branch::None)), Some(rsp));
        // mov rsp, rbp (a variable change): kept; an instruction not writing it: nothing.
        assert_eq!(x86(&ins(&[rbp], &[rsp], None, Branch::None)), None);
        assert_eq!(x86(&ins(&[rsp, rbx], &[rbx], Some(false), Branch::None)), None);
        // The same in ChampSim's ids (a record read from a ChampSim trace).
        let cs = |i: &Instr| folded_stack_pointer(i, Numbering::ChampSim);
        assert_eq!(cs(&ins(&[REG_STACK_POINTER, REG_INSTRUCTION_POINTER], &[REG_STACK_POINTER, REG_INSTRUCTION_POINTER], Some(false), Branch::Taken)), Some(REG_STACK_POINTER));
        assert_eq!(cs(&ins(&[37], &[REG_STACK_POINTER], None, Branch::None)), None);
        // The numbering shows itself at the first register 17-31.
        let mut g = NumberingGuess::default();
        assert_eq!(g.update(&ins(&[rsp, flags], &[rbx], None, Branch::None)), Numbering::X86);
        assert_eq!(g.update(&ins(&[REG_FLAGS], &[REG_INSTRUCTION_POINTER], None, Branch::Taken)), Numbering::ChampSim);
        assert_eq!(g.update(&ins(&[4], &[4], None, Branch::None)), Numbering::ChampSim);
    }
}
