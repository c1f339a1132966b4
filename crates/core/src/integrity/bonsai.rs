//! bonsai: a Bonsai Merkle tree (Rogers, Chhabra, Solihin, Prvulovic, MICRO 2007), the tree of
//! the counter-tree family that protects the counters, not the data.
//!
//! Counter-mode encryption already makes every line's pad depend on its counter, so a tree need
//! only keep the *counters* fresh: the hash tree's leaves are the encryption scheme's counter
//! blocks (`Role::Counters`, which the encryption lays out and reads itself), and each data line
//! carries a MAC over its address, its counter and its bytes. A replayed line then fails its
//! MAC under the current counter, and a replayed counter block fails the tree. The tree is over
//! 1/64 of what a tree over data covers (split SC-64), so it is shallower and its nodes stay in
//! the L2 (Rogers 2007 §4: the overhead of a tree over data, 12%, falls to about 2%).
//!
//! Tree nodes are cached in the L2 with the data, checked up to the first cached ancestor and
//! updated there on a write-back, as chash does with a tree over data (003 §4.3); they hold
//! hashes, not secrets, so they go to memory as they are. The encryption scheme asks this scheme
//! through the machine's guard hooks (`Machine::check_meta`, `update_meta`, `reenciphered`) to
//! check each counter block it reads from memory before a write-back uses it (a stale block
//! would pick a pad already used), to bind each counter block it writes, and to check and
//! re-bind the MAC of every line it re-enciphers on its own (a minor counter's overflow).
//!
//! The MAC binds the plaintext (the seeds' trees hash plaintext too) where Rogers 2007 MACs the
//! ciphertext: with counter-mode pads ready by the time the line arrives the check starts at the
//! same cycle, and the MAC still changes with every write-back because the counter does.

use super::chash::{hash, hasher_from};
use super::tree::{Tree, H};
use super::{Integrity, IntegrityScheme, Verified};
use crate::cache::LineKind;
use crate::decl::{param, Component, Coverage, Def, Detection, Guarantees, Kind, Role, stat};
use crate::encryption::{derive_key, Encryption, Seed};
use crate::error::IntegrityError;
use crate::layout::{all_zero, Meta, MetaKind, PerLine, MAX_LINE};
use crate::machine::{Guard, Machine, Victim};
use crate::mem::same_bytes;
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_crypto::{Hasher, MAX_HASH_BYTES};
use secmem_timing::Cycle;
use std::sync::{Arc, Mutex, MutexGuard};

/// bonsai's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "bonsai",
    kind: Kind::Integrity,
    summary: "a hash tree over the encryption scheme's counter blocks only, and a MAC per line binding address and counter (pairs with a counter scheme whose counters nothing else protects: split)",
    source: "Rogers, Chhabra, Solihin, Prvulovic, MICRO 2007 (Bonsai Merkle trees)",
    params: &[
        param("bonsai.hash", Def::Str("md5"), "md5|md5-rfc1321|sha1|sha256", "the tree hash, and the keyed hash of each line's MAC"),
        param("bonsai.hash_bytes", Def::Int(16), "B", "bytes of each hash kept in its parent tree node (128-bit hashes)"),
        param("bonsai.arity", Def::Int(0), "children", "hashes per tree node; 0: as many as fit a node (64 B / 16 B = 4)"),
        param("bonsai.mac_bytes", Def::Int(8), "B", "bytes of each line's MAC (64-bit, in its own region beside the data)"),
        param("bonsai.mac_place", Def::Str("memory"), "memory|ecc", "where each line's MAC is kept: memory (its own region, read and written as transfers of their own) or ecc (the line's ECC bits, at most 8 B: it travels with the line, as Synergy, HPCA 2018)"),
    ],
    stats: &[
        stat("bonsai.levels", "levels", "levels of the tree over the counter blocks"),
        stat("bonsai.counter_checks", "checks", "counter blocks read from memory by the encryption scheme and checked against the tree"),
        stat("bonsai.counter_updates", "updates", "counter blocks written by the encryption scheme whose hash was stored in the tree"),
        stat("bonsai.node_loads", "nodes", "tree nodes read from memory (and checked)"),
        stat("bonsai.node_loads_per_miss", "nodes", "bonsai.node_loads / l2.misses"),
        stat("bonsai.node_stores", "nodes", "dirty tree nodes written back to memory"),
        stat("bonsai.root_updates", "updates", "writes of the on-chip root registers"),
        stat("bonsai.mac_checks", "checks", "line MACs checked (reads, and lines re-enciphered after an overflow)"),
        stat("bonsai.mac_stores", "MACs", "line MACs written"),
        stat("bonsai.rebound_macs", "lines", "lines re-bound to a new counter after a counter overflow re-enciphered them"),
        stat("bonsai.space_overhead", "fraction", "memory the MACs and tree nodes take, per byte of data"),
    ],
};

