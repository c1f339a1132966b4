//! Memory encryption: one trait, one module per scheme. Encryption sits between the trusted
//! L2 and the bus (seed 000 §2): it moves every line, data or metadata, in and out of
//! untrusted memory.

use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_timing::Cycle;

pub mod none;
pub mod otp;

pub trait Encryption {
    fn name(&self) -> &'static str;

    /// Fetch the line at `addr` (requested at `t`) and its encryption metadata from untrusted
    /// memory and decrypt it into `out`. Returns when the plaintext is available.
    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Cycle;

    /// Encrypt `plain` and write it, with its metadata, to `addr` starting at `t`.
    /// Returns when the bus is done with it.
    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Cycle;

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
}

pub const ENCRYPTION_SCHEMES: &[&str] = &["none", "otp"];

/// Build the scheme named by `encryption`. `covered` is the end of the address range whose
/// lines it must carry (data and integrity metadata).
pub fn build(name: &str, p: &Params, m: &mut Machine, covered: u64, seed: u64) -> Result<Box<dyn Encryption>, ConfigError> {
    match name {
        "none" => Ok(Box::new(none::NoEncryption)),
        "otp" => Ok(Box::new(otp::Otp::new(p, m, covered, seed)?)),
        other => Err(ConfigError(format!(
            "unknown encryption scheme '{}' (choose from {})",
            other,
            ENCRYPTION_SCHEMES.join(", ")
        ))),
    }
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
