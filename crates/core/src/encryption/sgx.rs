//! sgx: memory protection as Intel SGX's memory encryption engine does it (S. Gueron, "A
//! Memory Encryption Engine Suitable for General Purpose Processors", 2016): counter-mode
//! encryption whose counters are protected by a counter tree, a MAC per line, and a cache of
//! tree nodes on chip. One scheme of the counter-tree family; with it, integrity `none` is
//! already a fully protected machine.
//!
//! - **Versions**: each line has a 56-bit version, incremented at every write-back; chunk i
//!   of line a is XORed with AES_K(a|i ‖ version). Eight versions fill a 64-B node (56 B of
//!   counters and a 56-bit MAC).
//! - **The tree**: eight nodes of a level are counted by one node of the level above, up to
//!   a level of at most eight nodes whose counters are on-chip registers (the root). A node's
//!   MAC is H(K ‖ its counters ‖ its address ‖ its parent's counter for it), truncated to 56
//!   bits: a node is valid only with the parent counter it was written under, so no node,
//!   and hence no version, can be rolled back without changing the root.
//! - **Line MACs**: H(K' ‖ ciphertext ‖ address ‖ version), 56 bits, stored beside the line
//!   (8 B per line) and read in its burst.
//! - **The metadata cache** (`sgx.cache_bytes`, 8-way, LRU, write-back): nodes in it are
//!   trusted. A read fetches its version node and every uncached ancestor (issued together),
//!   checks them top-down from the first cached ancestor or the root, then checks the line's
//!   MAC; the data is usable once deciphered (the pad starts when the version is known) and
//!   verified when every MAC is. A write-back increments the version in the cached node,
//!   which becomes dirty; a dirty node leaving the cache increments its counter in its parent
//!   (brought into the cache, checked) and is written with its MAC under the new counter.
//!
//! Never-written memory is all zero: a node whose bytes and parent counter are all zero, and
//! a line whose version, bytes and MAC are zero, are that initial state.

use super::{derive_key, xor_counter_pads, Encryption, EncryptionScheme, Seed};
use crate::decl::{param, Component, Coverage, Def, Detection, Guarantees, Kind, Role, stat};
use crate::error::IntegrityError;
use crate::layout::{all_zero, Meta, MetaKind, PerLine, MAX_LINE};
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_crypto::{Aes128, HashAlg, Hasher, MAX_HASH_BYTES};
use secmem_timing::{Cycle, Tags};

/// sgx's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "sgx",
    kind: Kind::Encryption,
    summary: "counter mode under a counter tree, as SGX's memory encryption engine: 56-bit versions 8 to a node, each node MACed with its parent's counter, roots on chip; a MAC per line; a cache of trusted nodes",
    source: "Gueron 2016 (SGX MEE); the counter-tree family",
    params: &[
        param("sgx.cache_bytes", Def::Str("32KiB"), "B", "metadata cache of tree nodes (trusted copies, 8-way, LRU, write-back); at least 512 B"),
        param("sgx.hash", Def::Str("md5"), "md5|md5-rfc1321|sha1|sha256", "the keyed hash of the node and line MACs (truncated to 56 bits), on the hash engine"),
    ],
    stats: &[
        stat("sgx.reads", "lines", "lines decrypted on their way in (L2 misses)"),
        stat("sgx.writes", "lines", "lines encrypted on their way out (write-backs)"),
        stat("sgx.levels", "levels", "levels of the counter tree"),
        stat("sgx.node_reads", "nodes", "tree nodes read from memory"),
        stat("sgx.node_writes", "nodes", "tree nodes written to memory"),
        stat("sgx.cache_hits", "nodes", "node lookups served by the on-chip node cache"),
        stat("sgx.cache_misses", "nodes", "node lookups that missed it"),
        stat("sgx.cache_hit_rate", "fraction", "sgx.cache_hits over lookups"),
        stat("sgx.node_reads_per_read", "nodes", "sgx.node_reads / sgx.reads"),
        stat("sgx.mac_failures", "checks", "MAC checks that failed (tampering noticed)"),
        stat("sgx.pad_exposed_cycles", "cycles", "pad cycles after the data arrived, summed"),
        stat("sgx.check_exposed_cycles", "cycles", "MAC-check cycles after the data arrived, summed"),
        stat("sgx.refetches", "paths", "tree paths read again because write-backs met them while being placed"),
        stat("sgx.space_overhead", "fraction", "memory the tree and MACs take, per byte of data"),
    ],
};

