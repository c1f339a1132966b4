//! mecu: the Memory Encryption Control Unit for non-volatile main memory (seed 002).
//!
//! Everything between the L2 and memory is encrypted with pads F_k(a, s_a) (002 §4.1):
//! - k, the master key, lives on a removable device (a smart card) that is in while the system
//!   runs, taken out at suspend, and replaced by a new random key at reboot;
//! - s, the global state counter (`mecu.state_bits`, 16 by default), is 0 at reboot and
//!   incremented on every resume; it is kept on the removable device (or, with
//!   `mecu.s_on_device = false`, in the MECU itself, where an offline adversary can roll it
//!   back, 002 §4.3);
//! - s_a, one stamp per memory block of N = `mecu.lines_per_block` lines (002 §4.2), lives in
//!   the MECU: the value of s when the block was last written. Its storage is
//!   S_mem·log2(N_state)/(S_line·N_lines) bits (`mecu.state_storage_bytes`).
//!
//! F (Fig. 2) is AES_k over (a ‖ s_a ‖ i) for the line's 16-B chunks i. A read looks up s_a
//! (`mecu.state_lookup` cycles) and computes the pad while the line is on the bus, so only the
//! XOR is added. A write to a block whose stamp is older than s first re-encrypts the whole
//! block under s (lazy re-encryption, §4.2): its other N − 1 lines are read, deciphered with the
//! old pad, enciphered with the new and written, and the processor stalls meanwhile (the stall
//! is returned from `poll`, §5.1); the line being written simply gets the new pad. Within one resume cycle a rewrite reuses the pad: by design the
//! adversary, who only sees memory at suspends, learns the write footprint and nothing else.
//!
//! Power failure during a block's re-encryption (§6.4): with `mecu.capacitor` the MECU's
//! capacitors finish the block (every step, the stamp update and the write that caused it)
//! before it goes dark, so no line is lost or left under a mixed stamp; without them the block
//! is left half re-encrypted. A second port shares k, s and the stamp table for DMA (§6.3).
//!
//! Timed runs suspend and resume every `mecu.resume_period` cycles (002 §5.2: 100 M) from
//! `poll`: as in the paper's simulator a suspend/resume cycle increments s (caches are kept).
//! Per resume cycle it records the IPC, the stall cycles and the time to quiescence (from the
//! resume to the end of the last re-encryption in that cycle, §5.2.2).
//!
//! Memory is all-zero plaintext at power-on: a line whose block stamp is 0 and whose bytes are
//! all zero is that initial state.

use super::{OfflineView, PowerManaged, Encryption, EncryptionScheme, PowerEvent, derive_key, Seed};
use crate::error::IntegrityError;
use crate::layout::{is_initial, MAX_LINE};
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_crypto::Aes128;
use secmem_timing::Cycle;
use crate::decl::{Component, Coverage, Def, Guarantees, Kind, Role, param, stat};

