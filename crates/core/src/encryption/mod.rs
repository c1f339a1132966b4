//! Memory encryption: one trait, one module per scheme. Encryption sits between the trusted
//! L2 and the bus (seed 000 §2): it moves every line, data or metadata, in and out of
//! untrusted memory.

use crate::decl::{Component, Coverage, Detection, Guarantees};
use crate::error::IntegrityError;
use crate::layout::{Meta, PerLine, MAX_LINE};
use crate::machine::{Machine, Victim};
use crate::mem::BootImage;
use std::sync::Arc;
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_crypto::Aes128;
use secmem_timing::Cycle;

pub mod counters;
pub mod direct;
pub mod mecu;
pub mod none;
pub mod ocb;
pub mod otp;
pub mod sgx;
pub mod split;
pub mod tdes;
pub mod xts;

#[cfg(test)]
mod tests;

/// Power-management events of a non-volatile memory system (seed 002 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerEvent {
    /// Caches are written back (by the engine); the removable key device is taken out.
    Suspend,
    /// The key device is back; a new resume cycle starts.
    Resume,
    /// A new OS instance: a new key, every stamp and counter reset.
    Reboot,
}

/// What an adversary holding the machine while it is suspended reads from the MECU (002 §4.1:
/// "the adversary can read the entire contents of main memory (and the memory on the MECU)").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfflineView {
    /// The master key, if it were anywhere the adversary can read.
    pub key: Option<[u8; 16]>,
    /// The global state counter, when it is kept on the MECU.
    pub state_counter: Option<u32>,
    /// Every non-zero block stamp s_a as (block, stamp).
    pub stamps: Vec<(u64, u32)>,
}

/// An encryption scheme that protects non-volatile memory across power cycles (seed 002's
/// MECU): what the engine's power management drives.
pub trait PowerManaged {
    /// Suspend (key device out), resume (s + 1) or reboot (new key, stamps reset).
    fn event(&mut self, ev: PowerEvent) -> Result<(), String>;
    fn is_running(&self) -> bool;
    fn power_lost(&self) -> bool;
    /// Cut the power at `step` of the next block re-encryption; the number of steps one has.
    fn arm_power_cut(&mut self, step: u64) -> u64;
    /// Power is back after a failure (the key device is still in): a resume.
    fn restore_power(&mut self) -> Result<(), String>;
    /// What an adversary reads from the unit while the system is suspended or off.
    fn offline_view(&self) -> Result<OfflineView, String>;
    /// The offline adversary overwrites the global state counter (002 §4.3).
    fn set_state_counter(&mut self, v: u32) -> Result<(), String>;
    /// A device reads memory through the second unit (002 §6.3).
    fn dma_read(&mut self, m: &mut Machine, addr: u64, out: &mut [u8], t: Cycle) -> Result<Cycle, String>;
    /// A device writes memory through the second unit.
    fn dma_write(&mut self, m: &mut Machine, addr: u64, data: &[u8], t: Cycle) -> Result<Cycle, String>;
}

/// `Send`: an engine may be used from any one thread at a time (Python threads).
pub trait Encryption: Send {
    fn name(&self) -> &'static str;

    /// Fetch the line at `addr` (requested at `t`) and its encryption metadata through the
    /// port and decrypt it into `out`. Returns when the plaintext is available, or the failure
    /// of a scheme that authenticates what it decrypts (ocb's tag) or cannot serve the access
    /// (mecu without its key): reported for this access alone.
    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError>;

    /// The line at `addr` deciphered from memory for a checkpoint's prewarm that installs it
    /// as state (`Engine::set_installing`): the plaintext `read_line` gives, but a scheme may
    /// leave its own small on-chip buffers out of it (otp's 32-word stamp buffer: the
    /// window's warming refills it long before it is measured) and count nothing. The
    /// default is `read_line`.
    fn read_installed(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        self.read_line(m, addr, t, out)
    }

    /// Fetch the lines at `addrs`, all requested at `t` (naive's path to the root), into
    /// `out[i][..n]`, pushing when each is available to `arrive`: the same as one
    /// `read_line` each, in order. A scheme may book them in one pass.
    fn read_lines(
        &mut self,
        m: &mut Machine,
        addrs: &[u64],
        t: Cycle,
        out: &mut [[u8; MAX_LINE]],
        n: usize,
        arrive: &mut Vec<Cycle>,
    ) -> Result<(), IntegrityError> {
        for (&a, buf) in addrs.iter().zip(out) {
            arrive.push(self.read_line(m, a, t, &mut buf[..n])?);
        }
        Ok(())
    }

