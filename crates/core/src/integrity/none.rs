//! No integrity verification: the unprotected baseline.

use super::{Integrity, IntegrityScheme, Verified};
use crate::error::IntegrityError;
use crate::encryption::Encryption;
use crate::machine::Machine;
use crate::stats::Stats;
use secmem_timing::Cycle;
use crate::decl::{Component, Coverage, Guarantees, Kind};

/// none's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "none",
    kind: Kind::Integrity,
    summary: "no integrity verification",
    source: "—",
    params: &[
    ],
    stats: &[],
};

/// none's registration. No integrity: nothing is noticed.
pub const SCHEME: IntegrityScheme = IntegrityScheme {
    decl: &DECL,
    guarantees: |_| Ok(Guarantees::NONE),
    coverage: Coverage::NOTHING,
    build: |_, _, _| Ok(Box::new(NoIntegrity)),
};

pub struct NoIntegrity;

impl Integrity for NoIntegrity {
    fn name(&self) -> &'static str {
        "none"
    }

    fn verify(
        &mut self,
        _m: &mut Machine,
        _enc: &mut dyn Encryption,
        _addr: u64,
        _plain: &mut [u8],
        _t_req: Cycle,
        t_data: Cycle,
    ) -> Result<Verified, IntegrityError> {
        Ok(Verified { ready: t_data, checked: t_data })
    }

    /// Nothing to install but the line; a write-back of a line whose bytes are memory's
    /// changes nothing there.
    fn installs(&self) -> bool {
        true
    }

    fn install(&mut self, _m: &mut Machine, _enc: &mut dyn Encryption, _addr: u64, _plain: &mut [u8], _t: Cycle) -> Result<(), IntegrityError> {
        Ok(())
    }

    fn install_evict(&mut self, _m: &mut Machine, _enc: &mut dyn Encryption, v: &crate::machine::Victim) -> Result<Cycle, IntegrityError> {
        Ok(v.t)
    }

    fn space_overhead(&self) -> f64 {
        0.0
    }

    fn stats(&self, _m: &Machine, _out: &mut Stats) {}
}