/// mecu's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "mecu",
    kind: Kind::Encryption,
    summary: "the memory encryption control unit for non-volatile memory: pads F_k(a, s_a), a global state counter, lazy re-encryption after resume",
    source: "002 §4",
    params: &[
        param("mecu.lines_per_block", Def::Int(256), "lines", "N: cache lines sharing one stamp (002 §4.2, §5.2.3)"),
        param("mecu.state_bits", Def::Int(16), "bits", "global state counter s and stamps s_a (002 §4.1)"),
        param("mecu.state_lookup", Def::Int(3), "cycles", "to read s_a from the MECU (002 Table 1)"),
        param("mecu.s_on_device", Def::Bool(true), "bool", "s kept on the removable key device (false: on the MECU, 002 §4.3)"),
        param("mecu.capacitor", Def::Bool(true), "bool", "capacitors finish a block re-encryption on power failure (002 §6.4)"),
        param("mecu.resume_period", Def::Int(0), "cycles", "between simulated suspend/resume cycles in timed runs (0: never; 002 §5.2: 100 M)"),
    ],
    stats: &[
        stat("mecu.reads", "lines", "lines decrypted on their way in (L2 misses)"),
        stat("mecu.writes", "lines", "lines encrypted on their way out (write-backs)"),
        stat("mecu.read_delay_per_read", "cycles", "cycles the unit added to a read (stamp lookup, XOR), on average"),
        stat("mecu.state", "count", "the global state counter s at the end of the run (incremented on every resume)"),
        stat("mecu.state_storage_bytes", "B", "bytes the per-block stamps s_a take in the MECU (002 §4.2)"),
        stat("mecu.resumes", "events", "resumes from suspension"),
        stat("mecu.suspends", "events", "suspensions"),
        stat("mecu.reboots", "events", "reboots"),
        stat("mecu.resumes_refused", "events", "resumes the unit refused (e.g. without the removable device's key)"),
        stat("mecu.reencryptions", "blocks", "lazy re-encryptions of a block under the new s (a write to a block with an older stamp, 002 §4.2)"),
        stat("mecu.reencrypted_lines", "lines", "lines those re-encryptions read, re-enciphered and wrote"),
        stat("mecu.stall_cycles", "cycles", "cycles the processor stalled for re-encryption (overlapping ones counted once)"),
        stat("mecu.stall_cycles_per_resume", "cycles", "mecu.stall_cycles / mecu.resumes"),
        stat("mecu.saturated_resume_cycles", "resume cycles", "resume cycles stalled for re-encryption most of the time: never quiescent (002 §5.2.2)"),
        stat("mecu.ipc_per_resume_cycle", "series", "IPC in each resume period (002 Fig. 4)"),
        stat("mecu.stall_cycles_per_resume_cycle", "series", "stall cycles in each resume period"),
        stat("mecu.quiescence_cycles_per_resume_cycle", "series", "cycles to quiescence in each resume period"),
        stat("mecu.time_to_quiescence_cycles", "cycles", "mean cycles from a resume to the end of its last re-encryption (002 §5.2.2)"),
        stat("mecu.time_to_quiescence_seconds", "s", "the same in seconds at the core's clock"),
        stat("mecu.power_cuts", "events", "power cuts"),
        stat("mecu.lost_writes", "lines", "dirty lines lost with the power (in the volatile cache at a power cut)"),
        stat("mecu.dma_reads", "lines", "reads through the second (DMA) port (002 §6.3)"),
        stat("mecu.dma_writes", "lines", "writes through the second (DMA) port"),
        stat("mecu.table_lock_wait_cycles", "cycles", "cycles accesses waited for the stamp table's single port, shared by the two ports, summed (002 §6.3)"),
    ],
};

/// mecu's registration. One pad per block and resume cycle (002 §4): a rewrite within a cycle reuses it, and the pad XOR is malleable; s kept on the unit can be rolled back (002 §4.3).
pub const SCHEME: EncryptionScheme = EncryptionScheme {
    decl: &DECL,
    guarantees: |p| Ok(Guarantees { confidential: true, hides_equal_lines: true, at_rest: true, rollback_reuses_pads: !p.bool("mecu.s_on_device")?, ..Guarantees::NONE }),
    coverage: Coverage { lays_out: &[Role::Counters], protects: Role::LINES, guarded: &[] },
    build: |p, m, c, seed| Ok(Box::new(Mecu::new(p, m, c, seed)?)),
};

const CHUNK: usize = 4096;
/// A resume cycle stalled for re-encryption this much of its length is counted as saturated:
/// blocks re-encrypted after every resume take (nearly) the whole cycle, so the program
/// barely advances and a run takes as long as all those re-encryptions do to simulate.
const SATURATED: f64 = 0.9;

/// The per-block stamps, allocated in chunks as blocks are first stamped.
#[derive(Clone, Default)]
struct StampTable {
    chunks: Vec<Option<Box<[u32]>>>,
}

impl StampTable {
    fn new(blocks: u64) -> StampTable {
        StampTable { chunks: vec![None; (blocks as usize).div_ceil(CHUNK)] }
    }

