//! Memory encryption: one trait, one module per scheme. Encryption sits between the trusted
//! L2 and the bus (seed 000 §2): it moves every line, data or metadata, in and out of
//! untrusted memory.

use crate::integrity::{chash::MAX_LINE, IntegrityError};
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_timing::{Cycle, Transfer};

pub mod direct;
pub mod mecu;
pub mod none;
pub mod ocb;
pub mod otp;
pub mod tdes;

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

/// `Send`: an engine may be used from any one thread at a time (Python threads).
pub trait Encryption: Send {
    fn name(&self) -> &'static str;

    /// Fetch the line at `addr` (requested at `t`) and its encryption metadata from untrusted
    /// memory and decrypt it into `out`. Returns when the plaintext is available.
    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Cycle;

    /// Fetch the lines at `addrs`, all requested at `t` (naive's path to the root), into
    /// `out[i][..n]`, pushing when each is available to `arrive`: the same as one
    /// `read_line` each, in order. A scheme may book the bus for them in one search.
    fn read_lines(&mut self, m: &mut Machine, addrs: &[u64], t: Cycle, out: &mut [[u8; MAX_LINE]], n: usize, arrive: &mut Vec<Cycle>) {
        for (&a, buf) in addrs.iter().zip(out) {
            arrive.push(self.read_line(m, a, t, &mut buf[..n]));
        }
    }

    /// A host-side hint, no simulated effect: the line at `addr` will soon be read, so the
    /// host may start loading it and its metadata (a check climbing a tree reads its chunks
    /// one after another; loading them together overlaps the host's cache misses).
    fn prefetch(&self, m: &Machine, addr: u64) {
        m.mem.prefetch(addr);
    }

    /// Encrypt `plain` and write it, with its metadata, to `addr` starting at `t`.
    /// Returns when the bus is done with it.
    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Cycle;

    /// Encrypt and write `lines[i][..n]` to `addrs[i]`, all issued at `t` (naive's updated
    /// path): the same as one `write_line` each, in order. Returns when the last is done.
    fn write_lines(&mut self, m: &mut Machine, addrs: &[u64], lines: &[[u8; MAX_LINE]], n: usize, t: Cycle) -> Cycle {
        addrs.iter().zip(lines).fold(t, |done, (&a, l)| done.max(self.write_line(m, a, &l[..n], t)))
    }

    /// Forget on-chip copies of untrusted metadata (flush).
    fn drop_cached(&mut self) {}

    /// Timed events of the scheme's own (see `Engine::poll`); returns when the core may go on.
    fn poll(&mut self, _m: &mut Machine, now: Cycle, _instructions: u64) -> Cycle {
        now
    }

    fn space_overhead(&self) -> f64;

    /// Where the metadata of `addr`'s line lives, as (description, address) pairs.
    fn metadata_of(&self, _addr: u64) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// Zero the statistics counters (end of warm-up); state is kept.
    fn reset_stats(&mut self) {}

    fn stats(&self, m: &Machine, out: &mut Stats);

    /// A failure found by the last `read_line` of a scheme that authenticates what it
    /// decrypts (ocb's tag), or an access the scheme could not serve (mecu without its key).
    /// `read_line` can only return a cycle, so the failure waits here until taken: the caller
    /// of `read_line` must take it before using the bytes.
    fn take_error(&mut self) -> Option<IntegrityError> {
        None
    }

    /// Suspend, resume or reboot (seed 002). Schemes without a notion of it refuse.
    fn power(&mut self, _m: &mut Machine, ev: PowerEvent, _t: Cycle) -> Result<Cycle, String> {
        Err(format!(
            "encryption scheme '{}' does not model {:?} (only mecu protects non-volatile memory across power cycles)",
            self.name(),
            ev
        ))
    }

    /// The memory encryption control unit, if this scheme is one (DMA, adversary's offline view).
    fn mecu(&mut self) -> Option<&mut mecu::Mecu> {
        None
    }

    fn mecu_ref(&self) -> Option<&mecu::Mecu> {
        None
    }
}

pub const ENCRYPTION_SCHEMES: &[&str] = &["none", "direct", "otp", "ocb", "tdes", "mecu"];