/// sgx's registration. The tree and the MACs notice any change, move or rollback at the
/// access; the pads bind address and version.
pub const SCHEME: EncryptionScheme = EncryptionScheme {
    decl: &DECL,
    guarantees: |_| {
        Ok(Guarantees {
            confidential: true,
            hides_equal_lines: true,
            hides_rewrites: true,
            ..Guarantees::detecting(Detection::Access, Detection::Access, Detection::Access)
        })
    },
    // Its counters are protected by its own tree: no other tree over counters pairs with it.
    coverage: Coverage { lays_out: &[Role::Counters, Role::Macs], protects: &[Role::Data, Role::Tree, Role::Counters], guarded: &[] },
    build: |p, m, c, seed| Ok(Box::new(Sgx::new(p, m, c, seed)?)),
};

/// Bytes of a tree node; counters per node; bytes of a counter and of a MAC.
const NODE: u64 = 64;
const ARITY: u64 = 8;
const CTR: usize = 7;
const MAC: usize = 7;
/// Where a node's MAC sits, after its eight counters.
const MAC_AT: usize = ARITY as usize * CTR;
/// The largest 56-bit counter.
const CTR_MAX: u64 = (1 << 56) - 1;

/// A tree node as stored: eight 56-bit counters, a 56-bit MAC, one byte unused.
#[derive(Clone, Copy)]
struct Node([u8; NODE as usize]);

impl Node {
    fn ctr(&self, i: usize) -> u64 {
        let mut b = [0u8; 8];
        b[..CTR].copy_from_slice(&self.0[i * CTR..(i + 1) * CTR]);
        u64::from_le_bytes(b)
    }

    fn set_ctr(&mut self, i: usize, v: u64) {
        self.0[i * CTR..(i + 1) * CTR].copy_from_slice(&v.to_le_bytes()[..CTR]);
    }
}

/// One level of the tree: where its nodes are and how many.
#[derive(Clone, Copy)]
struct Level {
    base: u64,
    nodes: u64,
}

/// The metadata cache: trusted copies of nodes.
struct NodeCache {
    tags: Tags,
    nodes: Vec<Node>,
    dirty: Vec<bool>,
}

pub struct Sgx {
    aes: Aes128,
    hasher: Hasher,
    node_key: [u8; 16],
    line_key: [u8; 16],
    line: u64,
    /// Level 0 holds the versions; the last level's counters are `roots`.
    levels: Vec<Level>,
    roots: Vec<u64>,
    macs: PerLine,
    cache: NodeCache,
    /// When the last line read was verified, for `take_checked`.
    checked: Option<Cycle>,
    // statistics
    reads: u64,
    writes: u64,
    node_reads: u64,
    node_writes: u64,
    cache_hits: u64,
    cache_misses: u64,
    mac_failures: u64,
    pad_exposed: u64,
    check_exposed: u64,
    /// Paths read again because making room wrote dirty nodes back (each read is booked).
    refetches: u64,
}

