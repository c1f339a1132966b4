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
//! - **Counter organisations** (`sgx.counters`, `counters.rs`): the above is `mono`; the same
//!   tree is built from SC-64 nodes (`split64`), VAULT's 64/32/16-ary nodes (`vault`) or
//!   128-ary morphable counters (`morphable`), each level as many nodes as its arity needs.
//!   A counter that overflows gives the node's other children new counters: a version node's
//!   lines are re-encrypted and re-MACed, a tree node's children re-MACed, through the port,
//!   each checked under its old counter first (`overflowed`).
//! - **Line MACs**: H(K' ‖ ciphertext ‖ address ‖ version), 56 bits, stored beside the line
//!   (8 B per line) and read in its burst, or in its ECC bits (`sgx.mac_place = ecc`).
//! - **The metadata cache** (`sgx.cache_bytes`, `sgx.cache_ways`, LRU, write-back): nodes in it are
//!   trusted. A read fetches its version node and every uncached ancestor (issued together),
//!   checks them top-down from the first cached ancestor or the root, then checks the line's
//!   MAC; the data is usable once deciphered (the pad starts when the version is known) and
//!   verified when every MAC is. A write-back increments the version in the cached node,
//!   which becomes dirty; a dirty node leaving the cache increments its counter in its parent
//!   (brought into the cache, checked) and is written with its MAC under the new counter.
//! - **Where the trusted nodes are** (`sgx.meta`): in that metadata cache (`own`), or in the
//!   protected L2 beside the data (`l2`), as the seeds keep their trees and bonsai its nodes:
//!   they take L2 lines from data, a hit costs the L2's latency, and a node leaving the L2 dirty
//!   is written back as above (the engine hands it to `evict_meta`). A dirty node waiting in
//!   the L2's write buffer is still on chip and is used and updated there.
//! - **The MAC cache** (`sgx.mac_cache_bytes`, none by default): 64-B blocks of the MAC region
//!   (eight lines' MACs) in a cache of their own, as the peers keep one beside the counter
//!   cache. A read that finds its MAC there moves the line alone; one that misses reads the
//!   line and the MAC's block side by side. A write-back that finds the block updates it
//!   (written back when it leaves); one that misses writes its MAC beside the line as without
//!   the cache. A cached MAC need not be trusted: every use still checks it against the line
//!   and its version, so a block fetched with another line's tampered MAC in it changes
//!   nothing.
//!
//! Never-written memory is all zero: a node whose bytes and parent counter are all zero, and
//! a line whose version, bytes and MAC are zero, are that initial state.

use super::counters::{Format, PAYLOAD};
use super::{derive_key, xor_counter_pads, Encryption, EncryptionScheme, Seed};
use crate::decl::{param, Component, Coverage, Def, Detection, Guarantees, Kind, Role, stat};
use crate::error::IntegrityError;
use crate::layout::{all_zero, Meta, MetaKind, PerLine, MAX_LINE};
use crate::cache::LineKind;
use crate::machine::{Machine, Victim};
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use std::ops::Range;
use secmem_crypto::{Aes128, HashAlg, Hasher, MAX_HASH_BYTES};
use secmem_timing::{Cycle, Tags};

