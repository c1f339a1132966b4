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
//! A zero register or address means "none". ChampSim traces carry **no data values and no
//! access sizes**: every memory operand becomes an 8-byte access whose value is zero (so the
//! simulator's load-value check stays consistent, but anything that depends on values —
//! encryption of real data, frequent values — is meaningless). See `docs/trace-formats.md`.

use std::path::Path;

use crate::compress::{remember, repeat_err, Buffered, Decoded};
use crate::record::{Branch, Instr, OpClass, MAX_DST, MAX_SRC};
use crate::{TraceError, TraceSource};

/// Bytes per record.
pub const RECORD_LEN: usize = 64;
/// Size given to every memory operand (ChampSim records no sizes).
pub const ACCESS_SIZE: usize = 8;
/// ChampSim's special register ids (`champsim::REG_*`).
pub const REG_STACK_POINTER: u8 = 6;
pub const REG_FLAGS: u8 = 25;
/// Written by every branch: not a data dependency, so the reader drops it (see the docs).
pub const REG_INSTRUCTION_POINTER: u8 = 26;

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