impl Sgx {
    pub fn new(p: &Params, m: &mut Machine, covered: u64, seed: Seed) -> Result<Sgx, ConfigError> {
        let alg = HashAlg::parse(&p.choice("sgx.hash", &["md5", "md5-rfc1321", "sha1", "sha256"])?).expect("a listed choice");
        let hasher = Hasher::new(alg, MAC).map_err(|e| ConfigError(format!("sgx.hash: {}", e)))?;
        let bytes = p.size("sgx.cache_bytes")?;
        if bytes < ARITY * NODE {
            return Err(ConfigError(format!("sgx.cache_bytes: {} B holds fewer than {} nodes of {} B", bytes, ARITY, NODE)));
        }
        let tags = Tags::new(bytes, ARITY as usize, NODE).map_err(|e| ConfigError(format!("sgx.cache_bytes: {}", e)))?;
        let slots = tags.slots();
        let line = m.line();
        let macs = m.layout.per_line(Role::Macs, "sgx MACs", covered, 8);
        let mut levels = Vec::new();
        let mut n = covered.div_ceil(line).div_ceil(ARITY);
        loop {
            let base = m.layout.alloc(Role::Counters, &format!("sgx tree level {}", levels.len()), n * NODE);
            levels.push(Level { base, nodes: n });
            if n <= ARITY {
                break;
            }
            n = n.div_ceil(ARITY);
        }
        Ok(Sgx {
            aes: Aes128::new(&derive_key(seed, 0x5698)),
            hasher,
            node_key: derive_key(seed, 0x5699),
            line_key: derive_key(seed, 0x569a),
            line,
            roots: vec![0; n as usize],
            levels,
            macs,
            cache: NodeCache { tags, nodes: vec![Node([0; NODE as usize]); slots], dirty: vec![false; slots] },
            checked: None,
            reads: 0,
            writes: 0,
            node_reads: 0,
            node_writes: 0,
            cache_hits: 0,
            cache_misses: 0,
            mac_failures: 0,
            pad_exposed: 0,
            check_exposed: 0,
            refetches: 0,
        })
    }

    fn top(&self) -> usize {
        self.levels.len() - 1
    }

    fn node_addr(&self, k: usize, j: u64) -> u64 {
        self.levels[k].base + j * NODE
    }

    /// The (level, index) of the node at `addr`.
    fn node_of(&self, addr: u64) -> (usize, u64) {
        let k = self.levels.iter().position(|l| addr >= l.base && addr < l.base + l.nodes * NODE).expect("a tree node's address");
        (k, (addr - self.levels[k].base) / NODE)
    }

    /// Line `addr`'s version node and its slot in it.
    fn version_of(&self, addr: u64) -> (u64, usize) {
        let l = addr / self.line;
        (l / ARITY, (l % ARITY) as usize)
    }

    fn node_mac(&self, node: &Node, addr: u64, parent_ctr: u64) -> [u8; MAC] {
        let mut h = [0u8; MAX_HASH_BYTES];
        self.hasher.hash_parts(&[&self.node_key, &node.0[..MAC_AT], &addr.to_le_bytes(), &parent_ctr.to_le_bytes()], &mut h);
        h[..MAC].try_into().unwrap()
    }

    fn line_mac(&self, ct: &[u8], addr: u64, version: u64) -> [u8; MAC] {
        let mut h = [0u8; MAX_HASH_BYTES];
        self.hasher.hash_parts(&[&self.line_key, ct, &addr.to_le_bytes(), &version.to_le_bytes()], &mut h);
        h[..MAC].try_into().unwrap()
    }

    /// XOR `buf` (line `addr`) with its pads under `version`.
    fn apply_pad(&self, addr: u64, version: u64, buf: &mut [u8]) {
        xor_counter_pads(&self.aes, addr, version, buf);
    }

    /// The trusted counter of node (k, j) held by its parent, if the parent is cached or the
    /// node is at the top (a root register).
    fn trusted_parent_ctr(&mut self, k: usize, j: u64) -> Option<u64> {
        if k == self.top() {
            return Some(self.roots[j as usize]);
        }
        let s = self.cache.tags.find(self.node_addr(k + 1, j / ARITY))?;
        self.cache.tags.touch(s);
        Some(self.cache.nodes[s as usize].ctr((j % ARITY) as usize))
    }

    /// Node (k, j) in the cache, checked. Returns its slot, when its counters are known and
    /// when its check (and that of every ancestor fetched for it) is complete.
    fn obtain(&mut self, m: &mut Machine, k: usize, j: u64, t: Cycle) -> Result<(u32, Cycle, Cycle), IntegrityError> {
        loop {
            if let Some(r) = self.try_obtain(m, k, j, t)? {
                return Ok(r);
            }
            self.refetches += 1;
        }
    }

