//! mac: a MAC of each block's data and address, XOM style (seed 003 §3.3, 000 §3). It
//! detects tampering and splicing but not replay: an old block with its old MAC is still a
//! block the processor wrote. It is the baseline that shows why trees are needed.
//!
//! MAC(addr, data) = H(K ‖ addr ‖ data) truncated, stored at MAC_base + addr/B·B_MAC. A line
//! whose MAC slot and data are all zero is the initial all-zero memory.

use super::chash::{hasher_from, MAX_LINE};
use super::{Integrity, IntegrityError, Verified};
use crate::mem::same_bytes;
use crate::encryption::{derive_key, Encryption};
use crate::machine::{Machine, Victim};
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_crypto::{Hasher, MAX_HASH_BYTES};
use secmem_timing::Cycle;

pub struct Mac {
    hasher: Hasher,
    key: [u8; 16],
    base: u64,
    line: u64,
    checks: u64,
    mac_loads: u64,
    mac_stores: u64,
}

impl Mac {
    pub fn new(p: &Params, m: &mut Machine, seed: u64) -> Result<Mac, ConfigError> {
        let hasher = hasher_from(p, "mac")?;
        let line = m.line();
        let data = m.layout.data_size;
        let base = m.layout.alloc("mac", data / line * hasher.len() as u64);
        Ok(Mac { hasher, key: derive_key(seed, 0x3ac), base, line, checks: 0, mac_loads: 0, mac_stores: 0 })
    }

    fn mac_addr(&self, addr: u64) -> u64 {
        self.base + addr / self.line * self.hasher.len() as u64
    }

    fn mac(&self, addr: u64, data: &[u8]) -> [u8; MAX_HASH_BYTES] {
        let mut h = [0u8; MAX_HASH_BYTES];
        self.hasher.hash_parts(&[&self.key, &addr.to_le_bytes(), data], &mut h);
        h
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
            m.mem.prefetch(self.mac_addr(addr));
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
        let t_mac = m.bus.read(t_req, hb as u64).last;
        let mut stored = [0u8; MAX_HASH_BYTES];
        m.mem.read(ma, &mut stored[..hb]);
        self.mac_loads += 1;
        let (slot, t_start) = m.read_buf.acquire(t_data);
        let h_done = m.hash.run(t_start, (16 + 8 + plain.len()) as u64);
        self.checks += 1;
        let fresh = stored[..hb].iter().all(|&b| b == 0) && plain.iter().all(|&b| b == 0);
        let matched = fresh || same_bytes(&self.mac(addr, plain)[..hb], &stored[..hb]);
        super::conclude(m, slot, t_start, matched, h_done.max(t_mac) + 1, || IntegrityError {
            addr,
            what: "data does not match its MAC".into(),
        })
    }

    fn evict(&mut self, m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
        if !v.dirty || !self.covers(m, v.addr) {
            return super::write_back_plain(m, enc, v);
        }
        let hb = self.hasher.len();
        let (slot, start) = m.write_buf.acquire(v.t);
        let h_done = m.hash.run(start, (16 + 8 + v.bytes.len()) as u64);
        let mac = self.mac(v.addr, &v.bytes);
        m.mem.write(self.mac_addr(v.addr), &mac[..hb]);
        self.mac_stores += 1;
        m.bus.write(h_done, hb as u64);
        let done = enc.write_line(m, v.addr, &v.bytes, h_done);
        m.write_buf.hold_until(slot, done);
        Ok(start)
    }

    fn metadata_of(&self, addr: u64) -> Vec<(String, u64)> {
        vec![("mac".to_string(), self.mac_addr(addr))]
    }

    fn space_overhead(&self) -> f64 {
        self.hasher.len() as f64 / self.line as f64
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