/// bonsai's registration. The counters are checked up to a trusted node at every use and the
/// line's MAC binds its counter: a changed, moved or replayed line fails at the access.
pub const SCHEME: IntegrityScheme = IntegrityScheme {
    decl: &DECL,
    guarantees: |_| Ok(Guarantees::detecting(Detection::Access, Detection::Access, Detection::Access)),
    coverage: Coverage { lays_out: &[Role::Tree, Role::Macs], protects: &[Role::Data, Role::Counters], guarded: &[] },
    build: |p, m, seed| Ok(Box::new(Bonsai::new(p, m, seed)?)),
};

/// The tree over the counters and the lines' MACs: shared by the integrity scheme (reads and
/// write-backs of data, tree nodes leaving the L2) and the guard the encryption scheme calls.
struct State {
    hasher: Hasher,
    mac_hasher: Hasher,
    key: [u8; 16],
    tree: Tree,
    /// Hashes of chunks 0..m−1: the on-chip root registers.
    roots: Vec<H>,
    /// zero[l]: hash of a node at level l of an all-zero subtree (level 0 = top).
    zero: Vec<H>,
    macs: PerLine,
    /// The MACs are in the lines' ECC bits: read and written with the line, no transfer.
    in_ecc: bool,
    // statistics
    counter_checks: u64,
    counter_updates: u64,
    node_loads: u64,
    node_stores: u64,
    root_updates: u64,
    mac_checks: u64,
    mac_stores: u64,
    rebound: u64,
}

impl State {
    /// Bring internal node `c` into the L2, checked against its ancestors if it comes from
    /// memory: its slot and when its bytes are usable.
    fn obtain(&mut self, m: &mut Machine, c: u64, t: Cycle) -> Result<(u32, Cycle), IntegrityError> {
        let addr = self.tree.addr_of(c);
        m.counters.meta_accesses += 1;
        if let Some(slot) = m.lookup(addr) {
            return Ok((slot, (t + m.l2_latency).max(m.l2.ready(slot))));
        }
        m.counters.meta_misses += 1;
        self.node_loads += 1;
        let mut buf = [0u8; MAX_LINE];
        let node = &mut buf[..self.tree.chunk as usize];
        let t_data = m.port.read(addr, node, t).last;
        self.tree.decode_zero_node(c, node, &self.zero);
        // Used while its check completes, as chash's chunks are (003 §4.3).
        self.check_chunk(m, c, node, t, t_data)?;
        let slot = m.insert(addr, node, LineKind::Meta, false, t_data);
        Ok((slot, t_data))
    }

    /// The hash of chunk `c` its parent (or a root register) holds, and when it is known.
    fn expected(&mut self, m: &mut Machine, c: u64, t: Cycle) -> Result<(H, Cycle), IntegrityError> {
        let Some((parent, idx)) = self.tree.parent(c) else {
            return Ok((self.roots[c as usize], t));
        };
        let (slot, ready) = self.obtain(m, parent, t)?;
        let mut h = [0u8; MAX_HASH_BYTES];
        let hb = self.tree.hb;
        h[..hb].copy_from_slice(&m.l2.bytes(slot)[idx..idx + hb]);
        Ok((h, ready))
    }

    /// Check chunk `c` (`bytes`, arrived at `t_data`) against the hash its parent holds.
    fn check_chunk(&mut self, m: &mut Machine, c: u64, bytes: &[u8], t_req: Cycle, t_data: Cycle) -> Result<Cycle, IntegrityError> {
        let h_done = m.hash.run(t_data, self.tree.chunk);
        let h = hash(&self.hasher, bytes);
        let (want, t_want) = self.expected(m, c, t_req)?;
        let hb = self.tree.hb;
        if !same_bytes(&h[..hb], &want[..hb]) {
            let what = if self.tree.is_leaf(c) {
                "counter block does not match its hash in the bonsai tree".to_string()
            } else {
                format!("bonsai tree node (level {} of {}) does not match the hash held by its parent", self.tree.level_of(c), self.tree.levels)
            };
            return Err(IntegrityError::tampered(self.tree.addr_of(c), what));
        }
        let done = h_done.max(t_want) + 1;
        m.note_check(done);
        Ok(done)
    }