    /// One attempt of `obtain`: None when making room wrote dirty nodes back, which may have
    /// changed (in memory, or by fetching them into the cache) the nodes it had read; it is
    /// then made again from the cache and memory as they now are.
    fn try_obtain(&mut self, m: &mut Machine, k: usize, j: u64, t: Cycle) -> Result<Option<(u32, Cycle, Cycle)>, IntegrityError> {
        let addr = self.node_addr(k, j);
        if let Some(s) = self.cache.tags.find(addr) {
            self.cache.tags.touch(s);
            self.cache_hits += 1;
            return Ok(Some((s, t + 1, t + 1)));
        }
        // The node and every uncached ancestor below a cached one or the root, issued together.
        let mut path = vec![(k, j)];
        while let Some(&(pk, pj)) = path.last() {
            if pk == self.top() || self.cache.tags.find(self.node_addr(pk + 1, pj / ARITY)).is_some() {
                break;
            }
            path.push((pk + 1, pj / ARITY));
        }
        let mut fetched = Vec::with_capacity(path.len());
        for &(pk, pj) in &path {
            let mut n = Node([0; NODE as usize]);
            let tr = m.port.read(self.node_addr(pk, pj), &mut n.0, t);
            self.node_reads += 1;
            self.cache_misses += 1;
            fetched.push((n, tr.last));
        }
        // Checked from the top: each node against the counter its (trusted) parent holds.
        let (tk, tj) = *path.last().unwrap();
        let mut parent_ctr = self.trusted_parent_ctr(tk, tj).expect("the top of the path has a trusted parent");
        let mut t_parent = t + 1;
        let mut verified = t + 1;
        let mut slot = 0;
        for (i, &(pk, pj)) in path.iter().enumerate().rev() {
            let (node, arrived) = fetched[i];
            let a = self.node_addr(pk, pj);
            let t_mac = m.hash.run(arrived, NODE);
            if !(parent_ctr == 0 && all_zero(&node.0)) && node.0[MAC_AT..MAC_AT + MAC] != self.node_mac(&node, a, parent_ctr) {
                self.mac_failures += 1;
                return Err(IntegrityError::tampered(
                    a,
                    format!("sgx tree node (level {} of {}) does not match its MAC under its parent's counter", pk, self.levels.len()),
                ));
            }
            verified = verified.max(t_mac.max(t_parent) + 1);
            if i > 0 {
                let (_, cj) = path[i - 1];
                parent_ctr = node.ctr((cj % ARITY) as usize);
                t_parent = arrived;
            }
            match self.insert(m, a, node, t)? {
                Some(s) => slot = s,
                None => return Ok(None),
            }
        }
        Ok(Some((slot, fetched[0].1, verified)))
    }

    /// Put `node` (clean, just read and checked) in the cache at `addr`. If its place holds a
    /// dirty node, that node is written back instead and None returned: the write-back bumps
    /// a parent's counter and may fetch, change or write back any node, this one included, so
    /// the copy in hand may be stale and must be read again.
    fn insert(&mut self, m: &mut Machine, addr: u64, node: Node, t: Cycle) -> Result<Option<u32>, IntegrityError> {
        let s = self.cache.tags.victim(addr);
        match self.cache.tags.addr_of(s) {
            Some(_) if self.cache.dirty[s as usize] => {
                self.write_back(m, s, t)?;
                Ok(None)
            }
            _ => {
                self.cache.tags.install(s, addr);
                self.cache.nodes[s as usize] = node;
                self.cache.dirty[s as usize] = false;
                Ok(Some(s))
            }
        }
    }

