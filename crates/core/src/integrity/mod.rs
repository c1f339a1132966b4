//! Integrity verification: one trait, one module per scheme of seeds 000/003.

use crate::decl::{Component, Coverage, Guarantees};
use crate::encryption::Encryption;
use crate::error::IntegrityError;
use crate::layout::{Meta, MetaKind};
use crate::machine::{Machine, Victim};
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_timing::Cycle;

pub mod bonsai;
pub mod chash;
pub mod lhash;
pub mod mac;
pub mod mhash;
pub mod naive;
pub mod none;
pub mod tdx;
pub mod tree;

/// When a fetched line may be used and when its check is complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The core may use the data from here on (speculatively, 003 §4.3 step 2).
    pub ready: Cycle,
    pub checked: Cycle,
}

/// `Send`: an engine may be used from any one thread at a time (Python threads).
pub trait Integrity: Send {
    fn name(&self) -> &'static str;

    /// Called on an L2 miss, after `enc` fetched and decrypted the line into `plain` (data
    /// usable from `t_data`, request issued at `t_req`). Fetches and checks whatever metadata
    /// the scheme needs; may rewrite `plain` (decoding of never-written metadata).
    fn verify(
        &mut self,
        m: &mut Machine,
        enc: &mut dyn Encryption,
        addr: u64,
        plain: &mut [u8],
        t_req: Cycle,
        t_data: Cycle,
    ) -> Result<Verified, IntegrityError>;

    /// A host-side hint with no simulated effect: `addr`'s line missed the L2 and is about
    /// to be read and checked, so the scheme may let the host start loading the metadata the
    /// check will read (one host cache miss after another otherwise).
    fn prefetch(&self, _m: &Machine, _enc: &dyn Encryption, _addr: u64) {}

    /// A line left the L2: write it back (dirty) with whatever the scheme must update.
    /// Returns when the write buffer accepted it (later if the buffer was full).
    fn evict(&mut self, m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
        write_back_plain(m, enc, v)
    }

    /// Whether the scheme takes a checkpoint's prewarm as state (`install`, `install_evict`;
    /// `Engine::set_installing`). A scheme that does not is prewarmed by checked reads, as any
    /// run reads (the defaults below are those).
    fn installs(&self) -> bool {
        false
    }

    /// A checkpoint's prewarm installs `addr`'s line (its bytes `plain`, deciphered from
    /// memory as set up before the window, which is consistent with the scheme's metadata
    /// there): bring in, by address and without checking, the metadata a check of that line
    /// would leave cached, in the order the check would. Only called when `installs`; the
    /// default is the check itself.
    fn install(&mut self, m: &mut Machine, enc: &mut dyn Encryption, addr: u64, plain: &mut [u8], t: Cycle) -> Result<(), IntegrityError> {
        self.verify(m, enc, addr, plain, t, t).map(|_| ())
    }

    /// A line left the L2 during a prewarm that installs (`install`): leave cached what its
    /// write-back would (a tree's parent, dirty), but write nothing — the line's bytes are
    /// memory's already, so memory and metadata stay as set up. Only called when `installs`;
    /// the default is the write-back itself.
    fn install_evict(&mut self, m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
        self.evict(m, enc, v)
    }

    /// A crypto/sign instruction is about to commit: every read so far must be verified
    /// (003 §4.7). Returns when that is so.
    fn barrier(&mut self, m: &mut Machine, _enc: &mut dyn Encryption, now: Cycle) -> Result<Cycle, IntegrityError> {
        Ok(now.max(m.checks_done))
    }

    /// Verify all of memory now, if the scheme has its own way (lhash's integrity-check);
    /// `None` lets the engine audit every touched chunk through the normal read path.
    fn check(&mut self, _m: &mut Machine, _enc: &mut dyn Encryption, _now: Cycle) -> Result<Option<Cycle>, IntegrityError> {
        Ok(None)
    }

    /// The run is over (certified execution checks here). Returns when that is done.
    fn finish(&mut self, _m: &mut Machine, _enc: &mut dyn Encryption, now: Cycle) -> Result<Cycle, IntegrityError> {
        Ok(now)
    }

    /// Timed events of the scheme's own (see `Engine::poll`); returns when the core may go on.
    fn poll(&mut self, _m: &mut Machine, _enc: &mut dyn Encryption, now: Cycle, _instructions: u64) -> Result<Cycle, IntegrityError> {
        Ok(now)
    }

    /// Forget on-chip copies of untrusted metadata (flush): the next use reads memory.
    fn drop_cached(&mut self) {}

    /// Fraction of the data size used by this scheme's metadata.
    fn space_overhead(&self) -> f64;

    /// Where the metadata protecting `addr` lives, as (description, address) pairs: what an
    /// adversary would tamper with.
    fn metadata_of(&self, _addr: u64) -> Vec<Meta> {
        Vec::new()
    }

    /// Zero the statistics counters (end of warm-up); state is kept.
    fn reset_stats(&mut self) {}

    fn stats(&self, m: &Machine, out: &mut Stats);
}

/// A registered integrity scheme: its declaration, what it guarantees and covers, and how to
/// build it. Each scheme's file defines one (`SCHEME`); `registry` lists them.
pub struct IntegrityScheme {
    pub decl: &'static Component,
    /// What it promises under the given parameters.
    pub guarantees: fn(&Params) -> Result<Guarantees, ConfigError>,
    pub coverage: Coverage,
    /// Build it from its parameters, placing its metadata in `m`'s layout; `seed` fixes keys.
    pub build: fn(&Params, &mut Machine, crate::encryption::Seed) -> Result<Box<dyn Integrity>, ConfigError>,
}

/// Conclude a check that took read-buffer entry `slot` at `t_start`: on a match the entry is
/// held until `done` and the check recorded for barriers; on a mismatch it is released and
/// the failure returned. The data was usable from `t_start` either way (speculation).
pub fn conclude(
    m: &mut Machine,
    slot: usize,
    t_start: Cycle,
    matched: bool,
    done: Cycle,
    failure: impl FnOnce() -> IntegrityError,
) -> Result<Verified, IntegrityError> {
    if !matched {
        m.read_buf.hold_until(slot, t_start);
        return Err(failure());
    }
    m.read_buf.hold_until(slot, done);
    m.note_check(done);
    Ok(Verified { ready: t_start, checked: done })
}

/// Write a dirty victim back with no integrity work (clean victims need nothing).
pub fn write_back_plain(m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
    if !v.dirty {
        return Ok(v.t);
    }
    let (slot, start) = m.write_buf.acquire(v.t);
    let done = enc.write_line(m, v.addr, &v.bytes, start)?;
    m.write_buf.hold_until(slot, done);
    Ok(start)
}

/// (tree level, address) for every ancestor of `addr`'s chunk.
pub fn tree_path(tree: &tree::Tree, addr: u64) -> Vec<Meta> {
    let Some(c) = tree.chunk_of(addr / tree.chunk * tree.chunk) else { return Vec::new() };
    tree.ancestors(c).into_iter().map(|a| Meta::new(MetaKind::TreeLevel(tree.level_of(a)), tree.addr_of(a), tree.chunk)).collect()
}