/// sgx's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "sgx",
    kind: Kind::Encryption,
    summary: "counter mode under a counter tree, as SGX's memory encryption engine: 56-bit versions 8 to a node, each node MACed with its parent's counter, roots on chip; a MAC per line; a cache of trusted nodes",
    source: "Gueron 2016 (SGX MEE); the counter-tree family",
    params: &[
        param("sgx.cache_bytes", Def::Str("32KiB"), "B", "metadata cache of tree nodes (trusted copies, LRU, write-back; unused with sgx.meta=l2); at least sgx.cache_ways nodes of 64 B"),
        param("sgx.cache_ways", Def::Int(8), "ways", "associativity of the node cache and of the MAC cache"),
        param("sgx.cache_latency", Def::Int(1), "cycles", "a hit in the node cache or the MAC cache: when the counter or MAC is known"),
        param("sgx.meta", Def::Str("own"), "own|l2", "where the trusted tree nodes are kept: own (the metadata cache above, sgx.cache_*) or l2 (the protected L2, competing with data for its lines, hits at l2.latency; needs l2.line=64 B)"),
        param("sgx.mac_cache_bytes", Def::Int(0), "B", "a separate cache of 64-B blocks of line MACs (8 MACs a block, LRU, write-back); 0: none, each MAC read and written beside its line; needs sgx.mac_place=memory"),
        param("sgx.hash", Def::Str("md5"), "md5|md5-rfc1321|sha1|sha256", "the keyed hash of the node and line MACs (truncated to 56 bits), on the hash engine"),
        param("sgx.mac_place", Def::Str("memory"), "memory|ecc", "where each line's 56-bit MAC is kept: memory (its own region, read beside the line) or ecc (the line's ECC bits: no transfer of its own, as Synergy, HPCA 2018)"),
        param("sgx.counters", Def::Str("mono"), "mono|split64|vault|morphable", "counter organisation of the nodes: mono (8 56-bit counters a node, SGX), split64 (SC-64 at every level: a 64-bit major, 64 6-bit minors), vault (split counters, arity 64/32/16 by level, 6/12/24-bit minors; Taassori 2018), morphable (128 counters a node, zero-counter-compressed or uncompressed, rebased; Saileshwar 2018)"),
    ],
    stats: &[
        stat("sgx.reads", "lines", "lines decrypted on their way in (L2 misses)"),
        stat("sgx.writes", "lines", "lines encrypted on their way out (write-backs)"),
        stat("sgx.levels", "levels", "levels of the counter tree"),
        stat("sgx.node_reads", "nodes", "tree nodes read from memory"),
        stat("sgx.node_writes", "nodes", "tree nodes written to memory"),
        stat("sgx.cache_hits", "nodes", "node lookups served on chip: by the node cache, or by the L2 with sgx.meta=l2"),
        stat("sgx.cache_misses", "nodes", "node lookups that went to memory"),
        stat("sgx.cache_hit_rate", "fraction", "sgx.cache_hits over lookups"),
        stat("sgx.mac_cache_hits", "MACs", "line MACs a read or write-back found in the MAC cache (no transfer of their own)"),
        stat("sgx.mac_cache_misses", "MACs", "line MACs the MAC cache did not hold (0 without one)"),
        stat("sgx.mac_cache_hit_rate", "fraction", "sgx.mac_cache_hits over MAC lookups"),
        stat("sgx.mac_block_reads", "blocks", "64-B MAC blocks read from memory into the MAC cache"),
        stat("sgx.mac_block_writes", "blocks", "dirty 64-B MAC blocks written back from the MAC cache"),
        stat("sgx.node_reads_per_read", "nodes", "sgx.node_reads / sgx.reads"),
        stat("sgx.mac_failures", "checks", "MAC checks that failed (tampering noticed)"),
        stat("sgx.pad_exposed_cycles", "cycles", "pad cycles after the data arrived, summed"),
        stat("sgx.check_exposed_cycles", "cycles", "MAC-check cycles after the data arrived, summed"),
        stat("sgx.refetches", "paths", "tree paths read again because write-backs met them while being placed"),
        stat("sgx.space_overhead", "fraction", "memory the tree and MACs take, per byte of data"),
        stat("sgx.walk_length", "nodes", "nodes fetched per node-cache miss (the walk up to the first cached ancestor or the root)"),
        stat("sgx.overflows", "events", "counters that overflowed (a node's children brought under new counters)"),
        stat("sgx.reencrypted_lines", "lines", "lines re-encrypted and re-MACed after overflows of version nodes"),
        stat("sgx.remaced_nodes", "nodes", "tree nodes re-MACed after overflows of their parents"),
        stat("sgx.counter_bytes", "B", "memory the version nodes (level 0, the encryption counters) take"),
        stat("sgx.tree_bytes", "B", "memory the tree above the version nodes takes (levels 1 up)"),
        stat("sgx.root_counters", "counters", "on-chip root registers"),
        stat("sgx.level#.arity", "children", "children a node of level # counts (0: version nodes, over lines)"),
        stat("sgx.level#.hits", "nodes", "walks of a read or write-back that found their node of level # on chip (and stopped there)"),
        stat("sgx.level#.misses", "nodes", "nodes of level # fetched on node-cache misses (walks that went past the level)"),
        stat("sgx.level#.read_bytes", "B", "bytes of level-# nodes read from memory"),
        stat("sgx.level#.write_bytes", "B", "bytes of level-# nodes written to memory"),
        stat("sgx.level#.overflows", "events", "counter overflows in nodes of level #"),
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

/// Bytes of a tree node (and of a block of the MAC cache); bytes of a MAC.
const NODE: u64 = 64;
const MAC: usize = 7;
/// Where a node's MAC sits, after its counters (`counters::PAYLOAD` bytes).
const MAC_AT: usize = PAYLOAD;
/// The largest 56-bit counter (a root register's).
const CTR_MAX: u64 = (1 << 56) - 1;

/// A tree node as stored: its counters (in its level's format), a 56-bit MAC, one byte unused.
#[derive(Clone, Copy)]
struct Node([u8; NODE as usize]);

/// One level of the tree: where its nodes are, how many, and how they pack their counters.
#[derive(Clone, Copy)]
struct Level {
    base: u64,
    nodes: u64,
    fmt: Format,
    arity: u64,
}

/// What a level's nodes did, for the per-level statistics.
#[derive(Clone, Copy, Default)]
struct LevelStats {
    hits: u64,
    misses: u64,
    reads: u64,
    writes: u64,
    overflows: u64,
}

/// The counter organisation of each level (`sgx.counters`): level 0 counts lines, level k
/// nodes of level k − 1.
fn format_of(counters: &str, k: usize) -> Format {
    match counters {
        "vault" => Format::split([64, 32, 16][k.min(2)]),
        "split64" => Format::split(64),
        "morphable" => Format::Morphable,
        _ => Format::Mono,
    }
}

/// Where a trusted node is: a slot of the node cache, a slot of the L2, or the L2's write
/// buffer (a dirty node on its way out, still on chip; found by its address).
#[derive(Clone, Copy)]
enum OnChip {
    Own(u32),
    L2(u32),
    Leaving(u64),
}

/// The metadata cache: trusted copies of nodes (empty with `sgx.meta=l2`).
struct NodeCache {
    tags: Tags,
    nodes: Vec<Node>,
    dirty: Vec<bool>,
}

/// The MAC cache: 64-B blocks of the MAC region (untrusted copies: each use checks its MAC).
struct MacCache {
    tags: Tags,
    blocks: Vec<[u8; NODE as usize]>,
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
    /// The line MACs are in the lines' ECC bits (`sgx.mac_place`): they arrive with the line.
    in_ecc: bool,
    cache: NodeCache,
    /// The trusted nodes are in the L2 (`sgx.meta=l2`), not in `cache`.
    in_l2: bool,
    mac_cache: Option<MacCache>,
    /// A hit on a node: in the node cache (`sgx.cache_latency`) or the L2 (its latency).
    latency: Cycle,
    /// A hit in the MAC cache (`sgx.cache_latency`).
    mac_latency: Cycle,
    covered: u64,
    /// When the last line read was verified, for `take_checked`.
    checked: Option<Cycle>,
    // statistics
    reads: u64,
    writes: u64,
    node_reads: u64,
    node_writes: u64,
    cache_hits: u64,
    cache_misses: u64,
    mac_hits: u64,
    mac_misses: u64,
    mac_block_reads: u64,
    mac_block_writes: u64,
    mac_failures: u64,
    pad_exposed: u64,
    check_exposed: u64,
    /// Paths read again because making room wrote dirty nodes back (each read is booked).
    refetches: u64,
    per_level: Vec<LevelStats>,
    /// Cache misses that fetched a path, and the nodes they fetched.
    walks: u64,
    walk_nodes: u64,
    overflows: u64,
    reencrypted_lines: u64,
    remaced_nodes: u64,
}

impl Sgx {
    pub fn new(p: &Params, m: &mut Machine, covered: u64, seed: Seed) -> Result<Sgx, ConfigError> {
        let alg = HashAlg::parse(&p.choice("sgx.hash", &["md5", "md5-rfc1321", "sha1", "sha256"])?).expect("a listed choice");
        let hasher = Hasher::new(alg, MAC).map_err(|e| ConfigError(format!("sgx.hash: {}", e)))?;
        let bytes = p.size("sgx.cache_bytes")?;
        let ways = p.u64_min("sgx.cache_ways", 1)?;
        if bytes < ways * NODE {
            return Err(ConfigError(format!("sgx.cache_bytes: {} B holds fewer than {} nodes of {} B", bytes, ways, NODE)));
        }
        let counters = p.choice("sgx.counters", &["mono", "split64", "vault", "morphable"])?;
        let tags = Tags::new(bytes, ways as usize, NODE).map_err(|e| ConfigError(format!("sgx.cache_bytes: {}", e)))?;
        let slots = tags.slots();
        let line = m.line();
        let in_l2 = p.choice("sgx.meta", &["own", "l2"])? == "l2";
        if in_l2 && line != NODE {
            return Err(ConfigError(format!("sgx.meta=l2: the L2's lines are {} B and sgx's tree nodes {} B; set l2.line={}", line, NODE, NODE)));
        }
        let cache_latency = p.u64_min("sgx.cache_latency", 1)?;
        let in_ecc = p.choice("sgx.mac_place", &["memory", "ecc"])? == "ecc";
        let mac_bytes = p.size_or_zero("sgx.mac_cache_bytes")?;
        let mac_cache = match mac_bytes {
            0 => None,
            _ if in_ecc => return Err(ConfigError("sgx.mac_cache_bytes: the MACs are in the ECC bits (sgx.mac_place=ecc) and arrive with their lines; a MAC cache has nothing to save".into())),
            _ => {
                let tags = Tags::new(mac_bytes, ways as usize, NODE).map_err(|e| ConfigError(format!("sgx.mac_cache_bytes: {}", e)))?;
                let n = tags.slots();
                Some(MacCache { tags, blocks: vec![[0; NODE as usize]; n], dirty: vec![false; n] })
            }
        };
        let macs = if in_ecc {
            let side = m.layout.ecc_per_line(Role::Macs, "sgx MACs", covered, MAC as u64 * 8).map_err(|e| ConfigError(format!("sgx.mac_place: {}", e)))?;
            m.port.attach_side(side, covered, line).map_err(|e| ConfigError(format!("sgx.mac_place=ecc: {}", e)))?;
            side
        } else {
            m.layout.per_line(Role::Macs, "sgx MACs", covered, 8)
        };
        let mut levels = Vec::new();
        let mut n = covered.div_ceil(line).div_ceil(format_of(&counters, 0).arity());
        loop {
            let k = levels.len();
            let fmt = format_of(&counters, k);
            let base = m.layout.alloc(Role::Counters, &format!("sgx tree level {}", k), n * NODE);
            levels.push(Level { base, nodes: n, fmt, arity: fmt.arity() });
            // The roots are on-chip registers: as many as a node of the next level counts.
            let up = format_of(&counters, k + 1).arity();
            if n <= up {
                break;
            }
            n = n.div_ceil(up);
        }
        Ok(Sgx {
            aes: Aes128::new(&derive_key(seed, 0x5698)),
            hasher,
            node_key: derive_key(seed, 0x5699),
            line_key: derive_key(seed, 0x569a),
            line,
            roots: vec![0; n as usize],
            per_level: vec![LevelStats::default(); levels.len()],
            levels,
            covered,
            macs,
            in_ecc,
            cache: NodeCache { tags, nodes: vec![Node([0; NODE as usize]); slots], dirty: vec![false; slots] },
            in_l2,
            mac_cache,
            latency: if in_l2 { m.l2_latency } else { cache_latency },
            mac_latency: cache_latency,
            checked: None,
            reads: 0,
            writes: 0,
            node_reads: 0,
            node_writes: 0,
            cache_hits: 0,
            cache_misses: 0,
            mac_hits: 0,
            mac_misses: 0,
            mac_block_reads: 0,
            mac_block_writes: 0,
            mac_failures: 0,
            pad_exposed: 0,
            check_exposed: 0,
            refetches: 0,
            walks: 0,
            walk_nodes: 0,
            overflows: 0,
            reencrypted_lines: 0,
            remaced_nodes: 0,
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
        (l / self.levels[0].arity, (l % self.levels[0].arity) as usize)
    }

    /// Node (k, j)'s parent's index in level k + 1 and its slot there.
    fn up(&self, k: usize, j: u64) -> (u64, usize) {
        let a = self.levels[k + 1].arity;
        (j / a, (j % a) as usize)
    }

    /// The counter node `n` of level `k` holds for its child `i`.
    fn ctr(&self, k: usize, n: &Node, i: usize) -> u64 {
        self.levels[k].fmt.get(&n.0, i)
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
    fn trusted_parent_ctr(&mut self, m: &mut Machine, k: usize, j: u64) -> Option<u64> {
        if k == self.top() {
            return Some(self.roots[j as usize]);
        }
        let (pj, i) = self.up(k, j);
        let at = self.on_chip(m, self.node_addr(k + 1, pj), true)?;
        Some(self.ctr(k + 1, &self.node_at(m, at), i))
    }

    /// Where the trusted copy of the node at `addr` is, if it is on chip (`touch`: as a use,
    /// for LRU).
    fn on_chip(&mut self, m: &mut Machine, addr: u64, touch: bool) -> Option<OnChip> {
        if !self.in_l2 {
            let s = self.cache.tags.find(addr)?;
            if touch {
                self.cache.tags.touch(s);
            }
            return Some(OnChip::Own(s));
        }
        m.counters.meta_accesses += 1;
        if let Some(s) = m.l2.tags.find(addr) {
            if touch {
                m.l2.tags.touch(s);
            }
            return Some(OnChip::L2(s));
        }
        if m.is_pending(addr) {
            return Some(OnChip::Leaving(addr));
        }
        m.counters.meta_misses += 1;
        None
    }

    fn node_at(&self, m: &mut Machine, at: OnChip) -> Node {
        let bytes = match at {
            OnChip::Own(s) => return self.cache.nodes[s as usize],
            OnChip::L2(s) => m.l2.bytes(s),
            OnChip::Leaving(a) => &m.pending_mut(a).expect("a node leaving the L2").bytes[..],
        };
        Node(bytes[..NODE as usize].try_into().expect("a 64-B line"))
    }

    /// The trusted copy at `at` becomes `n`, newer than memory's.
    fn set_node(&mut self, m: &mut Machine, at: OnChip, n: Node) {
        match at {
            OnChip::Own(s) => {
                self.cache.nodes[s as usize] = n;
                self.cache.dirty[s as usize] = true;
            }
            OnChip::L2(s) => {
                m.l2.bytes_mut(s)[..NODE as usize].copy_from_slice(&n.0);
                m.l2.set_dirty(s);
            }
            OnChip::Leaving(a) => {
                let v = m.pending_mut(a).expect("a node leaving the L2");
                v.bytes[..NODE as usize].copy_from_slice(&n.0);
                v.dirty = true;
            }
        }
    }

    /// The trusted copy at `at` now matches memory's.
    fn set_clean(&mut self, m: &mut Machine, at: OnChip) {
        match at {
            OnChip::Own(s) => self.cache.dirty[s as usize] = false,
            OnChip::L2(s) => m.l2.set_clean(s),
            OnChip::Leaving(a) => m.pending_mut(a).expect("a node leaving the L2").dirty = false,
        }
    }

    /// Whether `addr` is a node of the tree.
    fn is_node(&self, addr: u64) -> bool {
        self.levels.iter().any(|l| addr >= l.base && addr < l.base + l.nodes * NODE)
    }

    /// Node (k, j) in the cache, checked. Returns its slot, when its counters are known and
    /// when its check (and that of every ancestor fetched for it) is complete.
    fn obtain(&mut self, m: &mut Machine, k: usize, j: u64, t: Cycle) -> Result<(OnChip, Cycle, Cycle), IntegrityError> {
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
    fn try_obtain(&mut self, m: &mut Machine, k: usize, j: u64, t: Cycle) -> Result<Option<(OnChip, Cycle, Cycle)>, IntegrityError> {
        let addr = self.node_addr(k, j);
        if let Some(at) = self.on_chip(m, addr, true) {
            self.cache_hits += 1;
            self.per_level[k].hits += 1;
            // A node of the L2 still arriving is usable when it is there.
            let ready = match at {
                OnChip::L2(s) => (t + self.latency).max(m.l2.ready(s)),
                _ => t + self.latency,
            };
            return Ok(Some((at, ready, ready)));
        }
        // The node and every uncached ancestor below a cached one or the root, issued together.
        let mut path = vec![(k, j)];
        while let Some(&(pk, pj)) = path.last() {
            if pk == self.top() {
                break;
            }
            if self.on_chip(m, self.node_addr(pk + 1, self.up(pk, pj).0), false).is_some() {
                // The walk ends at a cached ancestor: a hit at its level.
                self.per_level[pk + 1].hits += 1;
                break;
            }
            path.push((pk + 1, self.up(pk, pj).0));
        }
        self.walks += 1;
        self.walk_nodes += path.len() as u64;
        let mut fetched = Vec::with_capacity(path.len());
        for &(pk, pj) in &path {
            let mut n = Node([0; NODE as usize]);
            let tr = m.port.read(self.node_addr(pk, pj), &mut n.0, t);
            self.node_reads += 1;
            self.cache_misses += 1;
            self.per_level[pk].misses += 1;
            self.per_level[pk].reads += 1;
            fetched.push((n, tr.last));
        }
        // Checked from the top: each node against the counter its (trusted) parent holds.
        let (tk, tj) = *path.last().unwrap();
        let mut parent_ctr = self.trusted_parent_ctr(m, tk, tj).expect("the top of the path has a trusted parent");
        let mut t_parent = t + self.latency;
        let mut verified = t + self.latency;
        let mut slot = None;
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
                let (ck, cj) = path[i - 1];
                parent_ctr = self.ctr(pk, &node, self.up(ck, cj).1);
                t_parent = arrived;
            }
            match self.insert(m, a, node, t, arrived)? {
                Some(s) => slot = Some(s),
                None => return Ok(None),
            }
        }
        Ok(Some((slot.expect("a path of at least its node"), fetched[0].1, verified)))
    }

    /// Put `node` (clean, just read and checked, arrived at `arrived`) on chip at `addr`. In
    /// the node cache, if its place holds a dirty node, that node is written back instead and
    /// None returned: the write-back bumps a parent's counter and may fetch, change or write
    /// back any node, this one included, so the copy in hand may be stale and must be read
    /// again. In the L2 what it displaces waits in the write buffer, written back later.
    fn insert(&mut self, m: &mut Machine, addr: u64, node: Node, t: Cycle, arrived: Cycle) -> Result<Option<OnChip>, IntegrityError> {
        if self.in_l2 {
            return Ok(Some(OnChip::L2(m.insert(addr, &node.0, LineKind::Meta, false, arrived))));
        }
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
                Ok(Some(OnChip::Own(s)))
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
        let mut known = t + self.latency;
        while ck != self.top() && self.on_chip(m, self.node_addr(ck + 1, self.up(ck, cj).0), false).is_none() {
            let (pk, pj) = (ck + 1, self.up(ck, cj).0);
            let mut n = Node([0; NODE as usize]);
            let tr = m.port.read(self.node_addr(pk, pj), &mut n.0, t);
            self.node_reads += 1;
            self.per_level[pk].reads += 1;
            known = known.max(m.hash.run(tr.last, NODE) + 1);
            chain.push((pk, pj, n));
            (ck, cj) = (pk, pj);
        }
        // Check the fetched ancestors from the top, against the trusted holder.
        let mut pc = self.trusted_parent_ctr(m, ck, cj).expect("the top of the chain has a trusted holder");
        for idx in (0..chain.len()).rev() {
            let (pk, pj, n) = chain[idx];
            let a = self.node_addr(pk, pj);
            if !(pc == 0 && all_zero(&n.0)) && n.0[MAC_AT..MAC_AT + MAC] != self.node_mac(&n, a, pc) {
                self.mac_failures += 1;
                return Err(IntegrityError::tampered(a, format!("sgx tree node (level {} of {}) does not match its MAC under its parent's counter", pk, self.levels.len())));
            }
            let below = if idx == 0 { j } else { chain[idx - 1].1 };
            pc = self.ctr(pk, &n, self.up(pk - 1, below).1);
        }
        // Increment from the bottom: (k, j)'s counter, then each fetched ancestor's in its
        // parent. An overflow brings the node's other children under their new counters.
        let exhausted = |a: u64| IntegrityError::exhausted(a, "sgx: a tree counter is exhausted (a new key would be needed; not modelled)");
        let mut below = (k, j);
        let mut first = None;
        for idx in 0..chain.len() {
            let (pk, pj, old) = chain[idx];
            let i = self.up(below.0, below.1).1;
            let mut n = old;
            let r = self.levels[pk].fmt.bump(&mut n.0, i).map_err(|_| exhausted(self.node_addr(below.0, below.1)))?;
            chain[idx].2 = n;
            if let Some(r) = r {
                self.overflowed(m, pk, pj, &old, &n, r, i, known)?;
            }
            first.get_or_insert(self.ctr(pk, &n, i));
            below = (pk, pj);
        }
        let held = if ck == self.top() {
            let c = self.roots[cj as usize];
            if c >= CTR_MAX {
                return Err(exhausted(self.node_addr(ck, cj)));
            }
            self.roots[cj as usize] = c + 1;
            c + 1
        } else {
            let (hj, i) = self.up(ck, cj);
            // Nothing entered the L2 since the walk above: the holder is still where it was.
            let at = self.on_chip(m, self.node_addr(ck + 1, hj), false).expect("the holder is on chip");
            let old = self.node_at(m, at);
            let mut n = old;
            let r = self.levels[ck + 1].fmt.bump(&mut n.0, i).map_err(|_| exhausted(self.node_addr(ck, cj)))?;
            self.set_node(m, at, n);
            if let Some(r) = r {
                self.overflowed(m, ck + 1, hj, &old, &n, r, i, known)?;
            }
            self.ctr(ck + 1, &n, i)
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
            self.per_level[pk].writes += 1;
            let below = if idx == 0 { j } else { chain[idx - 1].1 };
            pc = self.ctr(pk, &n, self.up(pk - 1, below).1);
        }
        Ok((first.unwrap_or(held), known))
    }

    /// Node (k, j) overflowed (`old` before, `new` after): every child in `r` but `skip` (the
    /// one whose increment caused it, handled by the caller) is brought under its new counter
    /// through the port from `t` — a line re-encrypted and re-MACed (level 0), a node re-MACed.
    /// Each is checked under its old counter first, so an overflow launders no tampering.
    /// Returns when the last is written.
    #[allow(clippy::too_many_arguments)]
    fn overflowed(&mut self, m: &mut Machine, k: usize, j: u64, old: &Node, new: &Node, r: Range<usize>, skip: usize, t: Cycle) -> Result<Cycle, IntegrityError> {
        self.overflows += 1;
        self.per_level[k].overflows += 1;
        let arity = self.levels[k].arity;
        let mut done = t;
        for c in r {
            if c == skip {
                continue;
            }
            let child = j * arity + c as u64;
            let (oc, nc) = (self.ctr(k, old, c), self.ctr(k, new, c));
            if k == 0 {
                let a = child * self.line;
                if a < self.covered {
                    done = done.max(self.reencrypt_line(m, a, oc, nc, t)?);
                }
            } else if child < self.levels[k - 1].nodes {
                done = done.max(self.remac_node(m, k - 1, child, oc, nc, t)?);
            }
        }
        Ok(done)
    }

    /// Line `a`, under version `old` in memory, re-encrypted and re-MACed under `new`.
    fn reencrypt_line(&mut self, m: &mut Machine, a: u64, old: u64, new: u64, t: Cycle) -> Result<Cycle, IntegrityError> {
        let mut buf = [0u8; MAX_LINE];
        let line = &mut buf[..self.line as usize];
        let mut mac = [0u8; MAC];
        let t_in = self.fetch_line(m, a, line, &mut mac, t)?;
        let initial = old == 0 && all_zero(line) && all_zero(&mac);
        if !initial && mac != self.line_mac(line, a, old) {
            self.mac_failures += 1;
            return Err(IntegrityError::tampered(a, format!("sgx line MAC mismatch (version {}) found by a counter overflow's re-encryption", old)));
        }
        let t_chk = m.hash.run(t_in, self.line);
        if !initial {
            self.apply_pad(a, old, line);
        }
        let t_pad = m.aes.run(t_in, self.line);
        self.apply_pad(a, new, line);
        let mac = self.line_mac(line, a, new);
        let t_mac = m.hash.run(t_pad + m.xor_latency, self.line);
        self.reencrypted_lines += 1;
        Ok(self.store_line(m, a, line, &mac, t_mac.max(t_chk)))
    }

    /// Node (k, j), MACed in memory under its parent's counter `old` (or trusted in the cache),
    /// written with its MAC under `new`.
    fn remac_node(&mut self, m: &mut Machine, k: usize, j: u64, old: u64, new: u64, t: Cycle) -> Result<Cycle, IntegrityError> {
        let a = self.node_addr(k, j);
        let (mut n, t_in) = match self.on_chip(m, a, false) {
            Some(at) => {
                // The trusted copy goes out now: memory then matches it, under the new counter.
                self.set_clean(m, at);
                (self.node_at(m, at), t)
            }
            None => {
                let mut n = Node([0; NODE as usize]);
                let tr = m.port.read(a, &mut n.0, t);
                self.node_reads += 1;
                self.per_level[k].reads += 1;
                if !(old == 0 && all_zero(&n.0)) && n.0[MAC_AT..MAC_AT + MAC] != self.node_mac(&n, a, old) {
                    self.mac_failures += 1;
                    return Err(IntegrityError::tampered(a, format!("sgx tree node (level {} of {}) does not match its MAC under its parent's counter", k, self.levels.len())));
                }
                (n, m.hash.run(tr.last, NODE))
            }
        };
        let mac = self.node_mac(&n, a, new);
        n.0[MAC_AT..MAC_AT + MAC].copy_from_slice(&mac);
        let t_mac = m.hash.run(t_in, NODE);
        self.node_writes += 1;
        self.per_level[k].writes += 1;
        self.remaced_nodes += 1;
        Ok(m.port.write(a, &n.0, t_mac))
    }

    /// Line `a` and its MAC from memory into `out` and `mac`: when the line and when the MAC
    /// arrived (with the line's own beats when it is in the ECC bits).
    fn fetch(&mut self, m: &mut Machine, a: u64, out: &mut [u8], mac: &mut [u8; MAC], t: Cycle) -> Result<(Cycle, Cycle), IntegrityError> {
        if self.in_ecc {
            let tr = m.port.read(a, out, t);
            if !m.port.read_side(a, mac) {
                return Err(IntegrityError::refused(a, "sgx: the line's ECC bits are not beside it"));
            }
            return Ok((tr.last, tr.last));
        }
        let ma = self.macs.addr(a);
        let Some(mc) = self.mac_cache.as_mut() else {
            let (tr, tm) = m.port.read_beside(a, out, ma, mac, t);
            return Ok((tr.last, tm.last));
        };
        let (block, at) = (ma & !(NODE - 1), (ma % NODE) as usize);
        if let Some(s) = mc.tags.find(block) {
            mc.tags.touch(s);
            self.mac_hits += 1;
            mac.copy_from_slice(&mc.blocks[s as usize][at..at + MAC]);
            return Ok((m.port.read(a, out, t).last, t + self.mac_latency));
        }
        self.mac_misses += 1;
        let tr = m.port.read(a, out, t);
        let mut bytes = [0u8; NODE as usize];
        let tm = m.port.read(block, &mut bytes, t);
        self.mac_block_reads += 1;
        let s = mc.tags.victim(block);
        if let (Some(old), true) = (mc.tags.addr_of(s), mc.dirty[s as usize]) {
            m.port.write(old, &mc.blocks[s as usize], t);
            self.mac_block_writes += 1;
        }
        mc.tags.install(s, block);
        mc.blocks[s as usize] = bytes;
        mc.dirty[s as usize] = false;
        mac.copy_from_slice(&bytes[at..at + MAC]);
        Ok((tr.last, tm.last))
    }

    fn fetch_line(&mut self, m: &mut Machine, a: u64, out: &mut [u8], mac: &mut [u8; MAC], t: Cycle) -> Result<Cycle, IntegrityError> {
        let (tr, tm) = self.fetch(m, a, out, mac, t)?;
        Ok(tr.max(tm))
    }

    /// Line `a` (ciphertext) and its MAC to memory at `t`: when written.
    fn store_line(&mut self, m: &mut Machine, a: u64, ct: &[u8], mac: &[u8; MAC], t: Cycle) -> Cycle {
        if self.in_ecc {
            let done = m.port.write(a, ct, t);
            let sent = m.port.write_side(a, mac);
            debug_assert!(sent, "the line just written carries its side bits");
            return done;
        }
        let ma = self.macs.addr(a);
        if let Some(mc) = self.mac_cache.as_mut() {
            // A write-back that misses does not fetch the block: its MAC goes beside the line.
            let (block, at) = (ma & !(NODE - 1), (ma % NODE) as usize);
            match mc.tags.find(block) {
                Some(s) => {
                    mc.tags.touch(s);
                    self.mac_hits += 1;
                    mc.blocks[s as usize][at..at + MAC].copy_from_slice(mac);
                    mc.dirty[s as usize] = true;
                    return m.port.write(a, ct, t);
                }
                None => self.mac_misses += 1,
            }
        }
        m.port.write_beside(a, ct, ma, mac, t)
    }

    /// Every dirty block of the MAC cache to memory from `t`: when the last is written.
    fn write_back_macs(&mut self, m: &mut Machine, t: Cycle) -> Cycle {
        let mut done = t;
        let Some(mc) = self.mac_cache.as_mut() else { return done };
        for s in 0..mc.tags.slots() as u32 {
            if let (Some(a), true) = (mc.tags.addr_of(s), mc.dirty[s as usize]) {
                done = done.max(m.port.write(a, &mc.blocks[s as usize], t));
                mc.dirty[s as usize] = false;
                self.mac_block_writes += 1;
            }
        }
        done
    }

    /// The dirty node in slot `s` leaves the chip: its counter in its parent (or root
    /// register) is incremented and it is written with its MAC under the new counter.
    fn write_back(&mut self, m: &mut Machine, s: u32, t: Cycle) -> Result<Cycle, IntegrityError> {
        let Some(addr) = self.cache.tags.addr_of(s) else { return Ok(t) };
        let node = self.cache.nodes[s as usize];
        let done = self.write_node(m, addr, node, t)?;
        self.cache.dirty[s as usize] = false;
        self.cache.tags.invalidate(s);
        Ok(done)
    }

    /// Node `node` (the trusted copy of the node at `addr`, leaving the chip) to memory: its
    /// counter in its parent (or root register) is incremented and it is written with its MAC
    /// under the new counter. When it is written.
    fn write_node(&mut self, m: &mut Machine, addr: u64, mut node: Node, t: Cycle) -> Result<Cycle, IntegrityError> {
        let (k, j) = self.node_of(addr);
        let (ctr, t_ctr) = self.bump_parent(m, k, j, t)?;
        let mac = self.node_mac(&node, addr, ctr);
        node.0[MAC_AT..MAC_AT + MAC].copy_from_slice(&mac);
        let t_mac = m.hash.run(t_ctr, NODE);
        self.node_writes += 1;
        self.per_level[k].writes += 1;
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
        let mut mac = [0u8; MAC];
        let (tr_last, tm_last) = self.fetch(m, addr, out, &mut mac, t)?;
        let (j, i) = self.version_of(addr);
        let (at, t_version, t_tree) = self.obtain(m, 0, j, t)?;
        let version = self.ctr(0, &self.node_at(m, at), i);
        let t_mac = m.hash.run(tr_last.max(t_version), out.len() as u64);
        let initial = version == 0 && all_zero(out) && all_zero(&mac);
        if !initial && mac != self.line_mac(out, addr, version) {
            self.mac_failures += 1;
            return Err(IntegrityError::tampered(addr, format!("sgx line MAC mismatch (version {}): line, MAC or version was changed", version)));
        }
        let t_pad = m.aes.run(t_version, out.len() as u64);
        if !initial {
            self.apply_pad(addr, version, out);
        }
        let ready = tr_last.max(t_pad) + m.xor_latency;
        let checked = t_tree.max(t_mac.max(tm_last) + 1).max(ready);
        self.pad_exposed += t_pad.saturating_sub(tr_last);
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
        let (at, t_version, _) = self.obtain(m, 0, j, t)?;
        let old = self.node_at(m, at);
        let mut n = old;
        let r = self.levels[0].fmt.bump(&mut n.0, i).map_err(|_| IntegrityError::exhausted(addr, "sgx: the line's version is exhausted (a new key would be needed; not modelled)"))?;
        let version = self.ctr(0, &n, i);
        self.set_node(m, at, n);
        let done = match r {
            Some(r) => self.overflowed(m, 0, j, &old, &n, r, i, t_version)?,
            None => t_version,
        };
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        self.apply_pad(addr, version, ct);
        let t_x = m.aes.run(t_version, plain.len() as u64) + m.xor_latency;
        let mac = self.line_mac(ct, addr, version);
        let t_m = m.hash.run(t_x, plain.len() as u64);
        Ok(done.max(self.store_line(m, addr, ct, &mac, t_m)))
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
        // Last: the write-backs above may re-MAC lines (overflows) into cached blocks.
        done.max(self.write_back_macs(m, t))
    }

    /// A node leaving the L2 (`sgx.meta=l2`) goes to memory as one leaving the node cache does.
    fn evict_meta(&mut self, m: &mut Machine, v: &Victim) -> Option<Result<Cycle, IntegrityError>> {
        if !self.in_l2 || !self.is_node(v.addr) {
            return None;
        }
        if !v.dirty {
            return Some(Ok(v.t));
        }
        let (ws, start) = m.write_buf.acquire(v.t);
        let node = Node(v.bytes[..NODE as usize].try_into().expect("a 64-B line"));
        Some(self.write_node(m, v.addr, node, start).map(|done| {
            m.write_buf.hold_until(ws, done);
            start
        }))
    }

    fn drop_cached(&mut self) {
        for s in 0..self.cache.tags.slots() as u32 {
            debug_assert!(!self.cache.dirty[s as usize], "dropping a dirty node");
            self.cache.tags.invalidate(s);
            self.cache.dirty[s as usize] = false;
        }
        if let Some(mc) = self.mac_cache.as_mut() {
            for s in 0..mc.tags.slots() as u32 {
                debug_assert!(!mc.dirty[s as usize], "dropping a dirty MAC block");
                mc.tags.invalidate(s);
                mc.dirty[s as usize] = false;
            }
        }
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        if addr >= self.covered {
            // A node of the tree: what protects it is on every path through it, which a
            // line's metadata already lists.
            return Vec::new();
        }
        let mut v = vec![Meta::new(MetaKind::Mac, self.macs.addr(addr), MAC as u64)];
        let mut j = self.version_of(addr).0;
        for k in 0..self.levels.len() {
            v.push(Meta::new(MetaKind::TreeLevel((self.top() - k) as u32), self.node_addr(k, j), NODE));
            if k < self.top() {
                j = self.up(k, j).0;
            }
        }
        v
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.node_reads, self.node_writes) = (0, 0, 0, 0);
        (self.mac_hits, self.mac_misses, self.mac_block_reads, self.mac_block_writes) = (0, 0, 0, 0);
        (self.cache_hits, self.cache_misses, self.mac_failures, self.pad_exposed, self.check_exposed, self.refetches) = (0, 0, 0, 0, 0, 0);
        (self.walks, self.walk_nodes, self.overflows, self.reencrypted_lines, self.remaced_nodes) = (0, 0, 0, 0, 0);
        self.per_level.iter_mut().for_each(|l| *l = LevelStats::default());
    }

    fn space_overhead(&self) -> f64 {
        let nodes: u64 = self.levels.iter().map(|l| l.nodes).sum();
        (nodes * NODE) as f64 / (self.levels[0].nodes * self.levels[0].arity * self.line) as f64 + if self.in_ecc { 0.0 } else { self.macs.overhead() }
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
        out.int("sgx.mac_cache_hits", self.mac_hits);
        out.int("sgx.mac_cache_misses", self.mac_misses);
        out.rate("sgx.mac_cache_hit_rate", self.mac_hits, self.mac_hits + self.mac_misses);
        out.int("sgx.mac_block_reads", self.mac_block_reads);
        out.int("sgx.mac_block_writes", self.mac_block_writes);
        out.rate("sgx.node_reads_per_read", self.node_reads, self.reads);
        out.int("sgx.mac_failures", self.mac_failures);
        out.int("sgx.pad_exposed_cycles", self.pad_exposed);
        out.int("sgx.check_exposed_cycles", self.check_exposed);
        out.int("sgx.refetches", self.refetches);
        out.float("sgx.space_overhead", self.space_overhead());
        out.rate("sgx.walk_length", self.walk_nodes, self.walks);
        out.int("sgx.overflows", self.overflows);
        out.int("sgx.reencrypted_lines", self.reencrypted_lines);
        out.int("sgx.remaced_nodes", self.remaced_nodes);
        out.int("sgx.counter_bytes", self.levels[0].nodes * NODE);
        out.int("sgx.tree_bytes", self.levels[1..].iter().map(|l| l.nodes * NODE).sum());
        out.int("sgx.root_counters", self.roots.len() as u64);
        for (k, l) in self.per_level.iter().enumerate() {
            out.int(&format!("sgx.level{}.arity", k), self.levels[k].arity);
            out.int(&format!("sgx.level{}.hits", k), l.hits);
            out.int(&format!("sgx.level{}.misses", k), l.misses);
            out.int(&format!("sgx.level{}.read_bytes", k), l.reads * NODE);
            out.int(&format!("sgx.level{}.write_bytes", k), l.writes * NODE);
            out.int(&format!("sgx.level{}.overflows", k), l.overflows);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{flip, lines_in_memory, params, pattern, replay_line_and_mac, stat, xorshift};
    use crate::layout::MetaKind;
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
            let a = (xorshift(&mut x) % (8 << 30)) & !63;
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

    /// Line `a` written and flushed twice; then the line and every piece of its metadata (its
    /// MAC and whole tree path) put back as they were after the first: only the root knows.
    fn roll_back_with_path(e: &mut Engine, a: u64) {
        e.write(a, &pattern(1, 64), 0).unwrap();
        e.flush(0).unwrap();
        let old = e.untrusted().snapshot();
        e.write(a, &pattern(2, 64), 0).unwrap();
        e.flush(0).unwrap();
        let mut old_mem = crate::UntrustedMemory::new(e.untrusted().size());
        old_mem.restore(&old).unwrap();
        let mut addrs = vec![a];
        addrs.extend(e.metadata_of(a).iter().map(|m| m.addr));
        for x in addrs {
            let mut b = [0u8; 64];
            old_mem.read(x & !63, &mut b);
            e.untrusted().write(x & !63, &b);
        }
    }

    #[test]
    fn a_rolled_back_node_fails_under_the_newer_parent_counter() {
        let mut e = engine(&[]);
        roll_back_with_path(&mut e, 0x4000);
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
        let levels = stat(&e, "sgx.levels") as usize;
        for k in 0..levels {
            assert_eq!((stat(&e, &format!("sgx.level{}.misses", k)), stat(&e, &format!("sgx.level{}.read_bytes", k))), (1.0, 64.0), "level {}", k);
        }
        // The neighbour shares the version node, now cached: no node read.
        e.access(0x8040, crate::AccessKind::Load, 1000).unwrap();
        e.settle().unwrap();
        assert_eq!(stat(&e, "sgx.node_reads"), stat(&e, "sgx.levels"));
        assert_eq!(stat(&e, "sgx.cache_hits"), 1.0);
        assert_eq!(stat(&e, "sgx.level0.hits"), 1.0);
        // The next version node has the same parent: one node read, a hit at level 1.
        e.access(0x8200, crate::AccessKind::Load, 2000).unwrap();
        e.settle().unwrap();
        assert_eq!((stat(&e, "sgx.level0.misses"), stat(&e, "sgx.level1.hits"), stat(&e, "sgx.level1.misses")), (2.0, 1.0, 1.0));
        assert_eq!(stat(&e, "sgx.walk_length"), (levels as f64 + 1.0) / 2.0);
    }

    /// A line's raw bytes in memory (its ciphertext).
    fn raw(e: &mut Engine, a: u64) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        e.untrusted().read(a, &mut b);
        b
    }

    #[test]
    fn vault_and_morphable_round_trip_random_writes_through_a_cache_far_smaller_than_the_tree() {
        for counters in ["vault", "morphable"] {
            let mut e = engine(&[&format!("sgx.counters={}", counters), "sgx.cache_bytes=1KiB"]);
            let mut model = std::collections::HashMap::new();
            let mut x = 99u64;
            for k in 0..6000u64 {
                let a = hot_and_scattered(&mut x, k);
                e.write(a, &pattern(k, 64), 0).unwrap();
                model.insert(a, k);
                if k % 7 == 0 {
                    e.flush(0).unwrap();
                }
            }
            all_read_back(&mut e, &model, counters);
            assert!(stat(&e, "sgx.overflows") > 0.0, "{}: no overflow exercised", counters);
        }
    }

    /// The random-write tests' next address (`x` a xorshift state): a quarter of the writes
    /// on 128 neighbouring lines, a quarter on one of them (its counter outgrows its
    /// neighbours' and overflows), the rest anywhere in 60 MiB.
    fn hot_and_scattered(x: &mut u64, k: u64) -> u64 {
        let r = xorshift(x);
        match k % 4 {
            0 => (r % 128) * 64,
            1 => 0,
            _ => (r % (60 << 20)) & !63,
        }
    }

    /// Every line of `model` (address -> pattern index) reads back, and memory checks whole.
    fn all_read_back(e: &mut Engine, model: &std::collections::HashMap<u64, u64>, counters: &str) {
        for (&a, &k) in model.iter() {
            assert_eq!(read(e, a).unwrap(), pattern(k, 64), "{} at {:#x}", counters, a);
        }
        e.flush(0).unwrap();
        e.check(0).unwrap();
    }

    /// Every line of the group at `base` written once, then its first line `hot` more times,
    /// each write flushed: the version node's counters overflow. Returns the engine.
    fn hot_group(counters: &str, group: u64, hot: u64) -> Engine {
        hot_group_with(counters, group, hot, "sgx.mac_place=memory")
    }

    fn hot_group_with(counters: &str, group: u64, hot: u64, extra: &str) -> Engine {
        let mut e = engine(&[&format!("sgx.counters={}", counters), extra]);
        for k in 0..group {
            e.write(0x10_0000 + k * 64, &pattern(k, 64), 0).unwrap();
        }
        e.flush(0).unwrap();
        for r in 0..hot {
            e.write(0x10_0000, &pattern(1000 + r, 64), 0).unwrap();
            e.flush(0).unwrap();
        }
        e
    }

    #[test]
    fn a_version_overflow_reencrypts_the_group_through_the_port_and_every_line_reads_back() {
        // vault: 64 lines a node, 6-bit minors: the 64th write-back of line 0 overflows once.
        // morphable: 128 ones fit ZCC; line 0 climbs to 4 (uncompressed), to 8 (its half is
        // rebased by 1), then its half overflows at every 8th write-back: 3 in 30.
        for (counters, group, hot, overflows) in [("vault", 64u64, 70u64, 1.0), ("morphable", 128, 30, 3.0)] {
            let before = {
                let mut e = hot_group(counters, group, 0);
                raw(&mut e, 0x10_0000 + 5 * 64)
            };
            let mut e = hot_group(counters, group, hot);
            assert_eq!(stat(&e, "sgx.overflows"), overflows, "{}", counters);
            assert_eq!(stat(&e, "sgx.level0.overflows"), overflows, "{}", counters);
            // Each overflow re-encrypts the others of the node's span (vault: all 64; morphable: a half).
            assert_eq!(stat(&e, "sgx.reencrypted_lines"), 63.0 * overflows, "{}", counters);
            assert_ne!(raw(&mut e, 0x10_0000 + 5 * 64), before, "{}: line 5 was not re-encrypted in memory", counters);
            for k in 0..group {
                let want = if k == 0 { pattern(1000 + hot - 1, 64) } else { pattern(k, 64) };
                assert_eq!(read(&mut e, 0x10_0000 + k * 64).unwrap(), want, "{} line {}", counters, k);
            }
            if counters == "morphable" {
                // The other half kept its counters: line 100 was never re-encrypted.
                let mut e0 = hot_group(counters, group, 0);
                assert_eq!(raw(&mut e, 0x10_0000 + 100 * 64), raw(&mut e0, 0x10_0000 + 100 * 64));
            }
        }
    }

    #[test]
    fn an_overflow_does_not_launder_a_line_changed_before_it() {
        for (counters, group, hot) in [("vault", 64u64, 70u64), ("morphable", 128, 30)] {
            let mut e = hot_group(counters, group, 0);
            let a = 0x10_0000 + 9 * 64;
            let mut b = [0u8; 1];
            e.untrusted().read(a + 3, &mut b);
            e.untrusted().write(a + 3, &[b[0] ^ 0x10]);
            let mut caught = false;
            for r in 0..hot {
                e.write(0x10_0000, &pattern(r, 64), 0).unwrap();
                if let Err(err) = e.flush(0) {
                    assert!(err.is_tamper(), "{}", err);
                    caught = true;
                    break;
                }
            }
            assert!(caught, "{}: the overflow re-encrypted a tampered line", counters);
            assert!(read(&mut e, a).unwrap_err().is_tamper(), "{}", counters);
        }
    }

    #[test]
    fn a_tree_node_overflow_remacs_its_children_and_the_tree_stays_consistent() {
        // Level 1 (morphable: 128 version nodes a node; vault: 32) counts write-backs of
        // version nodes: one line in each of its groups written and flushed once, then the
        // first group's again and again. A small cache exercises children that are not on
        // chip (read, checked, re-MACed); a large one children that are.
        for (counters, children, group_bytes, rounds) in [("morphable", 128u64, 8192u64, 30u64), ("vault", 32, 4096, 4100)] {
            for cache in ["512B", "32KiB"] {
                let mut e = engine(&[&format!("sgx.counters={}", counters), &format!("sgx.cache_bytes={}", cache)]);
                let base = 0x200_0000;
                for g in 0..children {
                    e.write(base + g * group_bytes, &pattern(g, 64), 0).unwrap();
                }
                e.flush(0).unwrap();
                for r in 0..rounds {
                    e.write(base, &pattern(500 + r, 64), 0).unwrap();
                    // Siblings on chip when their parent overflows (the flush drops them after).
                    for g in 1..5 {
                        assert_eq!(read(&mut e, base + g * group_bytes).unwrap(), pattern(g, 64));
                    }
                    e.flush(0).unwrap();
                }
                assert!(stat(&e, "sgx.level1.overflows") >= 1.0, "{} {}", counters, cache);
                assert!(stat(&e, "sgx.remaced_nodes") >= (children - 1) as f64, "{} {}: {}", counters, cache, stat(&e, "sgx.remaced_nodes"));
                for g in 0..children {
                    let want = if g == 0 { pattern(500 + rounds - 1, 64) } else { pattern(g, 64) };
                    assert_eq!(read(&mut e, base + g * group_bytes).unwrap(), want, "{} {} group {}", counters, cache, g);
                }
            }
        }
    }

    #[test]
    fn a_rolled_back_version_node_with_its_whole_path_is_caught_in_every_organisation() {
        for counters in ["mono", "vault", "morphable"] {
            let mut e = engine(&[&format!("sgx.counters={}", counters)]);
            roll_back_with_path(&mut e, 0x4000);
            let err = read(&mut e, 0x4000).unwrap_err();
            assert!(err.is_tamper(), "{}: {}", counters, err);
        }
    }

    #[test]
    fn tree_size_and_height_for_16_gib_follow_the_arities() {
        // 16 GiB = 2^28 lines. mono: 2^25 version nodes, then 2^22, 2^19, 2^16, 2^13, 2^10,
        // 2^7, 2^4, 2 nodes, 2 root registers. vault: 2^22 (64-ary), 2^17 (32), 2^13, 2^9,
        // 2^5 (16), 2 nodes, 2 roots. split64: 2^22, 2^16, 2^10, 2^4 nodes, 16 roots.
        // morphable: 2^21, 2^14, 2^7 nodes, 128 roots. Saileshwar et al. (MICRO 2018): the
        // tree above the counters is 4 MB with SC-64 and 1 MB with morphable counters.
        for (counters, levels, counter_bytes, tree_nodes, roots) in [
            ("mono", 9.0, (1u64 << 25) * 64, (1u64 << 22) + (1 << 19) + (1 << 16) + (1 << 13) + (1 << 10) + (1 << 7) + (1 << 4) + 2, 2.0),
            ("vault", 6.0, (1 << 22) * 64, (1 << 17) + (1 << 13) + (1 << 9) + (1 << 5) + 2, 2.0),
            ("split64", 4.0, (1 << 22) * 64, (1 << 16) + (1 << 10) + (1 << 4), 16.0),
            ("morphable", 3.0, (1 << 21) * 64, (1 << 14) + (1 << 7), 128.0),
        ] {
            let e = engine(&[&format!("sgx.counters={}", counters), "memory.size=16GiB"]);
            assert_eq!(stat(&e, "sgx.levels"), levels, "{}", counters);
            assert_eq!(stat(&e, "sgx.counter_bytes"), counter_bytes as f64, "{}", counters);
            assert_eq!(stat(&e, "sgx.tree_bytes"), (tree_nodes * 64) as f64, "{}", counters);
            assert_eq!(stat(&e, "sgx.root_counters"), roots, "{}", counters);
        }
    }

    #[test]
    fn line_macs_in_ecc_bits_still_catch_tampering_and_replay_and_cost_no_transfer() {
        let a = 0x8_0040;
        let mut traffic = Vec::new();
        for place in ["memory", "ecc"] {
            for counters in ["mono", "morphable"] {
                let opt = [format!("sgx.mac_place={}", place), format!("sgx.counters={}", counters)];
                let mk = || engine(&[&opt[0], &opt[1]]);
                let mut e = mk();
                lines_in_memory(&mut e, 0, 256);
                for k in 0..256u64 {
                    assert_eq!(read(&mut e, k * 64).unwrap(), pattern(k, 64), "{} line {}", place, k);
                }
                if counters == "mono" {
                    traffic.push((stat(&e, "mem.read_bytes"), stat(&e, "mem.reads")));
                }
                let mac = e.metadata_of(a).iter().find(|m| m.kind == MetaKind::Mac).unwrap().addr;
                for (what, at) in [("line", a + 5), ("MAC", mac + 2)] {
                    let mut e = mk();
                    e.write(a, &pattern(1, 64), 0).unwrap();
                    e.flush(0).unwrap();
                    flip(&mut e, at);
                    assert!(read(&mut e, a).unwrap_err().is_tamper(), "{} {}: a changed {} was read", place, counters, what);
                }
                let mut e = mk();
                replay_line_and_mac(&mut e, a, mac, MAC);
                assert!(read(&mut e, a).unwrap_err().is_tamper(), "{} {}: a replayed line and MAC were read", place, counters);
            }
            // Overflows re-MAC the group's lines in the ECC bits too.
            let mut e = hot_group_with("morphable", 128, 30, &format!("sgx.mac_place={}", place));
            assert_eq!(stat(&e, "sgx.overflows"), 3.0);
            for k in 1..128u64 {
                assert_eq!(read(&mut e, 0x10_0000 + k * 64).unwrap(), pattern(k, 64), "{} line {}", place, k);
            }
        }
        // Beside the line the MAC lengthens the line's burst by its 7 B (one more 8-B beat); in
        // ECC bits it adds nothing.
        let ((mem_bytes, mem_reads), (ecc_bytes, ecc_reads)) = (traffic[0], traffic[1]);
        assert_eq!(mem_reads, ecc_reads);
        assert_eq!(mem_bytes - ecc_bytes, 256.0 * 8.0, "{} vs {} B", mem_bytes, ecc_bytes);
    }

    /// Bytes and transfers of memory reads so far.
    fn traffic(e: &Engine) -> (f64, f64) {
        (stat(e, "mem.read_bytes"), stat(e, "mem.reads"))
    }

    #[test]
    fn a_mac_cache_hit_saves_the_macs_transfer_and_tampering_is_still_caught() {
        let mac_cache = "sgx.mac_cache_bytes=4KiB";
        let mut cost = Vec::new();
        for extra in ["sgx.mac_cache_bytes=0", mac_cache] {
            let mut e = engine(&[extra]);
            lines_in_memory(&mut e, 0x8_0000, 16);
            // Line 0 brings its version node (and, with the cache, its MAC block); line 1
            // shares both.
            assert_eq!(read(&mut e, 0x8_0000).unwrap(), pattern(0, 64));
            let before = traffic(&e);
            assert_eq!(read(&mut e, 0x8_0040).unwrap(), pattern(1, 64));
            let after = traffic(&e);
            cost.push((after.0 - before.0, after.1 - before.1));
            if extra == mac_cache {
                assert_eq!((stat(&e, "sgx.mac_cache_misses"), stat(&e, "sgx.mac_cache_hits"), stat(&e, "sgx.mac_block_reads")), (1.0, 1.0, 1.0));
            } else {
                assert_eq!(stat(&e, "sgx.mac_cache_hits") + stat(&e, "sgx.mac_cache_misses"), 0.0);
            }
        }
        // Beside its line a MAC lengthens the burst by one 8-B beat; from the MAC cache the
        // line moves alone.
        assert_eq!(cost, vec![(72.0, 1.0), (64.0, 1.0)]);

        // Tampering while the MAC block is on chip: the line, its MAC in memory before the
        // block came in, and a replayed line with its MAC.
        let a = 0x8_0040;
        let mk = || {
            let mut e = engine(&[mac_cache]);
            lines_in_memory(&mut e, 0x8_0000, 8);
            e
        };
        let mac = mk().metadata_of(a).iter().find(|m| m.kind == MetaKind::Mac).unwrap().addr;
        let mut e = mk();
        read(&mut e, 0x8_0000).unwrap();
        flip(&mut e, a + 5);
        assert!(read(&mut e, a).unwrap_err().is_tamper(), "a changed line checked against a cached MAC was read");
        assert_eq!(stat(&e, "sgx.mac_cache_hits"), 1.0);
        let mut e = mk();
        flip(&mut e, mac + 2);
        read(&mut e, 0x8_0000).unwrap();
        assert!(read(&mut e, a).unwrap_err().is_tamper(), "a changed MAC fetched with its neighbour's was accepted");
        let mut e = mk();
        replay_line_and_mac(&mut e, a, mac, MAC);
        e.reset_stats();
        read(&mut e, 0x8_0000).unwrap();
        assert!(read(&mut e, a).unwrap_err().is_tamper(), "a replayed line and MAC (its block brought in by a neighbour) were read");
        assert_eq!((stat(&e, "sgx.mac_block_reads"), stat(&e, "sgx.mac_cache_hits")), (1.0, 1.0));
    }

    #[test]
    fn lines_round_trip_through_a_mac_cache_that_keeps_evicting_dirty_blocks() {
        // 512 B: 8 blocks of 8 MACs in one set; write-backs that hit it leave dirty blocks,
        // which later misses evict; overflows re-MAC lines through it.
        let mut e = engine(&["sgx.mac_cache_bytes=512B", "sgx.cache_bytes=1KiB"]);
        let mut model = std::collections::HashMap::new();
        let mut x = 7u64;
        for k in 0..6000u64 {
            xorshift(&mut x);
            let a = if k % 2 == 0 { (x % 4096) * 64 } else { (x % (60 << 20)) & !63 };
            e.write(a, &pattern(k, 64), 0).unwrap();
            model.insert(a, k);
            if k % 4 == 0 {
                let (&b, &kb) = model.iter().nth((x as usize / 3) % model.len()).unwrap();
                assert_eq!(read(&mut e, b).unwrap(), pattern(kb, 64), "{:#x} after {} writes", b, k);
            }
            if k % 1000 == 999 {
                e.flush(0).unwrap();
            }
        }
        e.flush(0).unwrap();
        for (&a, &k) in model.iter() {
            assert_eq!(read(&mut e, a).unwrap(), pattern(k, 64), "{:#x}", a);
        }
        e.check(0).unwrap();
        for k in ["sgx.mac_cache_hits", "sgx.mac_cache_misses", "sgx.mac_block_reads", "sgx.mac_block_writes"] {
            assert!(stat(&e, k) > 0.0, "{}: not exercised", k);
        }
        let mut e = hot_group_with("morphable", 128, 30, "sgx.mac_cache_bytes=512B");
        assert_eq!(stat(&e, "sgx.overflows"), 3.0);
        for k in 0..128u64 {
            let want = if k == 0 { pattern(1029, 64) } else { pattern(k, 64) };
            assert_eq!(read(&mut e, 0x10_0000 + k * 64).unwrap(), want, "line {}", k);
        }
    }

    #[test]
    fn a_mac_cache_is_refused_with_macs_in_ecc_bits_and_when_it_is_no_cache() {
        for (extra, says) in [
            (["sgx.mac_cache_bytes=4KiB", "sgx.mac_place=ecc"], "ECC bits"),
            (["sgx.mac_cache_bytes=100", "sgx.mac_place=memory"], "sgx.mac_cache_bytes"),
            (["sgx.cache_ways=0", "sgx.mac_place=memory"], "sgx.cache_ways"),
        ] {
            match Engine::new(&params("none", "sgx", &extra), 1) {
                Err(e) => assert!(e.0.contains(says), "{:?}: {}", extra, e.0),
                Ok(_) => panic!("{:?} was accepted", extra),
            }
        }
    }

    #[test]
    fn macs_in_ecc_bits_are_refused_beside_another_scheme_that_keeps_its_own_there() {
        let p = params("tdx", "sgx", &["sgx.mac_place=ecc"]);
        match Engine::new(&p, 1) {
            Err(e) => assert!(e.0.contains("ECC bits"), "{}", e.0),
            Ok(_) => {} // tdx does not pair with sgx: nothing to refuse
        }
    }

    const IN_L2: &str = "sgx.meta=l2";

    #[test]
    fn nodes_in_a_small_l2_round_trip_random_writes_with_overflows_in_every_organisation() {
        // 2 KiB of L2 (32 lines, 2 ways) for data and nodes: nodes keep leaving it dirty, some
        // are used while they wait in its write buffer, and hot lines overflow their counters.
        for counters in ["mono", "split64", "vault", "morphable"] {
            let mut e = engine(&[&format!("sgx.counters={}", counters), IN_L2, "l2.size=2KiB", "l2.ways=2"]);
            let mut model = std::collections::HashMap::new();
            let mut x = 31u64;
            for k in 0..5000u64 {
                let a = hot_and_scattered(&mut x, k);
                e.write(a, &pattern(k, 64), 0).unwrap();
                model.insert(a, k);
                if k % 3 == 0 {
                    let (&b, &kb) = model.iter().nth((x as usize / 5) % model.len()).unwrap();
                    assert_eq!(read(&mut e, b).unwrap(), pattern(kb, 64), "{} {:#x} after {} writes", counters, b, k);
                }
                if k % 7 == 0 {
                    e.flush(0).unwrap();
                }
            }
            all_read_back(&mut e, &model, counters);
            assert!(stat(&e, "l2.meta_writebacks") > 0.0, "{}: no node left the L2 dirty", counters);
            if counters != "mono" {
                assert!(stat(&e, "sgx.overflows") > 0.0, "{}: no overflow exercised", counters);
            }
        }
    }

    #[test]
    fn nodes_in_the_l2_overflow_and_reencrypt_as_in_their_own_cache() {
        for (counters, group, hot, overflows) in [("vault", 64u64, 70u64, 1.0), ("morphable", 128, 30, 3.0)] {
            let mut e = hot_group_with(counters, group, hot, IN_L2);
            assert_eq!(stat(&e, "sgx.level0.overflows"), overflows, "{}", counters);
            assert_eq!(stat(&e, "sgx.reencrypted_lines"), 63.0 * overflows, "{}", counters);
            for k in 0..group {
                let want = if k == 0 { pattern(1000 + hot - 1, 64) } else { pattern(k, 64) };
                assert_eq!(read(&mut e, 0x10_0000 + k * 64).unwrap(), want, "{} line {}", counters, k);
            }
        }
    }

    #[test]
    fn nodes_in_the_l2_meet_every_attack_as_declared_and_a_rolled_back_path_is_caught() {
        for counters in ["mono", "split64", "vault", "morphable"] {
            let c = format!("sgx.counters={}", counters);
            let p = params("none", "sgx", &[&c, IN_L2, "l2.size=32KiB"]);
            let cells = crate::adversary::attack_all(&p, 3).unwrap();
            assert!(cells.iter().filter(|c| c.applicable).count() >= 4, "{}", counters);
            for c in cells.iter().chain(&crate::adversary::attack_encryption(&p, 5).unwrap()) {
                assert!(c.ok(), "{}: {}: noticed {:?}, declared {:?}: {}", counters, c.attack, c.when, c.declared, c.detail);
            }
            // A version node replayed with its whole path and the line and MAC it counted.
            let mut e = engine(&[&c, IN_L2]);
            roll_back_with_path(&mut e, 0x4000);
            assert!(read(&mut e, 0x4000).unwrap_err().is_tamper(), "{}", counters);
        }
    }

    #[test]
    fn nodes_in_the_l2_take_lines_from_data_and_keep_their_per_level_statistics() {
        // 8 KiB of L2 (128 lines in 16 sets) and 128 data lines, 9 lines apart: 8 a set, each
        // under a version node of its own. Read twice. With the nodes in their own cache the second pass hits; in the L2 the
        // 128 version nodes and their ancestors displaced data, which misses again.
        let mut misses = Vec::new();
        for meta in ["sgx.meta=own", IN_L2] {
            let mut e = engine(&[meta, "l2.size=8KiB", "l2.ways=8", "sgx.cache_bytes=32KiB"]);
            for pass in 0..2 {
                e.reset_stats();
                for k in 0..128u64 {
                    read(&mut e, 0x40_0000 + k * 9 * 64).unwrap();
                }
                if pass == 1 {
                    misses.push((stat(&e, "l2.misses"), stat(&e, "l2.meta_accesses")));
                }
            }
        }
        assert_eq!(misses[0], (0.0, 0.0), "own cache: data was displaced or the L2 held nodes");
        assert!(misses[1].0 >= 64.0 && misses[1].1 > 0.0, "nodes in the L2 displaced too little data: {:?}", misses[1]);

        // With room for everything, the walks are the same wherever the nodes are: line 0
        // misses its whole path, line 1 finds its version node on chip, a line 8 MiB away
        // walks up to their common ancestor. (16 ways: every level's first node and both
        // data lines fall in one set, the tree's levels being aligned.)
        let mut per_level = Vec::new();
        for meta in ["sgx.meta=own", IN_L2] {
            let mut e = engine(&[meta, "l2.size=256KiB", "l2.ways=16"]);
            for a in [0u64, 64, 8 << 20] {
                read(&mut e, a).unwrap();
            }
            let levels = stat(&e, "sgx.levels") as usize;
            assert_eq!(stat(&e, "sgx.level0.hits"), 1.0, "{}", meta);
            assert_eq!(stat(&e, "sgx.level0.read_bytes"), 128.0, "{}", meta);
            assert_eq!(stat(&e, &format!("sgx.level{}.misses", levels - 1)), 1.0, "{}: the top node is fetched once", meta);
            let keys = ["hits", "misses", "read_bytes", "write_bytes"];
            per_level.push((0..levels).flat_map(|k| keys.map(|x| stat(&e, &format!("sgx.level{}.{}", k, x)))).chain([stat(&e, "sgx.walk_length")]).collect::<Vec<_>>());
        }
        assert_eq!(per_level[0], per_level[1]);
    }

    #[test]
    fn nodes_in_the_l2_need_its_lines_to_be_nodes() {
        match Engine::new(&params("none", "sgx", &[IN_L2, "l2.line=128B"]), 1) {
            Err(e) => assert!(e.0.contains("l2.line=64"), "{}", e.0),
            Ok(_) => panic!("sgx.meta=l2 with 128-B L2 lines was accepted"),
        }
    }
}