    /// The counter the parent of node (k, j) (or a root register) holds for it, incremented:
    /// its new value and when it is known. The holder is the first ancestor on chip (cached,
    /// or a root register); ancestors between are read, checked, updated and written back
    /// with new MACs, each under its own parent's incremented counter. Nothing enters the
    /// cache here, so no eviction (and no write-back) can nest in it.
    fn bump_parent(&mut self, m: &mut Machine, k: usize, j: u64, t: Cycle) -> Result<(u64, Cycle), IntegrityError> {
        let mut chain: Vec<(usize, u64, Node)> = Vec::new();
        let (mut ck, mut cj) = (k, j);
        let mut known = t + 1;
        while ck != self.top() && self.cache.tags.find(self.node_addr(ck + 1, cj / ARITY)).is_none() {
            let (pk, pj) = (ck + 1, cj / ARITY);
            let mut n = Node([0; NODE as usize]);
            let tr = m.port.read(self.node_addr(pk, pj), &mut n.0, t);
            self.node_reads += 1;
            known = known.max(m.hash.run(tr.last, NODE) + 1);
            chain.push((pk, pj, n));
            (ck, cj) = (pk, pj);
        }
        // Check the fetched ancestors from the top, against the trusted holder.
        let mut pc = self.trusted_parent_ctr(ck, cj).expect("the top of the chain has a trusted holder");
        for idx in (0..chain.len()).rev() {
            let (pk, pj, n) = chain[idx];
            let a = self.node_addr(pk, pj);
            if !(pc == 0 && all_zero(&n.0)) && n.0[MAC_AT..MAC_AT + MAC] != self.node_mac(&n, a, pc) {
                self.mac_failures += 1;
                return Err(IntegrityError::tampered(a, format!("sgx tree node (level {} of {}) does not match its MAC under its parent's counter", pk, self.levels.len())));
            }
            let below = if idx == 0 { j } else { chain[idx - 1].1 };
            pc = n.ctr((below % ARITY) as usize);
        }
        // Increment from the bottom: (k, j)'s counter, then each fetched ancestor's in its parent.
        let bump = |v: u64, a: u64| -> Result<u64, IntegrityError> {
            if v >= CTR_MAX {
                return Err(IntegrityError::exhausted(a, "sgx: a tree counter is exhausted (a new key would be needed; not modelled)"));
            }
            Ok(v + 1)
        };
        let mut below = j;
        let mut first = None;
        for (pk, pj, n) in chain.iter_mut() {
            let i = (below % ARITY) as usize;
            let c = bump(n.ctr(i), self.levels[*pk].base + *pj * NODE)?;
            n.set_ctr(i, c);
            first.get_or_insert(c);
            below = *pj;
        }
        let held = if ck == self.top() {
            let c = bump(self.roots[cj as usize], self.node_addr(ck, cj))?;
            self.roots[cj as usize] = c;
            c
        } else {
            let s = self.cache.tags.find(self.node_addr(ck + 1, cj / ARITY)).expect("the holder is cached");
            let i = (cj % ARITY) as usize;
            let c = bump(self.cache.nodes[s as usize].ctr(i), self.node_addr(ck, cj))?;
            self.cache.nodes[s as usize].set_ctr(i, c);
            self.cache.dirty[s as usize] = true;
            c
        };
        // The updated ancestors go back with their MACs under their parents' new counters.
        let mut pc = held;
        for idx in (0..chain.len()).rev() {
            let (pk, pj, mut n) = chain[idx];
            let a = self.node_addr(pk, pj);
            let mac = self.node_mac(&n, a, pc);
            n.0[MAC_AT..MAC_AT + MAC].copy_from_slice(&mac);
            let t_mac = m.hash.run(known, NODE);
            m.port.write(a, &n.0, t_mac);
            self.node_writes += 1;
            let below = if idx == 0 { j } else { chain[idx - 1].1 };
            pc = n.ctr((below % ARITY) as usize);
        }
        Ok((first.unwrap_or(held), known))
    }

    /// The dirty node in slot `s` leaves the chip: its counter in its parent (or root
    /// register) is incremented and it is written with its MAC under the new counter.
    fn write_back(&mut self, m: &mut Machine, s: u32, t: Cycle) -> Result<Cycle, IntegrityError> {
        let Some(addr) = self.cache.tags.addr_of(s) else { return Ok(t) };
        let (k, j) = self.node_of(addr);
        let (ctr, t_ctr) = self.bump_parent(m, k, j, t)?;
        let mut node = self.cache.nodes[s as usize];
        self.cache.dirty[s as usize] = false;
        self.cache.tags.invalidate(s);
        let mac = self.node_mac(&node, addr, ctr);
        node.0[MAC_AT..MAC_AT + MAC].copy_from_slice(&mac);
        let t_mac = m.hash.run(t_ctr, NODE);
        self.node_writes += 1;
        Ok(m.port.write(addr, &node.0, t_mac))
    }
}