    /// Store `h`, the new hash of chunk `c`, where it is kept: its parent (in the L2) or a root.
    fn store_hash(&mut self, m: &mut Machine, c: u64, h: &H, t: Cycle) -> Result<(), IntegrityError> {
        match self.tree.parent(c) {
            None => {
                self.roots[c as usize] = *h;
                self.root_updates += 1;
            }
            Some((parent, idx)) => {
                let hb = self.tree.hb;
                let (slot, _) = self.obtain(m, parent, t)?;
                m.l2.bytes_mut(slot)[idx..idx + hb].copy_from_slice(&h[..hb]);
                m.l2.set_dirty(slot);
            }
        }
        Ok(())
    }

    /// Each leaf chunk overlapping the `bytes` at `addr`, whole: the missing part of a chunk
    /// larger than the bytes (an L2 line over 64 B) is read from memory at `t`, timed.
    fn leaves(&mut self, m: &mut Machine, addr: u64, bytes: &[u8], t: Cycle, mut f: impl FnMut(&mut Self, &mut Machine, u64, &[u8], Cycle) -> Result<Cycle, IntegrityError>) -> Result<Cycle, IntegrityError> {
        let n = self.tree.chunk;
        let end = addr + bytes.len() as u64;
        let mut done = t;
        let mut a = addr / n * n;
        while a < end {
            let c = self.tree.chunk_of(a).expect("counter blocks lie under the bonsai tree");
            let mut buf = [0u8; MAX_LINE];
            let chunk = &mut buf[..n as usize];
            let (lo, hi) = (a.max(addr), (a + n).min(end));
            let mut t_in = t;
            if lo > a || hi < a + n {
                t_in = m.port.read(a, chunk, t).last;
            }
            chunk[(lo - a) as usize..(hi - a) as usize].copy_from_slice(&bytes[(lo - addr) as usize..(hi - addr) as usize]);
            done = done.max(f(self, m, c, chunk, t_in)?);
            a += n;
        }
        Ok(done)
    }

    /// The MAC of line `addr` holding `plain` under counter `ctr`, and the bytes hashed for it.
    fn mac(&self, addr: u64, ctr: u64, plain: &[u8]) -> ([u8; MAX_HASH_BYTES], u64) {
        let mut h = [0u8; MAX_HASH_BYTES];
        let parts: [&[u8]; 4] = [&self.key, &addr.to_le_bytes(), &ctr.to_le_bytes(), plain];
        self.mac_hasher.hash_parts(&parts, &mut h);
        (h, parts.iter().map(|p| p.len() as u64).sum())
    }

    /// Whether the stored MAC `stored` is line `addr`'s under counter `ctr`. Never-written
    /// memory (counter 0, line and MAC all zero) needs none.
    fn mac_matches(&self, addr: u64, ctr: u64, plain: &[u8], stored: &[u8]) -> (bool, u64) {
        let (mac, hashed) = self.mac(addr, ctr, plain);
        let fresh = ctr == 0 && all_zero(stored) && all_zero(plain);
        (fresh || same_bytes(&mac[..stored.len()], stored), hashed)
    }

    /// Read line `addr`'s MAC from memory at `t`: the bytes and when they arrived (in the
    /// ECC bits: with the line the port just moved, at no time of their own).
    fn read_mac(&self, m: &mut Machine, addr: u64, t: Cycle) -> Result<([u8; MAX_HASH_BYTES], Cycle), IntegrityError> {
        let mut stored = [0u8; MAX_HASH_BYTES];
        if self.in_ecc {
            if !m.port.read_side(addr, &mut stored[..self.mac_hasher.len()]) {
                return Err(IntegrityError::refused(addr, "bonsai: the line's ECC bits are not beside it"));
            }
            return Ok((stored, t));
        }
        let t_mac = m.port.read(self.macs.addr(addr), &mut stored[..self.mac_hasher.len()], t).last;
        Ok((stored, t_mac))
    }

    /// Write line `addr`'s MAC under counter `ctr` from `t`: when memory has it.
    fn write_mac(&mut self, m: &mut Machine, addr: u64, ctr: u64, plain: &[u8], t: Cycle) -> Cycle {
        let (mac, hashed) = self.mac(addr, ctr, plain);
        let h_done = m.hash.run(t, hashed);
        self.mac_stores += 1;
        if self.in_ecc {
            // With the line the port just moved: the encryption wrote it (or read it, to
            // re-encipher it, and writes it next).
            let sent = m.port.write_side(addr, &mac[..self.mac_hasher.len()]);
            debug_assert!(sent, "bonsai: a MAC in ECC bits goes out with its line");
            return h_done;
        }
        m.port.write(self.macs.addr(addr), &mac[..self.mac_hasher.len()], h_done)
    }
}