    /// A host-side hint, no simulated effect: the line at `addr` will soon be read, so the
    /// host may start loading it and its metadata (a check climbing a tree reads its chunks
    /// one after another; loading them together overlaps the host's cache misses).
    fn prefetch(&self, m: &Machine, addr: u64) {
        m.port.prefetch(addr);
    }

    /// Encrypt `plain` and write it, with its metadata, to `addr` starting at `t`.
    /// Returns when the memory has it.
    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Result<Cycle, IntegrityError>;

    /// Encrypt and write `lines[i][..n]` to `addrs[i]`, all issued at `t` (naive's updated
    /// path): the same as one `write_line` each, in order. Returns when the last is done.
    fn write_lines(&mut self, m: &mut Machine, addrs: &[u64], lines: &[[u8; MAX_LINE]], n: usize, t: Cycle) -> Result<Cycle, IntegrityError> {
        let mut done = t;
        for (&a, l) in addrs.iter().zip(lines) {
            done = done.max(self.write_line(m, a, &l[..n], t)?);
        }
        Ok(done)
    }

    /// When the line of the last `read_line` is authenticated by the scheme itself, if that
    /// holds up the access's verification (tdes's per-chunk MACs); taken once.
    fn take_checked(&mut self) -> Option<Cycle> {
        None
    }

    /// The counter under which the last `read_line` deciphered, or `write_line` enciphered,
    /// its line: what a per-line MAC binds for freshness when a tree protects the counters
    /// instead of the data (Bonsai). `None` for a scheme without per-line counters.
    fn line_counter(&self) -> Option<u64> {
        None
    }

    /// Write on-chip metadata newer than memory's copy back to memory from `t` (flush, before
    /// `drop_cached`): when it is there.
    fn write_back_cached(&mut self, _m: &mut Machine, t: Cycle) -> Cycle {
        t
    }

    /// Forget on-chip copies of untrusted metadata (flush).
    fn drop_cached(&mut self) {}

    /// While `on`, the scheme's own engines book nothing and answer as if idle (memory set up
    /// before the timed run, `Engine::set_up`), as `Machine::untimed` does for the shared
    /// ones. Returns whether they were frozen already, to be put back.
    fn freeze(&mut self, _on: bool) -> bool {
        false
    }

    /// A line the scheme keeps in the L2 itself (`LineKind::Meta`: its own metadata, sharing
    /// the L2 with data as the seeds' trees do) left it: write it back as the scheme must.
    /// None when the line is not the scheme's (the integrity scheme's then).
    fn evict_meta(&mut self, _m: &mut Machine, _v: &Victim) -> Option<Result<Cycle, IntegrityError>> {
        None
    }

    /// Timed events of the scheme's own (see `Engine::poll`); returns when the core may go on.
    fn poll(&mut self, _m: &mut Machine, now: Cycle, _instructions: u64) -> Cycle {
        now
    }

    fn space_overhead(&self) -> f64;

    /// Where the metadata of `addr`'s line lives, as (what, address) pairs.
    fn metadata_of(&self, _addr: u64) -> Vec<Meta> {
        Vec::new()
    }

    /// Whether the scheme rewrites lines' ciphertext on its own, not only as their write-backs
    /// (the MECU's lazy re-encryption of a block after a resume): an integrity check over the
    /// ciphertext would then find lines it never saw written, so it must cover the plaintext.
    fn reenciphers_in_place(&self) -> bool {
        false
    }

    /// Zero the statistics counters (end of warm-up); state is kept.
    fn reset_stats(&mut self) {}

    fn stats(&self, m: &Machine, out: &mut Stats);

    /// Program memory [0, `end`) starts encrypted (`memory.boot_encrypted`): from now on
    /// the scheme takes never-written lines there as the ciphertext of zeros under metadata 0,
    /// no longer as raw zeros, and returns the image untrusted memory starts with (None: raw
    /// zeros are that image). An error names what the scheme cannot do.
    fn boot_encrypted(&mut self, _end: u64) -> Result<Option<Arc<dyn BootImage>>, String> {
        Err(format!("memory.boot_encrypted: {} has no boot image (supported: none, otp, ocb, tdes)", self.name()))
    }

    /// The scheme's power management, if it protects non-volatile memory across power
    /// cycles (seed 002's MECU).
    fn power_managed(&mut self) -> Option<&mut dyn PowerManaged> {
        None
    }
}