/// Build the scheme named by `encryption`. `covered` is the end of the address range whose
/// lines it must carry (data and integrity metadata).
pub fn build(name: &str, p: &Params, m: &mut Machine, covered: u64, seed: u64) -> Result<Box<dyn Encryption>, ConfigError> {
    let period = p.u64_min("sample.ipc_period", 0)?;
    let scheme: Box<dyn Encryption> = match name {
        "none" => Box::new(none::NoEncryption),
        "direct" => Box::new(direct::Direct::new(p, m, covered, seed)?),
        "otp" => Box::new(otp::Otp::new(p, m, covered, seed)?),
        "ocb" => Box::new(ocb::Ocb::new(p, m, covered, seed)?),
        "tdes" => Box::new(tdes::Tdes::new(p, m, covered, seed)?),
        "mecu" => Box::new(mecu::Mecu::new(p, m, covered, seed)?),
        other => {
            return Err(ConfigError(format!(
                "unknown encryption scheme '{}' (choose from {})",
                other,
                ENCRYPTION_SCHEMES.join(", ")
            )))
        }
    };
    Ok(if period > 0 { Box::new(Sampled::new(scheme, period)) } else { scheme })
}

/// Deterministic key material from a seed (splitmix64), so runs are reproducible.
pub fn derive_key(seed: u64, purpose: u64) -> [u8; 16] {
    let mut x = seed ^ purpose.wrapping_mul(0x9E37_79B9_7F4A_7C15);
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

/// When each `chunk`-byte piece of transfer `tr` has fully arrived: beat k of the transfer
/// arrives at `first + k·beat` and a piece is usable once its last beat is in (seed 000 Fig. 7a:
/// "decryption is performed immediately after each 128-bit chunk is read").
#[inline]
pub fn chunk_arrivals(m: &Machine, tr: Transfer, chunk: u64, out: &mut [Cycle]) {
    let bp = m.bus.params();
    for (i, a) in out.iter_mut().enumerate() {
        let beat = ((i as u64 + 1) * chunk).div_ceil(bp.width) - 1;
        *a = (tr.first + beat * bp.beat_cycles).min(tr.last);
    }
}

/// Any scheme, with the IPC of every `sample.ipc_period` cycles recorded as the series
/// `sample.ipc` (the baseline curve of 002 Fig. 4, for any scheme). Windows are closed at the
/// run loop's polls (every 256 instructions).
struct Sampled {
    inner: Box<dyn Encryption>,
    period: Cycle,
    next: Cycle,
    start_cycle: Cycle,
    start_instr: u64,
    series: Vec<f64>,
}

impl Sampled {
    fn new(inner: Box<dyn Encryption>, period: Cycle) -> Sampled {
        Sampled { inner, period, next: period, start_cycle: 0, start_instr: 0, series: Vec::new() }
    }
}

impl Encryption for Sampled {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Cycle {
        self.inner.read_line(m, addr, t, out)
    }
    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Cycle {
        self.inner.write_line(m, addr, plain, t)
    }
    fn drop_cached(&mut self) {
        self.inner.drop_cached()
    }
    fn poll(&mut self, m: &mut Machine, now: Cycle, instructions: u64) -> Cycle {
        if now >= self.next {
            let cycles = now - self.start_cycle;
            self.series.push((instructions - self.start_instr) as f64 / cycles.max(1) as f64);
            (self.start_cycle, self.start_instr) = (now, instructions);
            self.next = (now / self.period + 1) * self.period;
        }
        self.inner.poll(m, now, instructions)
    }
    fn space_overhead(&self) -> f64 {
        self.inner.space_overhead()
    }
    fn metadata_of(&self, addr: u64) -> Vec<(String, u64)> {
        self.inner.metadata_of(addr)
    }
    fn reset_stats(&mut self) {
        self.series.clear();
        self.inner.reset_stats()
    }
    fn stats(&self, m: &Machine, out: &mut Stats) {
        self.inner.stats(m, out);
        out.int("sample.ipc_period", self.period);
        out.series("sample.ipc", self.series.clone());
    }
    fn take_error(&mut self) -> Option<IntegrityError> {
        self.inner.take_error()
    }
    fn power(&mut self, m: &mut Machine, ev: PowerEvent, t: Cycle) -> Result<Cycle, String> {
        self.inner.power(m, ev, t)
    }
    fn mecu(&mut self) -> Option<&mut mecu::Mecu> {
        self.inner.mecu()
    }
    fn mecu_ref(&self) -> Option<&mecu::Mecu> {
        self.inner.mecu_ref()
    }
}