    #[inline]
    fn get(&self, b: u64) -> u32 {
        let b = b as usize;
        match &self.chunks[b / CHUNK] {
            Some(c) => c[b % CHUNK],
            None => 0,
        }
    }

    #[inline]
    fn set(&mut self, b: u64, v: u32) {
        let b = b as usize;
        let c = self.chunks[b / CHUNK].get_or_insert_with(|| vec![0u32; CHUNK].into_boxed_slice());
        c[b % CHUNK] = v;
    }

    fn clear(&mut self) {
        self.chunks.iter_mut().for_each(|c| *c = None);
    }

    /// (block, stamp) for every non-zero stamp.
    fn nonzero(&self) -> Vec<(u64, u32)> {
        let mut v = Vec::new();
        for (i, c) in self.chunks.iter().enumerate() {
            if let Some(c) = c {
                for (j, &s) in c.iter().enumerate() {
                    if s != 0 {
                        v.push(((i * CHUNK + j) as u64, s));
                    }
                }
            }
        }
        v
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Port {
    Cpu,
    Dma,
}

pub struct Mecu {
    seed: Seed,
    boot: u64,
    /// The removable device's key.
    device_key: [u8; 16],
    /// The key in the MECU's circuitry: present only while running.
    key: Option<Aes128>,
    s: u32,
    s_on_device: bool,
    s_max: u32,
    state_bits: u32,
    stamps: StampTable,
    line: u64,
    lines_per_block: u64,
    covered: u64,
    state_lookup: Cycle,
    capacitor: bool,
    running: bool,
    power_lost: bool,
    cut_at: Option<u64>,
    /// The stamp table's single port is held until this cycle (002 §6.3: shared by two MECUs).
    table_free: Cycle,
    // the resume schedule and its per-cycle series
    resume_period: Cycle,
    next_resume: Cycle,
    hz: f64,
    storage_bytes: u64,
    win_cycle: Cycle,
    win_instr: u64,
    win_stall: u64,
    win_last_reenc: Option<Cycle>,
    stall_until: Cycle,
    ipc_series: Vec<f64>,
    /// Resume cycles in which the processor stalled for re-encryption at least
    /// `SATURATED` of the time: the system never reaches quiescence (002 §5.2.2).
    saturated: u64,
    stall_series: Vec<f64>,
    quiesce_series: Vec<f64>,
    // statistics
    reads: u64,
    writes: u64,
    read_delay: u64,
    resumes: u64,
    suspends: u64,
    reboots: u64,
    resumes_refused: u64,
    reencryptions: u64,
    reencrypted_lines: u64,
    stall_cycles: u64,
    power_cuts: u64,
    lost_writes: u64,
    dma_reads: u64,
    dma_writes: u64,
    lock_wait: u64,
}

impl Mecu {
    pub fn new(p: &Params, m: &mut Machine, covered: u64, seed: Seed) -> Result<Mecu, ConfigError> {
        let line = m.line();
        let n = p.u64_min("mecu.lines_per_block", 1)?;
        let state_bits = p.u64_min("mecu.state_bits", 1)?;
        if state_bits > 32 {
            return Err(ConfigError(format!("mecu.state_bits: {} exceeds the 32-bit stamps supported", state_bits)));
        }
        let mem_size = p.size("memory.size")?;
        // 002 §4.2: S_mem·log2(N_state) / (S_line·N_lines) bits.
        let storage_bits = (mem_size as u128 * state_bits as u128).div_ceil(line as u128 * n as u128);
        let blocks = covered.div_ceil(line * n);
        let device_key = derive_key(seed, 0x3ec0);
        let resume_period = p.u64_min("mecu.resume_period", 0)?;
        Ok(Mecu {
            seed,
            boot: 0,
            device_key,
            key: Some(Aes128::new(&device_key)),
            s: 0,
            s_on_device: p.bool("mecu.s_on_device")?,
            s_max: if state_bits == 32 { u32::MAX } else { (1u32 << state_bits) - 1 },
            state_bits: state_bits as u32,
            stamps: StampTable::new(blocks),
            line,
            lines_per_block: n,
            covered,
            state_lookup: p.u64_min("mecu.state_lookup", 0)?,
            capacitor: p.bool("mecu.capacitor")?,
            running: true,
            power_lost: false,
            cut_at: None,
            table_free: 0,
            resume_period,
            next_resume: resume_period,
            hz: p.freq("core.clock")?,
            storage_bytes: storage_bits.div_ceil(8) as u64,
            win_cycle: 0,
            win_instr: 0,
            win_stall: 0,
            win_last_reenc: None,
            stall_until: 0,
            ipc_series: Vec::new(),
            saturated: 0,
            stall_series: Vec::new(),
            quiesce_series: Vec::new(),
            reads: 0,
            writes: 0,
            read_delay: 0,
            resumes: 0,
            suspends: 0,
            reboots: 0,
            resumes_refused: 0,
            reencryptions: 0,
            reencrypted_lines: 0,
            stall_cycles: 0,
            power_cuts: 0,
            lost_writes: 0,
            dma_reads: 0,
            dma_writes: 0,
            lock_wait: 0,
        })
    }

    /// The global state counter s.
    pub fn state(&self) -> u32 {
        self.s
    }

    pub fn block_of(&self, addr: u64) -> u64 {
        addr / (self.line * self.lines_per_block)
    }

    /// The stamp s_a of the block holding `addr`.
    pub fn stamp_of(&self, addr: u64) -> u32 {
        self.stamps.get(self.block_of(addr))
    }

    pub fn is_running(&self) -> bool {
        self.running && !self.power_lost
    }

    /// Steps of one block's re-encryption, for `arm_power_cut`: reading and writing each of
    /// its lines, updating its stamp, writing the line that caused it.
    pub fn reencryption_steps(&self) -> u64 {
        2 * self.lines_per_block + 2
    }

    /// Cut the power at `step` of the next block re-encryption (see `reencryption_steps`).
    pub fn arm_power_cut(&mut self, step: u64) {
        self.cut_at = Some(step);
    }

    /// Whether the power is out (after a cut).
    pub fn power_lost(&self) -> bool {
        self.power_lost
    }

    /// Power is back after a failure: the card is still in, so this is a resume.
    pub fn restore_power(&mut self) -> Result<(), String> {
        if !self.power_lost {
            return Err("the power did not fail".into());
        }
        self.power_lost = false;
        self.running = false;
        self.resume()
    }

    /// What the adversary reads from the MECU while the machine is suspended.
    pub fn offline_view(&self) -> Result<OfflineView, String> {
        if self.is_running() {
            return Err("the MECU is read offline, while the system is suspended or powered off".into());
        }
        Ok(OfflineView {
            // The key is on the card, which was taken out; the circuitry keeps no copy.
            key: self.key.as_ref().map(|_| self.device_key),
            state_counter: (!self.s_on_device).then_some(self.s),
            stamps: self.stamps.nonzero(),
        })
    }

    /// The offline adversary overwrites s (002 §4.3): possible only if s is kept on the MECU.
    pub fn set_state_counter(&mut self, v: u32) -> Result<(), String> {
        if self.s_on_device {
            return Err("s is on the removable key device, out of the adversary's reach (mecu.s_on_device)".into());
        }
        if self.is_running() {
            return Err("the MECU's state can only be changed offline, while suspended".into());
        }
        self.s = v;
        Ok(())
    }

    fn suspend(&mut self) -> Result<(), String> {
        if !self.is_running() {
            return Err("the system is not running".into());
        }
        self.key = None;
        self.running = false;
        self.suspends += 1;
        Ok(())
    }

    fn resume(&mut self) -> Result<(), String> {
        if self.power_lost {
            return Err("the power is out: restore it first".into());
        }
        if self.running {
            return Err("the system is not suspended".into());
        }
        if self.s >= self.s_max {
            return Err(format!("the {}-bit state counter is exhausted: the system must be rebooted", self.state_bits));
        }
        self.s += 1;
        self.key = Some(Aes128::new(&self.device_key));
        self.running = true;
        self.resumes += 1;
        Ok(())
    }

    pub(crate) fn power_event(&mut self, ev: PowerEvent) -> Result<(), String> {
        match ev {
            PowerEvent::Suspend => self.suspend(),
            PowerEvent::Resume => self.resume(),
            PowerEvent::Reboot => {
                self.reboot();
                Ok(())
            }
        }
    }

    fn reboot(&mut self) {
        self.boot += 1;
        self.device_key = derive_key(self.seed, 0x3ec0 + self.boot);
        self.key = Some(Aes128::new(&self.device_key));
        self.s = 0;
        self.stamps.clear();
        self.running = true;
        self.power_lost = false;
        self.cut_at = None;
        self.reboots += 1;
    }

    /// XOR `buf` with F_k(a, s_a) (002 Fig. 2: AES_k(a ‖ s_a ‖ i) for each 16-B chunk i).
    fn apply_pad(key: &Aes128, addr: u64, s_a: u32, buf: &mut [u8]) {
        let mut pads = [[0u8; 16]; MAX_LINE / 16];
        let n = buf.len() / 16;
        for (i, pad) in pads[..n].iter_mut().enumerate() {
            pad[..8].copy_from_slice(&addr.to_le_bytes());
            pad[8..12].copy_from_slice(&s_a.to_le_bytes());
            pad[12..].copy_from_slice(&(i as u32).to_le_bytes());
        }
        key.encrypt_many(&mut pads[..n]);
        for (chunk, pad) in buf.chunks_exact_mut(16).zip(&pads[..n]) {
            for (b, p) in chunk.iter_mut().zip(pad) {
                *b ^= p;
            }
        }
    }

    /// Look the stamp up through the table's port: when it is known.
    #[inline]
    fn lookup(&mut self, port: Port, t: Cycle) -> Cycle {
        let start = match port {
            Port::Cpu => t,
            Port::Dma => {
                let s = t.max(self.table_free);
                self.lock_wait += s - t;
                s
            }
        };
        let done = start + self.state_lookup;
        self.table_free = self.table_free.max(done);
        done
    }

    fn unpowered(&self, addr: u64, what: &str) -> IntegrityError {
        let why = if self.power_lost { "the power is out" } else { "the system is suspended and the key device removed" };
        IntegrityError::unavailable(addr, format!("mecu cannot {}: {}", what, why))
    }

    fn read_port(&mut self, m: &mut Machine, port: Port, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        let tr = m.port.read(addr, out, t);
        let Some(key) = self.key.as_ref().filter(|_| !self.power_lost) else {
            out.fill(0);
            return Err(self.unpowered(addr, "decrypt"));
        };
        let s_a = self.stamps.get(self.block_of(addr));
        if !is_initial(s_a as u64, out) {
            Self::apply_pad(key, addr, s_a, out);
        }
        let t_look = self.lookup(port, t);
        let t_pad = m.aes.run(t_look, out.len() as u64);
        let ready = tr.last.max(t_pad) + m.xor_latency;
        self.read_delay += ready - tr.last;
        Ok(ready)
    }

    fn write_port(&mut self, m: &mut Machine, port: Port, addr: u64, plain: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        if self.power_lost {
            // It was in the volatile cache: lost with the power.
            self.lost_writes += 1;
            return Ok(t);
        }
        if self.key.is_none() {
            return Err(self.unpowered(addr, "encrypt"));
        }
        let b = self.block_of(addr);
        if self.stamps.get(b) != self.s {
            return Ok(self.reencrypt(m, port, b, t, addr, plain));
        }
        let t_look = self.lookup(port, t);
        let t_pad = m.aes.run(t_look, plain.len() as u64);
        Ok(self.write_under(m, addr, plain, self.s, t_pad + m.xor_latency))
    }

    /// Encrypt `plain` under stamp `s` and write it, posted at `t`: when memory has it.
    fn write_under(&mut self, m: &mut Machine, addr: u64, plain: &[u8], s: u32, t: Cycle) -> Cycle {
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        Self::apply_pad(self.key.as_ref().expect("running"), addr, s, ct);
        m.port.write(addr, ct, t)
    }

    /// Lazy re-encryption of block `b` under s on its first write of this resume cycle, then
    /// the write of `plain` at `addr` that caused it. Every step may be the one the power fails
    /// at (`arm_power_cut`). Returns when the block and the line are written.
    fn reencrypt(&mut self, m: &mut Machine, port: Port, b: u64, t: Cycle, addr: u64, plain: &[u8]) -> Cycle {
        let old = self.stamps.get(b);
        let new = self.s;
        let span = self.line * self.lines_per_block;
        let base = b * span;
        let end = (base + span).min(self.covered.div_ceil(self.line) * self.line);
        let lines = (end - base) / self.line;
        let cut = self.cut_at.take();
        let mut step = 0u64;
        let mut failed = false;
        // Returns true if the MECU must stop here (power gone, no capacitor).
        let at_step = |step: u64, failed: &mut bool, this: &mut Mecu| -> bool {
            if cut == Some(step) {
                *failed = true;
                this.power_cuts += 1;
                if !this.capacitor {
                    this.power_lost = true;
                    this.key = None;
                    return true;
                }
            }
            false
        };
        let len = self.line as usize;
        let mut buf = [0u8; MAX_LINE];
        let t_look = self.lookup(port, t);
        let mut done = t;
        let mut others = 0u64;
        // The MECU streams the block through a double buffer: a line's read is issued so that
        // it arrives as the previous line is done, its pads when the previous pads entered the
        // engine. (All issued at `t`, each booking searched past every earlier one: quadratic
        // in N; N = 65536 took minutes per block.)
        let (mut t_rd, mut t_aes) = (t, t_look);
        for j in 0..lines {
            let a = base + j * self.line;
            // The line being written is replaced, not re-encrypted: only the others are
            // (002 §4.2: "all other cache lines within that block").
            let skip = a == addr;
            if at_step(step, &mut failed, self) {
                return done;
            }
            step += 1;
            let mut t_x = t;
            if !skip {
                // Read and decipher under the old stamp into the MECU's buffer.
                let line = &mut buf[..len];
                let tr = m.port.read(a, line, t_rd);
                let key = self.key.as_ref().expect("running");
                if !is_initial(old as u64, line) {
                    Self::apply_pad(key, a, old, line);
                }
                let t_pads = m.aes.run(t_aes, 2 * self.line);
                t_aes = t_pads.saturating_sub(m.aes.latency()).max(t_look);
                t_x = tr.last.max(t_pads) + m.xor_latency;
                // Double-buffered: the next line arrives as this one is done, so reads never
                // run ahead of the pads (nor of the writes that follow them).
                t_rd = tr.first.max(t_x).saturating_sub(m.port.latency()).max(t);
            }
            if at_step(step, &mut failed, self) {
                return done;
            }
            step += 1;
            if !skip {
                // Encipher under the new stamp and write back.
                Self::apply_pad(self.key.as_ref().expect("running"), a, new, &mut buf[..len]);
                done = done.max(m.port.write(a, &buf[..len], t_x));
                others += 1;
            }
        }
        let reenc_done = done;
        // Steps 2N and 2N+1 even for a block cut short by the end of memory.
        step = 2 * self.lines_per_block;
        if at_step(step, &mut failed, self) {
            return done;
        }
        self.stamps.set(b, new);
        step += 1;
        if at_step(step, &mut failed, self) {
            return done;
        }
        let t_pad = m.aes.run(t_look.max(reenc_done), plain.len() as u64);
        done = done.max(self.write_under(m, addr, plain, new, t_pad + m.xor_latency));
        self.reencryptions += 1;
        self.reencrypted_lines += others;
        if port == Port::Cpu {
            // The processor stalls while the other lines are read, re-encrypted and written
            // (counted once where re-encryptions overlap).
            let stall = reenc_done.saturating_sub(t.max(self.stall_until));
            self.stall_cycles += stall;
            self.win_stall += stall;
            self.stall_until = self.stall_until.max(reenc_done);
            // Quiescence: the last block brought to the new stamp in this resume cycle.
            self.win_last_reenc = Some(self.win_last_reenc.unwrap_or(0).max(reenc_done));
        }
        if failed {
            // The capacitors carried the block to its end; now the MECU goes dark.
            self.power_lost = true;
            self.key = None;
        }
        done
    }

    /// A DMA device reads memory through the second MECU (002 §6.3).
    pub fn dma_read(&mut self, m: &mut Machine, addr: u64, out: &mut [u8], t: Cycle) -> Result<Cycle, String> {
        if !self.is_running() {
            return Err("DMA while the system is not running".into());
        }
        let mut done = t;
        let mut buf = [0u8; MAX_LINE];
        let mut pos = 0usize;
        while pos < out.len() {
            let a = addr + pos as u64;
            let la = a & !(self.line - 1);
            let off = (a - la) as usize;
            let n = (self.line as usize - off).min(out.len() - pos);
            done = done.max(self.read_port(m, Port::Dma, la, t, &mut buf[..self.line as usize]).map_err(|e| e.what)?);
            out[pos..pos + n].copy_from_slice(&buf[off..off + n]);
            self.dma_reads += 1;
            pos += n;
        }
        Ok(done)
    }

    /// A DMA device writes memory through the second MECU: partial lines are read, merged and
    /// written; a first write to a block in this resume cycle re-encrypts it, for both MECUs.
    pub fn dma_write(&mut self, m: &mut Machine, addr: u64, data: &[u8], t: Cycle) -> Result<Cycle, String> {
        if !self.is_running() {
            return Err("DMA while the system is not running".into());
        }
        let mut done = t;
        let mut buf = [0u8; MAX_LINE];
        let len = self.line as usize;
        let mut pos = 0usize;
        while pos < data.len() {
            let a = addr + pos as u64;
            let la = a & !(self.line - 1);
            let off = (a - la) as usize;
            let n = (len - off).min(data.len() - pos);
            let mut tw = t;
            if n < len {
                tw = self.read_port(m, Port::Dma, la, t, &mut buf[..len]).map_err(|e| e.what)?;
            }
            buf[off..off + n].copy_from_slice(&data[pos..pos + n]);
            let line = buf;
            done = done.max(self.write_port(m, Port::Dma, la, &line[..len], tw).map_err(|e| e.what)?);
            self.dma_writes += 1;
            pos += n;
        }
        Ok(done)
    }

    /// Close the resume cycle that ends at `now`.
    fn close_window(&mut self, now: Cycle, instructions: u64) {
        let cycles = now.saturating_sub(self.win_cycle).max(1);
        self.ipc_series.push(instructions.saturating_sub(self.win_instr) as f64 / cycles as f64);
        self.stall_series.push(self.win_stall as f64);
        if self.win_stall as f64 >= SATURATED * cycles as f64 {
            self.saturated += 1;
        }
        self.quiesce_series.push(self.win_last_reenc.map_or(0, |e| e.saturating_sub(self.win_cycle)) as f64);
        (self.win_cycle, self.win_instr, self.win_stall, self.win_last_reenc) = (now, instructions, 0, None);
    }

    /// Mean time to quiescence over the resume cycles that began with a resume (002 §5.2.2
    /// discounts the first cycle, where memory is seeded and nothing is re-encrypted).
    fn time_to_quiescence(&self) -> f64 {
        let v = if self.quiesce_series.len() > 1 { &self.quiesce_series[1..] } else { &[][..] };
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    }
}

impl Encryption for Mecu {
    /// A write to a block under an older stamp re-enciphers its other lines (002 §4.2).
    fn reenciphers_in_place(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "mecu"
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        self.reads += 1;
        self.read_port(m, Port::Cpu, addr, t, out)
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        self.writes += 1;
        self.write_port(m, Port::Cpu, addr, plain, t)
    }

    fn poll(&mut self, _m: &mut Machine, now: Cycle, instructions: u64) -> Cycle {
        if self.resume_period > 0 && now >= self.next_resume && self.is_running() {
            // Suspend (the card is out, the MECU idle) and resume: a new resume cycle.
            self.close_window(now, instructions);
            if self.s < self.s_max {
                self.s += 1;
                self.resumes += 1;
                self.suspends += 1;
            } else {
                self.resumes_refused += 1;
            }
            self.next_resume = (now / self.resume_period + 1) * self.resume_period;
        }
        now.max(self.stall_until)
    }

    fn power_managed(&mut self) -> Option<&mut dyn PowerManaged> {
        Some(self)
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.read_delay) = (0, 0, 0);
        (self.resumes, self.suspends, self.reboots, self.resumes_refused) = (0, 0, 0, 0);
        (self.reencryptions, self.reencrypted_lines, self.stall_cycles) = (0, 0, 0);
        (self.power_cuts, self.lost_writes, self.dma_reads, self.dma_writes, self.lock_wait) = (0, 0, 0, 0, 0);
        self.ipc_series.clear();
        self.saturated = 0;
        self.stall_series.clear();
        self.quiesce_series.clear();
    }

    fn space_overhead(&self) -> f64 {
        0.0
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("mecu.reads", self.reads);
        out.int("mecu.writes", self.writes);
        out.rate("mecu.read_delay_per_read", self.read_delay, self.reads);
        out.int("mecu.state", self.s as u64);
        out.int("mecu.state_bits", self.state_bits as u64);
        out.int("mecu.lines_per_block", self.lines_per_block);
        out.int("mecu.state_storage_bytes", self.storage_bytes);
        out.int("mecu.resumes", self.resumes);
        out.int("mecu.suspends", self.suspends);
        out.int("mecu.reboots", self.reboots);
        out.int("mecu.resumes_refused", self.resumes_refused);
        out.int("mecu.reencryptions", self.reencryptions);
        out.int("mecu.reencrypted_lines", self.reencrypted_lines);
        out.int("mecu.stall_cycles", self.stall_cycles);
        out.rate("mecu.stall_cycles_per_resume", self.stall_cycles, self.resumes);
        out.int("mecu.saturated_resume_cycles", self.saturated);
        out.series("mecu.ipc_per_resume_cycle", self.ipc_series.clone());
        out.series("mecu.stall_cycles_per_resume_cycle", self.stall_series.clone());
        out.series("mecu.quiescence_cycles_per_resume_cycle", self.quiesce_series.clone());
        let q = self.time_to_quiescence();
        out.float("mecu.time_to_quiescence_cycles", q);
        out.float("mecu.time_to_quiescence_seconds", q / self.hz);
        out.int("mecu.power_cuts", self.power_cuts);
        out.int("mecu.lost_writes", self.lost_writes);
        out.int("mecu.dma_reads", self.dma_reads);
        out.int("mecu.dma_writes", self.dma_writes);
        out.int("mecu.table_lock_wait_cycles", self.lock_wait);
    }
}

impl PowerManaged for Mecu {
    fn event(&mut self, ev: PowerEvent) -> Result<(), String> {
        self.power_event(ev)
    }
    fn is_running(&self) -> bool {
        Mecu::is_running(self)
    }
    fn power_lost(&self) -> bool {
        Mecu::power_lost(self)
    }
    fn arm_power_cut(&mut self, step: u64) -> u64 {
        Mecu::arm_power_cut(self, step);
        self.reencryption_steps()
    }
    fn restore_power(&mut self) -> Result<(), String> {
        Mecu::restore_power(self)
    }
    fn offline_view(&self) -> Result<OfflineView, String> {
        Mecu::offline_view(self)
    }
    fn set_state_counter(&mut self, v: u32) -> Result<(), String> {
        Mecu::set_state_counter(self, v)
    }
    fn dma_read(&mut self, m: &mut Machine, addr: u64, out: &mut [u8], t: Cycle) -> Result<Cycle, String> {
        Mecu::dma_read(self, m, addr, out, t)
    }
    fn dma_write(&mut self, m: &mut Machine, addr: u64, data: &[u8], t: Cycle) -> Result<Cycle, String> {
        Mecu::dma_write(self, m, addr, data, t)
    }
}