/// Lock the shared state. Never contended (an engine runs on one thread at a time) and never
/// re-entered: the integrity scheme releases it before it calls the encryption scheme, whose
/// guard calls take it again.
fn lock(s: &Mutex<State>) -> MutexGuard<'_, State> {
    s.try_lock().expect("bonsai's state is used by one call at a time")
}

/// What the encryption scheme calls when it reads or writes its counters.
struct Guarded(Arc<Mutex<State>>);

impl Guard for Guarded {
    fn check(&mut self, m: &mut Machine, addr: u64, bytes: &[u8], t_req: Cycle, t_data: Cycle) -> Result<Cycle, IntegrityError> {
        let mut s = lock(&self.0);
        s.counter_checks += 1;
        s.leaves(m, addr, bytes, t_data, |s, m, c, chunk, t_in| s.check_chunk(m, c, chunk, t_req, t_in))
    }

    fn update(&mut self, m: &mut Machine, addr: u64, bytes: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        let mut s = lock(&self.0);
        s.counter_updates += 1;
        s.leaves(m, addr, bytes, t, |s, m, c, chunk, t_in| {
            let done = m.hash.run(t_in, s.tree.chunk);
            let h = hash(&s.hasher, chunk);
            s.store_hash(m, c, &h, t_in)?;
            Ok(done)
        })
    }

    fn reenciphered(&mut self, m: &mut Machine, addr: u64, plain: &[u8], old: u64, new: u64, t: Cycle) -> Result<Cycle, IntegrityError> {
        let mut s = lock(&self.0);
        let (stored, t_mac) = s.read_mac(m, addr, t)?;
        let hb = s.mac_hasher.len();
        let (ok, hashed) = s.mac_matches(addr, old, plain, &stored[..hb]);
        let checked = m.hash.run(t_mac, hashed);
        s.mac_checks += 1;
        if !ok {
            return Err(IntegrityError::tampered(addr, "a line re-enciphered after a counter overflow does not match its MAC"));
        }
        s.rebound += 1;
        Ok(s.write_mac(m, addr, new, plain, checked))
    }
}

pub struct Bonsai {
    state: Arc<Mutex<State>>,
    /// The tree's geometry (its nodes live in the state): where its metadata sits.
    tree: Tree,
    macs: PerLine,
    data_size: u64,
    in_ecc: bool,
}

impl Bonsai {
    pub fn new(p: &Params, m: &mut Machine, seed: Seed) -> Result<Bonsai, ConfigError> {
        let hasher = hasher_from(p, "bonsai")?;
        let mac_bytes = p.u64_min("bonsai.mac_bytes", 1)? as usize;
        let mac_hasher = Hasher::new(hasher.alg(), mac_bytes).map_err(|e| ConfigError(format!("bonsai.mac_bytes: {}", e)))?;
        // The counter blocks of the encryption scheme, built before this one: the tree's leaves.
        let regions: Vec<(u64, u64)> = m.layout.regions_of(Role::Counters).map(|r| (r.base, r.base + r.size)).collect();
        let (Some(&(lo, _)), Some(&(_, hi))) = (regions.first(), regions.last()) else {
            return Err(ConfigError("bonsai protects an encryption scheme's counter blocks: pair it with one that keeps them in memory (split)".into()));
        };
        let line = m.line();
        let tree = Tree::new(&mut m.layout, "bonsai tree", (lo, hi - lo), line, hasher.len(), p.u64_min("bonsai.arity", 0)?, "bonsai.arity")?;
        let data_size = m.layout.data_size;
        let in_ecc = p.choice("bonsai.mac_place", &["memory", "ecc"])? == "ecc";
        let macs = if in_ecc {
            let side = m.layout.ecc_per_line(Role::Macs, "bonsai MACs", data_size, mac_bytes as u64 * 8).map_err(|e| ConfigError(format!("bonsai.mac_place=ecc: {}", e)))?;
            m.port.attach_side(side, data_size, line).map_err(|e| ConfigError(format!("bonsai.mac_place=ecc: {}", e)))?;
            side
        } else {
            m.layout.per_line(Role::Macs, "bonsai MACs", data_size, mac_bytes as u64)
        };
        let zero = tree.zero_hashes(|b, _| hash(&hasher, b));
        let state = State {
            roots: vec![zero[0]; tree.m as usize],
            zero,
            hasher,
            mac_hasher,
            key: derive_key(seed, 0xb0a5),
            tree: tree.clone(),
            macs,
            in_ecc,
            counter_checks: 0,
            counter_updates: 0,
            node_loads: 0,
            node_stores: 0,
            root_updates: 0,
            mac_checks: 0,
            mac_stores: 0,
            rebound: 0,
        };
        let state = Arc::new(Mutex::new(state));
        m.set_guard(Box::new(Guarded(state.clone())));
        Ok(Bonsai { state, tree, macs, data_size, in_ecc })
    }

