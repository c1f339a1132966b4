//! No encryption: lines cross the bus as plaintext.

use super::{Encryption, EncryptionScheme};
use crate::error::IntegrityError;
use crate::layout::MAX_LINE;
use crate::machine::Machine;
use crate::stats::Stats;
use secmem_timing::Cycle;
use crate::decl::{Component, Coverage, Guarantees, Kind};

/// none's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "none",
    kind: Kind::Encryption,
    summary: "no encryption: lines cross the bus as plaintext",
    source: "—",
    params: &[
    ],
    stats: &[],
};

/// none's registration. No encryption: memory holds the plaintext.
pub const SCHEME: EncryptionScheme = EncryptionScheme {
    decl: &DECL,
    guarantees: |_| Ok(Guarantees::NONE),
    coverage: Coverage::NOTHING,
    build: |_, _, _, _| Ok(Box::new(NoEncryption)),
};

pub struct NoEncryption;

impl Encryption for NoEncryption {
    fn name(&self) -> &'static str {
        "none"
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        Ok(m.port.read(addr, out, t).last)
    }

    fn read_lines(
        &mut self,
        m: &mut Machine,
        addrs: &[u64],
        t: Cycle,
        out: &mut [[u8; MAX_LINE]],
        n: usize,
        arrive: &mut Vec<Cycle>,
    ) -> Result<(), IntegrityError> {
        m.port.read_lines(addrs, out, n, t, &mut |tr| arrive.push(tr.last));
        Ok(())
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        Ok(m.port.write(addr, plain, t))
    }

    fn write_lines(&mut self, m: &mut Machine, addrs: &[u64], lines: &[[u8; MAX_LINE]], n: usize, t: Cycle) -> Result<Cycle, IntegrityError> {
        Ok(m.port.write_lines(addrs, lines, n, t))
    }

    fn space_overhead(&self) -> f64 {
        0.0
    }

    /// Plaintext memory: zeros are what boot leaves.
    fn boot_encrypted(&mut self, _end: u64) -> Result<Option<std::sync::Arc<dyn crate::mem::BootImage>>, String> {
        Ok(None)
    }

    fn stats(&self, _m: &Machine, _out: &mut Stats) {}
}