/// A registered encryption scheme: its declaration, what it guarantees and covers, and how to
/// build it. Each scheme's file defines one (`SCHEME`); `registry` lists them.
pub struct EncryptionScheme {
    pub decl: &'static Component,
    /// What it promises under the given parameters.
    pub guarantees: fn(&Params) -> Result<Guarantees, ConfigError>,
    pub coverage: Coverage,
    /// Build it over the lines of [0, `covered`) (data and whatever metadata it carries),
    /// placing its metadata in `m`'s layout; `seed` fixes keys and random vectors.
    pub build: fn(&Params, &mut Machine, u64, Seed) -> Result<Box<dyn Encryption>, ConfigError>,
}

/// What optional per-chunk MACs (004 §3.3; otp's and tdes's `chunk_mac_bytes`) add to an
/// encryption scheme: a change or a move of a line fails a MAC, so flipped bits no longer go
/// through; an old line with its old MACs still passes (they bind address and counter, not
/// freshness).
pub const fn chunk_macs(on: bool) -> Guarantees {
    if on {
        Guarantees::detecting(Detection::Access, Detection::Access, Detection::Never)
    } else {
        Guarantees::NONE
    }
}

/// The on-chip sequence the nonce counters of ocb and tdes are drawn from at each dirty
/// eviction. Taking the next value of one monotonic counter, instead of the stored counter
/// plus one, means no (key, nonce) pair can repeat whatever the adversary writes into the
/// counters in memory; each line's counter still grows at every eviction (004 §2.1).
pub struct NonceCounter {
    next: u64,
    max: u64,
}

impl NonceCounter {
    pub fn new(p: &Params, scheme: &str) -> Result<NonceCounter, ConfigError> {
        let key = format!("{}.counter_bits", scheme);
        let bits = p.u64_min(&key, 1)?;
        if bits > 32 {
            return Err(ConfigError(format!("{}: {} exceeds the 32-bit counter field", key, bits)));
        }
        // 0 is the never-written line's counter.
        Ok(NonceCounter { next: 1, max: (1u64 << bits) - 1 })
    }

    /// The counter for the next write-back (of the line at `addr`).
    pub fn next(&mut self, addr: u64, scheme: &str) -> Result<u32, IntegrityError> {
        if self.next > self.max {
            return Err(IntegrityError::exhausted(addr, format!(
                    "{}: the nonce counter is exhausted after {} write-backs (a new key would be needed; not modelled)",
                    scheme, self.max
                )));
        }
        self.next += 1;
        Ok((self.next - 1) as u32)
    }
}

/// XOR `buf` (line `addr`) with the counter-mode pads AES_K((addr | i) ‖ counter) of its 16-B
/// chunks i: the pad of the counter-tree family (split, sgx). Line addresses have their low
/// bits zero, so (addr | i, counter) names every pad.
pub fn xor_counter_pads(aes: &Aes128, addr: u64, counter: u64, buf: &mut [u8]) {
    let mut pads = [[0u8; 16]; MAX_LINE / 16];
    let n = buf.len() / 16;
    for (i, pad) in pads[..n].iter_mut().enumerate() {
        pad[..8].copy_from_slice(&(addr | i as u64).to_le_bytes());
        pad[8..].copy_from_slice(&counter.to_le_bytes());
    }
    aes.encrypt_many(&mut pads[..n]);
    for (chunk, pad) in buf.chunks_exact_mut(16).zip(&pads[..n]) {
        for (b, p) in chunk.iter_mut().zip(pad) {
            *b ^= p;
        }
    }
}

/// Where a scheme's keys come from. A simulation's seed (`Seed::fixed`) gives the same keys on
/// every run, for reproducible statistics: anyone who knows the seed knows the keys. Key
/// material from the OS (`Seed::secret`, the functional engine without a seed) is a 128-bit
/// AES key, and every scheme key is that key's encryption of its purpose: full 128-bit keys
/// that cannot be derived offline.
#[derive(Clone, Copy)]
pub struct Seed {
    value: u64,
    secret: Option<[u8; 16]>,
}

impl Seed {
    pub fn fixed(value: u64) -> Seed {
        Seed { value, secret: None }
    }

    /// Secret key material; `value` (for random vectors that are not keys, such as initial
    /// nonces) is its first 8 bytes' hash, so it reveals nothing of the key.
    pub fn secret(key: [u8; 16]) -> Seed {
        let mut b = [0xa5u8; 16];
        Aes128::new(&key).encrypt(&mut b);
        Seed { value: u64::from_le_bytes(b[..8].try_into().unwrap()), secret: Some(key) }
    }

    /// The 64-bit value for what is not a key (random vectors, a multiset hash's nonce).
    pub fn value(&self) -> u64 {
        self.value
    }