    fn counter(enc: &dyn Encryption, addr: u64) -> Result<u64, IntegrityError> {
        enc.line_counter().ok_or_else(|| IntegrityError::refused(addr, "bonsai needs the line's counter: the encryption scheme keeps none"))
    }
}

impl Integrity for Bonsai {
    fn name(&self) -> &'static str {
        "bonsai"
    }

    fn verify(&mut self, m: &mut Machine, enc: &mut dyn Encryption, addr: u64, plain: &mut [u8], t_req: Cycle, t_data: Cycle) -> Result<Verified, IntegrityError> {
        if addr >= self.data_size {
            return Ok(Verified { ready: t_data, checked: t_data });
        }
        let ctr = Self::counter(enc, addr)?;
        let mut s = lock(&self.state);
        let (stored, t_mac) = s.read_mac(m, addr, t_req)?;
        let hb = s.mac_hasher.len();
        let (ok, hashed) = s.mac_matches(addr, ctr, plain, &stored[..hb]);
        s.mac_checks += 1;
        let (slot, t_start) = m.read_buf.acquire(t_data);
        let h_done = m.hash.run(t_start, hashed);
        super::conclude(m, slot, t_start, ok, h_done.max(t_mac) + 1, || IntegrityError::tampered(addr, "line does not match its MAC under its counter"))
    }

    fn evict(&mut self, m: &mut Machine, enc: &mut dyn Encryption, v: &Victim) -> Result<Cycle, IntegrityError> {
        if !v.dirty {
            return Ok(v.t);
        }
        let (wslot, start) = m.write_buf.acquire(v.t);
        let done = if v.addr < self.data_size {
            // The encryption writes the line and its counter block (which the guard binds);
            // then the MAC under the counter it used.
            let done = enc.write_line(m, v.addr, &v.bytes, start)?;
            let ctr = Self::counter(enc, v.addr)?;
            done.max(lock(&self.state).write_mac(m, v.addr, ctr, &v.bytes, start))
        } else if let Some(c) = self.tree.chunk_of(v.addr).filter(|&c| !self.tree.is_leaf(c)) {
            // A tree node: its new hash goes to its parent, the node to memory as it is.
            let mut s = lock(&self.state);
            let h_done = m.hash.run(start, s.tree.chunk);
            let h = hash(&s.hasher, &v.bytes);
            s.store_hash(m, c, &h, start)?;
            s.node_stores += 1;
            m.port.write(v.addr, &v.bytes, h_done)
        } else {
            enc.write_line(m, v.addr, &v.bytes, start)?
        };
        m.write_buf.hold_until(wslot, done);
        Ok(start)
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        if addr < self.data_size {
            return vec![Meta::new(MetaKind::Mac, self.macs.addr(addr), lock(&self.state).mac_hasher.len() as u64)];
        }
        // A counter block: the tree nodes above it.
        super::tree_path(&self.tree, addr)
    }

    fn space_overhead(&self) -> f64 {
        (if self.in_ecc { 0.0 } else { self.macs.overhead() }) + self.tree.space_overhead() * self.tree.data_size as f64 / self.data_size as f64
    }

    fn reset_stats(&mut self) {
        let mut s = lock(&self.state);
        (s.counter_checks, s.counter_updates, s.node_loads, s.node_stores) = (0, 0, 0, 0);
        (s.root_updates, s.mac_checks, s.mac_stores, s.rebound) = (0, 0, 0, 0);
    }

    fn stats(&self, m: &Machine, out: &mut Stats) {
        let s = lock(&self.state);
        out.int("bonsai.arity", s.tree.m);
        out.int("bonsai.levels", s.tree.levels as u64);
        out.str("bonsai.hash", s.hasher.alg().name());
        out.int("bonsai.counter_checks", s.counter_checks);
        out.int("bonsai.counter_updates", s.counter_updates);
        out.int("bonsai.node_loads", s.node_loads);
        out.rate("bonsai.node_loads_per_miss", s.node_loads, m.counters.data_misses);
        out.int("bonsai.node_stores", s.node_stores);
        out.int("bonsai.root_updates", s.root_updates);
        out.int("bonsai.mac_checks", s.mac_checks);
        out.int("bonsai.mac_stores", s.mac_stores);
        out.int("bonsai.rebound_macs", s.rebound);
        out.float("bonsai.space_overhead", self.space_overhead());
    }
}