impl Encryption for Sgx {
    fn name(&self) -> &'static str {
        "sgx"
    }

    fn prefetch(&self, m: &Machine, addr: u64) {
        m.port.prefetch(addr);
        m.port.prefetch(self.node_addr(0, self.version_of(addr).0));
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        self.reads += 1;
        self.checked = None;
        let mut mac = [0u8; 8];
        let (tr, tm) = m.port.read_beside(addr, out, self.macs.addr(addr), &mut mac[..MAC], t);
        let (j, i) = self.version_of(addr);
        let (s, t_version, t_tree) = self.obtain(m, 0, j, t)?;
        let version = self.cache.nodes[s as usize].ctr(i);
        let t_mac = m.hash.run(tr.last.max(t_version), out.len() as u64);
        let initial = version == 0 && all_zero(out) && all_zero(&mac);
        if !initial && mac[..MAC] != self.line_mac(out, addr, version) {
            self.mac_failures += 1;
            return Err(IntegrityError::tampered(addr, format!("sgx line MAC mismatch (version {}): line, MAC or version was changed", version)));
        }
        let t_pad = m.aes.run(t_version, out.len() as u64);
        if !initial {
            self.apply_pad(addr, version, out);
        }
        let ready = tr.last.max(t_pad) + m.xor_latency;
        let checked = t_tree.max(t_mac.max(tm.last) + 1).max(ready);
        self.pad_exposed += t_pad.saturating_sub(tr.last);
        self.check_exposed += checked - ready;
        self.checked = Some(checked);
        Ok(ready)
    }

    fn take_checked(&mut self) -> Option<Cycle> {
        self.checked.take()
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        self.writes += 1;
        let (j, i) = self.version_of(addr);
        let (s, t_version, _) = self.obtain(m, 0, j, t)?;
        let version = self.cache.nodes[s as usize].ctr(i) + 1;
        if version > CTR_MAX {
            return Err(IntegrityError::exhausted(addr, "sgx: the line's version is exhausted (a new key would be needed; not modelled)"));
        }
        self.cache.nodes[s as usize].set_ctr(i, version);
        self.cache.dirty[s as usize] = true;
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        self.apply_pad(addr, version, ct);
        let t_x = m.aes.run(t_version, plain.len() as u64) + m.xor_latency;
        let mac = self.line_mac(ct, addr, version);
        let t_m = m.hash.run(t_x, plain.len() as u64);
        Ok(m.port.write_beside(addr, ct, self.macs.addr(addr), &mac, t_m))
    }

    /// Every dirty node goes to memory, the lowest level first (each write-back dirties its
    /// parent, written in a later round).
    fn write_back_cached(&mut self, m: &mut Machine, t: Cycle) -> Cycle {
        let mut done = t;
        for k in 0..self.levels.len() {
            for s in 0..self.cache.tags.slots() as u32 {
                let Some(a) = self.cache.tags.addr_of(s) else { continue };
                if !self.cache.dirty[s as usize] || self.node_of(a).0 != k {
                    continue;
                }
                // A node's parent is trusted (cached, or fetched and checked): no failure here
                // but a tamper of a parent that left the cache, which the next read reports.
                match self.write_back(m, s, t) {
                    Ok(d) => done = done.max(d),
                    Err(_) => {
                        self.cache.dirty[s as usize] = false;
                        self.cache.tags.invalidate(s);
                    }
                }
            }
        }
        done
    }

    fn drop_cached(&mut self) {
        for s in 0..self.cache.tags.slots() as u32 {
            debug_assert!(!self.cache.dirty[s as usize], "dropping a dirty node");
            self.cache.tags.invalidate(s);
            self.cache.dirty[s as usize] = false;
        }
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        let mut v = vec![Meta::new(MetaKind::Mac, self.macs.addr(addr), MAC as u64)];
        let mut j = self.version_of(addr).0;
        for k in 0..self.levels.len() {
            v.push(Meta::new(MetaKind::TreeLevel((self.top() - k) as u32), self.node_addr(k, j), NODE));
            j /= ARITY;
        }
        v
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.node_reads, self.node_writes) = (0, 0, 0, 0);
        (self.cache_hits, self.cache_misses, self.mac_failures, self.pad_exposed, self.check_exposed, self.refetches) = (0, 0, 0, 0, 0, 0);
    }

    fn space_overhead(&self) -> f64 {
        let nodes: u64 = self.levels.iter().map(|l| l.nodes).sum();
        (nodes * NODE) as f64 / (self.levels[0].nodes * ARITY * self.line) as f64 + self.macs.overhead()
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("sgx.reads", self.reads);
        out.int("sgx.writes", self.writes);
        out.int("sgx.levels", self.levels.len() as u64);
        out.int("sgx.node_reads", self.node_reads);
        out.int("sgx.node_writes", self.node_writes);
        out.int("sgx.cache_hits", self.cache_hits);
        out.int("sgx.cache_misses", self.cache_misses);
        out.rate("sgx.cache_hit_rate", self.cache_hits, self.cache_hits + self.cache_misses);
        out.rate("sgx.node_reads_per_read", self.node_reads, self.reads);
        out.int("sgx.mac_failures", self.mac_failures);
        out.int("sgx.pad_exposed_cycles", self.pad_exposed);
        out.int("sgx.check_exposed_cycles", self.check_exposed);
        out.int("sgx.refetches", self.refetches);
        out.float("sgx.space_overhead", self.space_overhead());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{params, pattern, stat};
    use crate::Engine;

    fn engine(extra: &[&str]) -> Engine {
        Engine::new(&params("none", "sgx", extra), 3).unwrap()
    }

    fn read(e: &mut Engine, a: u64) -> Result<Vec<u8>, IntegrityError> {
        let mut b = vec![0u8; 64];
        e.read(a, &mut b, 0)?;
        Ok(b)
    }

    #[test]
    fn lines_round_trip_through_a_small_cache_that_keeps_evicting_dirty_nodes() {
        // 512 B: 8 nodes for a tree of several levels over 2^20 lines; pages far apart so
        // every access walks a different path.
        for cache in ["512B", "32KiB"] {
            let mut e = engine(&[&format!("sgx.cache_bytes={}", cache)]);
            let addrs: Vec<u64> = (0..200u64).map(|k| (k * 0x9_1040) % (60 << 20) & !63).collect();
            for round in 0..3u64 {
                for (k, &a) in addrs.iter().enumerate() {
                    e.write(a, &pattern(round * 1000 + k as u64, 64), 0).unwrap();
                }
                if round == 1 {
                    e.flush(0).unwrap();
                }
            }
            for (k, &a) in addrs.iter().enumerate() {
                // The last write to an address wins (some addresses repeat).
                let last = addrs.iter().rposition(|&b| b == a).unwrap();
                assert_eq!(read(&mut e, a).unwrap(), pattern(2000 + last as u64, 64), "{} line {}", cache, k);
            }
            e.flush(0).unwrap();
            for (k, &a) in addrs.iter().enumerate() {
                let last = addrs.iter().rposition(|&b| b == a).unwrap();
                assert_eq!(read(&mut e, a).unwrap(), pattern(2000 + last as u64, 64), "{} line {} after a flush", cache, k);
            }
            assert!(stat(&e, "sgx.levels") >= 5.0);
        }
    }

    #[test]
    fn nothing_is_reported_tampered_after_flushes_through_a_cache_far_smaller_than_the_tree() {
        // The hostile probe's reproducers: every line of 1 MiB through 512 B of cache, and one
        // line per page over 16 MiB through the default cache, written, flushed, read back.
        // Making room wrote dirty nodes back while a fetched path was in hand, which then
        // went into the cache stale (a false tamper on a later read).
        for (size, cache, step, span) in [("1MiB", "512B", 64u64, 1u64 << 20), ("32MiB", "32KiB", 4096, 16 << 20)] {
            let p = params("none", "sgx", &[&format!("memory.size={}", size), &format!("sgx.cache_bytes={}", cache)]);
            let mut e = Engine::new(&p, 1).unwrap();
            for a in (0..span).step_by(step as usize) {
                e.write(a, &pattern(a, 64), 0).unwrap();
            }
            e.flush(0).unwrap();
            for a in (0..span).step_by(step as usize) {
                assert_eq!(read(&mut e, a).unwrap(), pattern(a, 64), "{} through {} at {:#x}", size, cache, a);
            }
            for a in (0..span).step_by(step as usize * 3) {
                e.write(a, &pattern(a + 1, 64), 0).unwrap();
            }
            e.flush(0).unwrap();
            e.check(0).unwrap();
            assert!(stat(&e, "sgx.refetches") > 0.0, "{}: the case was not exercised", cache);
        }
    }

    #[test]
    fn random_writes_and_reads_over_8_gib_read_back_what_was_written() {
        // Dirty nodes leaving the cache while their parents are not on chip: the path between
        // is updated in memory (the probe's failure: a node written back was read again, stale,
        // by a write-back nested in bringing its parent in).
        let mut e = engine(&["memory.size=8GiB", "sgx.cache_bytes=4KiB"]);
        let mut model = std::collections::HashMap::new();
        let mut x = 12345u64;
        for k in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = (x % (8 << 30)) & !63;
            e.write(a, &pattern(k, 64), 0).unwrap();
            model.insert(a, k);
            if k % 3 == 0 {
                let (&b, &kb) = model.iter().nth((x as usize / 7) % model.len().min(64)).unwrap();
                assert_eq!(read(&mut e, b).unwrap(), pattern(kb, 64), "{:#x} after {} writes", b, k);
            }
            if k % 5000 == 4999 {
                e.flush(0).unwrap();
            }
        }
        for (&a, &k) in model.iter().take(2000) {
            assert_eq!(read(&mut e, a).unwrap(), pattern(k, 64), "{:#x}", a);
        }
    }

    #[test]
    fn a_rolled_back_node_fails_under_the_newer_parent_counter() {
        let mut e = engine(&[]);
        e.write(0x4000, &pattern(1, 64), 0).unwrap();
        e.flush(0).unwrap();
        let old = e.untrusted().snapshot();
        e.write(0x4000, &pattern(2, 64), 0).unwrap();
        e.flush(0).unwrap();
        // Every piece of metadata put back as it was, with the line: only the root knows.
        let mut old_mem = crate::UntrustedMemory::new(e.untrusted().size());
        old_mem.restore(&old).unwrap();
        let mut addrs = vec![0x4000];
        addrs.extend(e.metadata_of(0x4000).iter().map(|m| m.addr));
        for a in addrs {
            let mut b = [0u8; 64];
            old_mem.read(a & !63, &mut b);
            e.untrusted().write(a & !63, &b);
        }
        let err = read(&mut e, 0x4000).unwrap_err();
        assert!(err.is_tamper() && err.what.contains("sgx tree node"), "{}", err);
    }

    #[test]
    fn the_check_waits_for_uncached_nodes_and_a_cached_path_costs_no_node_read() {
        let mut e = engine(&[]);
        e.write(0x8000, &pattern(3, 64), 0).unwrap();
        e.flush(0).unwrap();
        e.reset_stats();
        let o = e.access(0x8000, crate::AccessKind::Load, 0).unwrap();
        e.settle().unwrap();
        assert_eq!(stat(&e, "sgx.node_reads"), stat(&e, "sgx.levels"), "a cold read fetches its whole path");
        assert!(o.verified > o.ready, "{:?}", o);
        // The neighbour shares the version node, now cached: no node read.
        e.access(0x8040, crate::AccessKind::Load, 1000).unwrap();
        e.settle().unwrap();
        assert_eq!(stat(&e, "sgx.node_reads"), stat(&e, "sgx.levels"));
        assert_eq!(stat(&e, "sgx.cache_hits"), 1.0);
    }
}