    /// Bytes that identify the key material, for a derivation with its own function
    /// (code authentication's keys).
    pub fn material(&self) -> Vec<u8> {
        match self.secret {
            Some(k) => k.to_vec(),
            None => self.value.to_le_bytes().to_vec(),
        }
    }
}

impl std::fmt::Debug for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.secret {
            Some(_) => f.write_str("Seed(secret)"),
            None => write!(f, "Seed({})", self.value),
        }
    }
}

/// A scheme's key for `purpose`: from a fixed seed, splitmix64 (reproducible); from secret
/// material, AES_K(purpose) (a PRF, so keys of different purposes are independent).
pub fn derive_key(seed: Seed, purpose: u64) -> [u8; 16] {
    if let Some(k) = seed.secret {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&purpose.to_le_bytes());
        Aes128::new(&k).encrypt(&mut b);
        return b;
    }
    let mut x = seed.value ^ purpose.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&next().to_le_bytes());
    k[8..].copy_from_slice(&next().to_le_bytes());
    k
}

/// A deterministic stream of random vectors (splitmix64), seeded per scheme.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, purpose: u64) -> Rng {
        Rng(seed ^ purpose.wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A scheme's boot image (`memory.boot_encrypted`): what a secure boot would leave in memory,
/// every line of program memory the encryption of zeros under metadata 0 with that line's
/// per-line metadata (MACs, tags) beside it; stamps and counters stay 0, everything else zero.
pub trait BootLines: Send + Sync + 'static {
    /// The ciphertext of the all-zero line at `addr` into `out` (one line).
    fn line(&self, addr: u64, out: &mut [u8]);
    /// The per-line stores of non-zero metadata.
    fn stores(&self) -> Vec<PerLine>;
    /// The entry of store `k` for the all-zero line at `addr` into `out` (`bytes` of it).
    fn entry(&self, k: usize, addr: u64, out: &mut [u8]);
}

/// [`BootLines`] over program memory [0, end) with lines of `line` bytes.
pub struct Boot<B> {
    lines: B,
    stores: Vec<PerLine>,
    end: u64,
    line: u64,
}

impl<B: BootLines> Boot<B> {
    pub fn image(lines: B, end: u64, line: u64) -> Arc<dyn BootImage> {
        Arc::new(Boot { stores: lines.stores(), lines, end, line })
    }
}

impl<B: BootLines> BootImage for Boot<B> {
    fn fill(&self, addr: u64, out: &mut [u8]) {
        let mut buf = [0u8; MAX_LINE];
        let mut pos = 0;
        while pos < out.len() {
            let a = addr + pos as u64;
            // The piece of one line or one store entry that `a` lies in: [lo, lo + n).
            let (lo, n) = if a < self.end {
                let lo = a & !(self.line - 1);
                self.lines.line(lo, &mut buf[..self.line as usize]);
                (lo, self.line)
            } else if let Some((k, s)) = self.stores.iter().enumerate().find(|(_, s)| {
                a >= s.base && (a - s.base) / s.bytes < self.end / self.line
            }) {
                let i = (a - s.base) / s.bytes;
                self.lines.entry(k, i * self.line, &mut buf[..s.bytes as usize]);
                (s.base + i * s.bytes, s.bytes)
            } else {
                buf[0] = 0;
                (a, 1)
            };
            let (from, to) = ((a - lo) as usize, ((lo + n - addr) as usize).min(out.len()));
            let k = to - pos;
            out[pos..to].copy_from_slice(&buf[from..from + k]);
            pos = to;
        }
    }
}

/// What per-chunk MACs (004 §3.3; tdes's and otp's `chunk_mac_bytes`) checked and saved.
#[derive(Clone, Copy, Default, Debug)]
pub struct ChunkMacCounts {
    /// Chunks checked.
    pub checks: u64,
    /// Reads whose MACs did not match.
    pub failures: u64,
    /// Chunks verified by MAC speculation (no MAC computation).
    pub speculated: u64,
    /// Cycles from data usable to verified, summed.
    pub check_exposed: u64,
}

impl ChunkMacCounts {
    /// The `SCHEME.mac_*` and `SCHEME.check_exposed_*` statistics over `reads` reads.
    pub fn stats(&self, scheme: &str, reads: u64, out: &mut Stats) {
        out.int(&format!("{}.mac_checks", scheme), self.checks);
        out.int(&format!("{}.mac_failures", scheme), self.failures);
        out.int(&format!("{}.mac_speculated", scheme), self.speculated);
        out.int(&format!("{}.check_exposed_cycles", scheme), self.check_exposed);
        out.rate(&format!("{}.check_exposed_per_read", scheme), self.check_exposed, reads);
    }
}