#[cfg(test)]
mod tests {
    use crate::layout::MetaKind;
    use crate::testutil::{flip, lines_in_memory, params, pattern, replay_line_and_mac, stat};
    use crate::{Engine, IntegrityError};

    fn engine(extra: &[&str]) -> Engine {
        Engine::new(&params("bonsai", "split", extra), 3).unwrap()
    }

    fn read(e: &mut Engine, addr: u64, n: usize) -> Result<Vec<u8>, IntegrityError> {
        let mut v = vec![0u8; n];
        e.read(addr, &mut v, 0)?;
        Ok(v)
    }

    /// Counter block, MAC and tree path of the line at `a`.
    fn meta(e: &Engine, a: u64) -> (u64, u64, Vec<u64>) {
        let m = e.metadata_of(a);
        let ctr = m.iter().find(|x| x.kind == MetaKind::Counter("split")).unwrap().addr;
        let mac = m.iter().find(|x| x.kind == MetaKind::Mac).unwrap().addr;
        let tree = m.iter().filter(|x| matches!(x.kind, MetaKind::TreeLevel(_))).map(|x| x.addr).collect();
        (ctr, mac, tree)
    }

    #[test]
    fn only_a_counter_scheme_that_hands_over_its_counters_pairs_with_it() {
        for enc in ["none", "otp", "ocb", "sgx"] {
            let err = Engine::new(&params("bonsai", enc, &[]), 1).err().unwrap().0;
            assert!(err.contains("integrity 'bonsai' protects the counters") && err.contains("pair it with split"), "{}: {}", enc, err);
        }
    }

    #[test]
    fn lines_round_trip_while_tree_nodes_leave_and_reenter_a_small_l2() {
        // 4 KiB of L2 against 2 MiB of lines spread over many counter blocks: tree nodes are
        // evicted dirty and fetched back checked again and again.
        let mut e = engine(&["l2.size=4KiB", "l2.ways=2"]);
        let lines: Vec<u64> = (0..600u64).map(|k| k * 0x1040 % (2 << 20) & !63).collect();
        for (k, &a) in lines.iter().enumerate() {
            e.write(a, &pattern(k as u64, 64), 0).unwrap();
        }
        e.flush(0).unwrap();
        for (k, &a) in lines.iter().enumerate().rev() {
            let want = lines.iter().rposition(|&b| b == a).unwrap();
            assert_eq!(read(&mut e, a, 64).unwrap(), pattern(want as u64, 64), "line {} at {:#x}", k, a);
        }
        assert!(stat(&e, "bonsai.node_loads") > 100.0 && stat(&e, "bonsai.node_stores") > 10.0);
        assert!(stat(&e, "bonsai.counter_checks") > 0.0 && stat(&e, "bonsai.mac_checks") >= 600.0);
        // A tree over 1/64 of memory: far fewer levels than chash's over the data.
        let chash = Engine::new(&params("chash", "split", &[]), 3).unwrap();
        assert!(stat(&e, "bonsai.levels") + 3.0 <= stat(&chash, "chash.levels"), "{} vs {}", stat(&e, "bonsai.levels"), stat(&chash, "chash.levels"));
    }

    #[test]
    fn a_changed_line_mac_counter_or_tree_node_fails_the_read() {
        let a = 0x8_0040;
        let (ctr, mac, tree) = meta(&engine(&[]), a);
        assert!(!tree.is_empty(), "the counter block has tree nodes above it");
        for (what, at) in [("line", a + 5), ("MAC", mac), ("counter block", ctr + 9)].into_iter().chain(tree.iter().map(|&t| ("tree node", t + 3))) {
            let mut e = engine(&[]);
            e.write(a, &pattern(1, 64), 0).unwrap();
            e.write(a + 0x1000, &pattern(2, 64), 0).unwrap();
            e.flush(0).unwrap();
            flip(&mut e, at);
            let err = read(&mut e, a, 64).expect_err(what);
            assert!(err.is_tamper(), "{}: {}", what, err);
        }
    }

