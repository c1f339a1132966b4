//! mac: a MAC of each block's data and address, XOM style (seed 003 §3.3, 000 §3). It
//! detects tampering and splicing but not replay: an old block with its old MAC is still a
//! block the processor wrote. It is the baseline that shows why trees are needed.
//!
//! MAC(addr, data) = H(K ‖ addr ‖ data) truncated, stored at MAC_base + addr/B·B_MAC. A line
//! whose MAC slot and data are all zero is the initial all-zero memory.

use super::chash::hasher_from;
use super::{Integrity, IntegrityScheme, Verified};
use crate::error::IntegrityError;
use crate::encryption::{derive_key, Encryption, Seed};
use crate::layout::{all_zero, Meta, MetaKind, PerLine, MAX_LINE};
use crate::mem::same_bytes;
use crate::machine::{Machine, Victim};
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_crypto::{Hasher, MAX_HASH_BYTES};
use secmem_timing::Cycle;
use crate::decl::{Component, Coverage, Def, Detection, Guarantees, Kind, Role, param, stat};

/// mac's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "mac",
    kind: Kind::Integrity,
    summary: "a MAC of each block and its address, XOM style: detects tampering and splicing, not replay",
    source: "003 §3.3, 000 §3",
    params: &[
        param("mac.hash", Def::Str("md5"), "md5|md5-rfc1321|sha1|sha256", "the keyed hash of (key ‖ address ‖ block)"),
        param("mac.hash_bytes", Def::Int(16), "B", "bytes of each MAC kept (truncated hash)"),
    ],
    stats: &[
        stat("mac.checks", "lines", "lines checked against their MAC"),
        stat("mac.mac_loads", "MACs", "MACs read from memory"),
        stat("mac.mac_stores", "MACs", "MACs written to memory"),
        stat("mac.space_overhead", "fraction", "memory the MACs take, per byte of data"),
    ],
};

/// mac's registration. A MAC binds data to its address, not to a time: an old block with its old MAC passes.
pub const SCHEME: IntegrityScheme = IntegrityScheme {
    decl: &DECL,
    guarantees: |_| Ok(Guarantees::detecting(Detection::Access, Detection::Access, Detection::Never)),
    coverage: Coverage { lays_out: &[Role::Macs], protects: &[Role::Data], guarded: &[] },
    build: |p, m, seed| Ok(Box::new(Mac::new(p, m, seed)?)),
};

pub struct Mac {
    hasher: Hasher,
    key: [u8; 16],
    macs: PerLine,
    checks: u64,
    mac_loads: u64,
    mac_stores: u64,
}

impl Mac {
    pub fn new(p: &Params, m: &mut Machine, seed: Seed) -> Result<Mac, ConfigError> {
        let hasher = hasher_from(p, "mac")?;
        let data = m.layout.data_size;
        let macs = m.layout.per_line(Role::Macs, "mac", data, hasher.len() as u64);
        Ok(Mac { hasher, key: derive_key(seed, 0x3ac), macs, checks: 0, mac_loads: 0, mac_stores: 0 })
    }

    fn mac_addr(&self, addr: u64) -> u64 {
        self.macs.addr(addr)
    }

    /// The MAC of `data` at `addr`, and the bytes hashed for it (what the engine is booked for).
    fn mac(&self, addr: u64, data: &[u8]) -> ([u8; MAX_HASH_BYTES], u64) {
        let mut h = [0u8; MAX_HASH_BYTES];
        let parts: [&[u8]; 3] = [&self.key, &addr.to_le_bytes(), data];
        self.hasher.hash_parts(&parts, &mut h);
        (h, parts.iter().map(|p| p.len() as u64).sum())
    }

    fn covers(&self, m: &Machine, addr: u64) -> bool {
        addr < m.layout.data_size
    }
}

impl Integrity for Mac {
    fn name(&self) -> &'static str {
        "mac"
    }

    fn prefetch(&self, m: &Machine, _enc: &dyn Encryption, addr: u64) {
        if self.covers(m, addr) {
            m.port.prefetch(self.mac_addr(addr));
        }
    }

    fn verify(
        &mut self,
        m: &mut Machine,
        _enc: &mut dyn Encryption,
        addr: u64,
        plain: &mut [u8],
        t_req: Cycle,
        t_data: Cycle,
    ) -> Result<Verified, IntegrityError> {
        if !self.covers(m, addr) {
            return Ok(Verified { ready: t_data, checked: t_data });
        }
        let hb = self.hasher.len();
        let ma = self.mac_addr(addr);
        let mut stored = [0u8; MAX_HASH_BYTES];
        let t_mac = m.port.read(ma, &mut stored[..hb], t_req).last;
        self.mac_loads += 1;
        let (mac, hashed) = self.mac(addr, plain);
        let (slot, t_start) = m.read_buf.acquire(t_data);
        let h_done = m.hash.run(t_start, hashed);
        self.checks += 1;
        let fresh = all_zero(&stored[..hb]) && all_zero(plain);
        let matched = fresh || same_bytes(&mac[..hb], &stored[..hb]);
        super::conclude(m, slot, t_start, matched, h_done.max(t_mac) + 1, || IntegrityError::tampered(addr, "data does not match its MAC"))
    }

    fn evict(&mut self, m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
        if !v.dirty || !self.covers(m, v.addr) {
            return super::write_back_plain(m, enc, v);
        }
        let hb = self.hasher.len();
        let (slot, start) = m.write_buf.acquire(v.t);
        let (mac, hashed) = self.mac(v.addr, &v.bytes);
        let h_done = m.hash.run(start, hashed);
        m.port.write(self.mac_addr(v.addr), &mac[..hb], h_done);
        self.mac_stores += 1;
        let done = enc.write_line(m, v.addr, &v.bytes, h_done)?;
        m.write_buf.hold_until(slot, done);
        Ok(start)
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        vec![Meta::new(MetaKind::Mac, self.mac_addr(addr), self.hasher.len() as u64)]
    }

    fn space_overhead(&self) -> f64 {
        self.macs.overhead()
    }

    fn reset_stats(&mut self) {
        (self.checks, self.mac_loads, self.mac_stores) = (0, 0, 0);
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("mac.checks", self.checks);
        out.int("mac.mac_loads", self.mac_loads);
        out.int("mac.mac_stores", self.mac_stores);
        out.float("mac.space_overhead", self.space_overhead());
    }
}

const _: () = assert!(MAX_LINE >= 64);