    #[test]
    fn a_counter_block_replayed_with_its_tree_path_and_the_line_is_caught() {
        let a = 0x4_0000;
        let mut e = engine(&[]);
        e.write(a, &pattern(1, 64), 0).unwrap();
        e.flush(0).unwrap();
        let (ctr, mac, tree) = meta(&e, a);
        let grab = |e: &mut Engine, at: u64, n: usize| {
            let mut v = vec![0u8; n];
            e.untrusted().read(at, &mut v);
            (at, v)
        };
        let mut old: Vec<(u64, Vec<u8>)> = vec![grab(&mut e, a, 64), grab(&mut e, mac, 8), grab(&mut e, ctr, 64)];
        old.extend(tree.iter().map(|&t| grab(&mut e, t, 64)));
        e.write(a, &pattern(2, 64), 0).unwrap();
        e.flush(0).unwrap();
        for (at, v) in &old {
            e.untrusted().write(*at, v);
        }
        assert!(read(&mut e, a, 64).unwrap_err().is_tamper(), "the roots on chip are newer than any replayed path");
    }

    #[test]
    fn a_counter_rolled_back_in_memory_is_refused_before_a_write_back_reuses_its_pad() {
        // Without a tree split declares this pad reuse; bonsai checks the block before use.
        let a = 0x2_0000;
        let mut e = engine(&[]);
        e.write(a, &pattern(1, 64), 0).unwrap();
        e.flush(0).unwrap();
        let (ctr, _, _) = meta(&e, a);
        let mut old = [0u8; 64];
        e.untrusted().read(ctr, &mut old);
        let mut ct1 = [0u8; 64];
        e.untrusted().read(a, &mut ct1);
        e.write(a, &pattern(2, 64), 0).unwrap();
        e.flush(0).unwrap();
        // The line is cached (its counter block read and checked), then the block rolled back:
        // only the write-back's own read of the block can notice.
        assert_eq!(read(&mut e, a, 64).unwrap(), pattern(2, 64));
        e.untrusted().write(ctr, &old);
        e.write(a, &pattern(3, 64), 0).unwrap();
        let err = e.flush(0).unwrap_err();
        assert!(err.is_tamper(), "{}", err);
        let mut ct3 = [0u8; 64];
        e.untrusted().read(a, &mut ct3);
        assert_ne!(ct1, ct3, "no line went out under the rolled-back counter");
    }

    #[test]
    fn a_minor_overflow_rebinds_every_line_of_the_group_and_a_line_tampered_before_it_is_still_caught() {
        // SC-128: 3-bit minors, the 8th write-back of a line re-enciphers its 127 neighbours.
        let base = 0x10_0000;
        let group: Vec<u64> = (0..128).map(|k| base + k * 64).collect();
        for tamper in [false, true] {
            let mut e = engine(&["split.arity=128"]);
            for (k, &a) in group.iter().enumerate().step_by(2) {
                e.write(a, &pattern(k as u64, 64), 0).unwrap();
            }
            e.flush(0).unwrap();
            if tamper {
                flip(&mut e, group[4] + 1);
            }
            let victim = group[9];
            let r: Result<(), IntegrityError> = (0..10u64).try_for_each(|round| {
                e.write(victim, &pattern(500 + round, 64), 0)?;
                e.flush(0).map(|_| ())
            });
            if tamper {
                // Re-enciphering must not launder the changed line under a fresh MAC.
                let caught = r.is_err() || read(&mut e, group[4], 64).is_err();
                assert!(caught, "a line changed before the overflow passed after it");
                continue;
            }
            r.unwrap();
            assert!(stat(&e, "split.minor_overflows") >= 1.0 && stat(&e, "bonsai.rebound_macs") >= 127.0);
            for (k, &a) in group.iter().enumerate() {
                let want = if a == victim { pattern(509, 64) } else if k % 2 == 0 { pattern(k as u64, 64) } else { vec![0; 64] };
                assert_eq!(read(&mut e, a, 64).unwrap(), want, "line {}", k);
            }
        }
    }

    #[test]
    fn a_written_back_counter_cache_is_bound_when_blocks_leave_it_and_at_a_flush() {
        // 8 cached blocks against 64 groups: dirty blocks leave the cache all the time.
        let mut e = engine(&["split.cache_blocks=8", "l2.size=8KiB"]);
        let lines: Vec<u64> = (0..64u64).flat_map(|g| [g * 4096, g * 4096 + 64]).collect();
        for round in 0..3u64 {
            for (k, &a) in lines.iter().enumerate() {
                e.write(a, &pattern(round * 1000 + k as u64, 64), 0).unwrap();
            }
        }
        e.flush(0).unwrap();
        let writes = stat(&e, "split.writes");
        assert!(stat(&e, "split.counter_writes") < writes, "{} block writes for {} line writes", stat(&e, "split.counter_writes"), writes);
        for (k, &a) in lines.iter().enumerate() {
            assert_eq!(read(&mut e, a, 64).unwrap(), pattern(2000 + k as u64, 64), "line {}", k);
        }
        // Flushed: the counter blocks in memory are the newest, and the tree holds them.
        e.flush(0).unwrap();
        let (ctr, _, _) = meta(&e, lines[40]);
        flip(&mut e, ctr + 1);
        assert!(read(&mut e, lines[40], 64).unwrap_err().is_tamper());
    }

    #[test]
    fn counter_checks_are_timed_and_a_cached_counter_block_needs_none() {
        let run = |cache: &str| {
            let mut e = engine(&[&format!("split.cache_blocks={}", cache)]);
            lines_in_memory(&mut e, 0x40_0000, 256);
            let mut t = 0;
            for k in 0..256u64 {
                let o = e.access(0x40_0000 + k * 64, crate::AccessKind::Load, t).unwrap();
                e.settle().unwrap();
                assert!(o.verified >= o.ready);
                t = o.verified + 10;
            }
            (stat(&e, "bonsai.counter_checks"), t)
        };
        let (checks_none, t_none) = run("0");
        let (checks_cached, t_cached) = run("16");
        assert_eq!(checks_none, 256.0, "every counter block read from memory is checked");
        assert!(checks_cached <= 4.0, "{}", checks_cached);
        assert!(t_cached < t_none, "{} vs {}", t_cached, t_none);
    }

    #[test]
    fn macs_in_ecc_bits_catch_what_macs_in_memory_catch_and_move_no_bytes_of_their_own() {
        let a = 0x8_0040;
        let mut traffic = Vec::new();
        for place in ["memory", "ecc"] {
            let opt = format!("bonsai.mac_place={}", place);
            let mk = || engine(&[&opt]);
            let mut e = mk();
            lines_in_memory(&mut e, 0, 256);
            for k in 0..256u64 {
                assert_eq!(read(&mut e, k * 64, 64).unwrap(), pattern(k, 64), "{} line {}", place, k);
            }
            traffic.push((stat(&e, "mem.read_bytes"), stat(&e, "mem.reads"), stat(&e, "bonsai.mac_checks")));
            let (_, mac, _) = meta(&e, a);
            for (what, at) in [("line", a + 5), ("MAC", mac)] {
                let mut e = mk();
                e.write(a, &pattern(1, 64), 0).unwrap();
                e.flush(0).unwrap();
                flip(&mut e, at);
                assert!(read(&mut e, a, 64).unwrap_err().is_tamper(), "{}: a changed {} was read", place, what);
            }
            // The line put back with its MAC as they were: its counter has moved on.
            let mut e = mk();
            replay_line_and_mac(&mut e, a, mac, 8);
            assert!(read(&mut e, a, 64).unwrap_err().is_tamper(), "{}: a replayed line and MAC were read", place);
            // Overflows re-bind the group's MACs in the ECC bits as they re-encipher the lines.
            let mut e = engine(&[&opt, "split.arity=128"]);
            for k in 0..128u64 {
                e.write(0x10_0000 + k * 64, &pattern(k, 64), 0).unwrap();
            }
            for r in 0..10u64 {
                e.write(0x10_0000, &pattern(100 + r, 64), 0).unwrap();
                e.flush(0).unwrap();
            }
            assert!(stat(&e, "bonsai.rebound_macs") >= 127.0, "{}", place);
            for k in 1..128u64 {
                assert_eq!(read(&mut e, 0x10_0000 + k * 64, 64).unwrap(), pattern(k, 64), "{} line {} after overflows", place, k);
            }
        }
        // Same checks; in ECC bits the MACs cost no transfer: one read fewer per line.
        let ((mem_bytes, mem_reads, mem_checks), (ecc_bytes, ecc_reads, ecc_checks)) = (traffic[0], traffic[1]);
        assert_eq!(mem_checks, ecc_checks);
        assert_eq!(mem_reads - ecc_reads, 256.0, "{} vs {} reads", mem_reads, ecc_reads);
        assert!(ecc_bytes < mem_bytes, "{} vs {} B", ecc_bytes, mem_bytes);
    }
}
