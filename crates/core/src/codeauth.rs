//! The authentication unit of seed 001 in the timing model: every instruction block that
//! misses the protected cache level on a fetch is checked against its tag before the core may
//! execute it (§4.1, §6 Figs. 3-5). The tags and their layout are `secmem-codeauth`'s; this
//! module is the processor side.
//!
//! On a fetch miss (`Engine::access` with `AccessKind::Fetch`), after the encryption and
//! integrity schemes have delivered the block's plaintext:
//! - the pad R_T = SC(K_T, A, I) is generated during the memory latency: ready
//!   `pad_latency` cycles after the request (§4.1; Table 5 gives the cipher's cycles);
//! - the block is hashed incrementally as its words arrive, so the digest is done when the
//!   last word is in, and one more cycle XORs the pad and compares (§4.1: "1 clock cycle");
//! - the tag comes from the authentication cache (§8: "a small, 16-entry authentication cache
//!   implemented as a FIFO buffer for holding recently accessed tags that takes approximately
//!   320 B"; Table 7: 320 B of on-chip memory for tags): 16 tags, 256 B of 128-bit tags (the
//!   rest of the 320 B their addresses) or, on a miss there, its whole tag line is read through
//!   the timed port from the tag table in untrusted memory (§6: "a memory block is the smallest
//!   amount of information transferred ... independent of the type of information") and its
//!   tags enter the FIFO (`auth.cache_holds = "lines"` keeps whole tag lines instead: 16 of
//!   them hold up to 4 KiB at 256-B blocks);
//! - the block is usable only once the tag matched (late start, §6 footnote 5); with
//!   `auth.early_start` the core may start on the block when it arrives and the check
//!   completes behind it (the hypothetical of §7 Fig. 8).
//!
//! The tag is computed by `secmem_codeauth::Tagger` on the block's real bytes; a mismatch is
//! an `IntegrityError` for that fetch. Blocks already in the cache are trusted (§7 footnote 9).
//!
//! Where tags come from. The tag table lies after the protected memory (TP is its base) with
//! one tag per line of program memory, in address order (the layout of §6 with one segment
//! covering physical memory: the engine sees physical addresses, so A is the physical block
//! address where the paper binds the virtual one). `Engine::sign_code` is the loader/TSR path:
//! tags made from code bytes the caller knows (a program image). A trace carries no program
//! image, so by default a line fetched before anyone signed it is signed by the processor the
//! first time it is brought in (the install-time variant of §3, per line and lazily; tags made
//! then are not charged, as installation happens before the run). From then on every fetch of
//! it is checked; `codeauth.sign_unsigned = false` refuses unsigned lines instead.

use crate::decl::{Component, Def, Kind, Param, Role, param, stat};
use crate::error::IntegrityError;
use crate::layout::{Meta, MetaKind, MAX_LINE};
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::port::Adversary;
use crate::stats::Stats;
use secmem_codeauth::{Keys, PadKind, Tag, TagLayout, Tagger, Width};
use secmem_timing::Cycle;
use std::collections::{HashSet, VecDeque};

/// Parameters of the unit, shared by both pad generators.
/// (Its keys are `auth.*`: `codeauth` itself names the scheme.)
pub const UNIT: Component = Component {
    name: "auth",
    kind: Kind::Machine,
    summary: "the authentication unit and authentication cache of code authentication (seed 001)",
    source: "001 §4.1, §6, §8",
    params: &[
        param("auth.width", Def::Int(128), "bits", "tag width w: 128 (§7), 80 (§5's minimum) or 64; a tag takes a 16-B slot (8 B for 64)"),
        param("auth.cache_entries", Def::Int(16), "entries", "authentication cache: a FIFO of this many entries (§8: 16)"),
        param("auth.cache_holds", Def::Str("tags"), "tags|lines", "what an entry holds: one tag (§8, Table 7: 16 128-bit tags, 256 B, ~320 B with their addresses); lines: a whole tag line (16 of them up to 4 KiB at 256-B blocks)"),
        param("auth.finish_latency", Def::Int(1), "cycles", "after the last word: the last hash step, XOR with the pad and compare (§4.1: one cycle)"),
        param("auth.early_start", Def::Bool(false), "bool", "the core may start on a fetched block before its tag matched (§7 Fig. 8's comparison); false: late start, as the scheme requires (§6 fn. 5)"),
        param("auth.serial_tag_fetch", Def::Bool(false), "bool", "a tag line missing from the authentication cache is requested once the block is in (one memory access after the other, §8's simulation: a tag miss costs a memory latency); false: requested with the block"),
        param("auth.program_id", Def::Int(1), "id", "the program id I bound into every tag (32 bits)"),
        param("auth.sign_unsigned", Def::Bool(true), "bool", "a line fetched before anything signed it is signed then (a trace has no program image; install-time variant of §3); false: refused"),
    ],
    stats: &[
        stat("codeauth.checks", "lines", "instruction lines whose tag was checked"),
        stat("codeauth.cache_hits", "checks", "checks whose tag was in the tag cache"),
        stat("codeauth.cache_misses", "checks", "checks that read their tag from memory"),
        stat("codeauth.cache_miss_rate", "fraction", "codeauth.cache_misses / codeauth.checks"),
        stat("codeauth.tag_bytes", "B", "tag bytes read from memory"),
        stat("codeauth.cache_bytes", "B", "bytes the tag cache holds: its entries times a tag (auth.cache_holds = tags) or a tag line (lines)"),
        stat("codeauth.wait_cycles", "cycles", "cycles fetches waited for their check, summed"),
        stat("codeauth.wait_per_check", "cycles", "codeauth.wait_cycles / codeauth.checks"),
        stat("codeauth.signed_lazily", "lines", "code lines signed on first use (not in a signed image)"),
        stat("codeauth.space_overhead", "fraction", "memory the tags take, per byte of code"),
    ],
};

const TRIVIUM_PARAMS: &[Param] = &[param(
    "pr-trivium.pad_latency",
    Def::Int(23),
    "cycles",
    "request to the pad: Trivium of Gaj et al. [28], 16 B of key stream (001 Table 5)",
)];
const AES_PARAMS: &[Param] = &[param(
    "pr-aes.pad_latency",
    Def::Int(11),
    "cycles",
    "request to the pad: AES of Satoh [37], 16 B of key stream (001 Table 5)",
)];

pub const NONE: Component = Component {
    name: "none",
    kind: Kind::CodeAuth,
    summary: "instruction fetches are not authenticated",
    source: "—",
    params: &[],
    stats: &[],
};
pub const PR_TRIVIUM: Component = Component {
    name: "pr-trivium",
    kind: Kind::CodeAuth,
    summary: "PR-hash tags with a Trivium pad: T = PR_KU(L‖I‖A) ⊕ Trivium(K_T, A‖I), checked on every fetch miss",
    source: "001 §4, §6, Table 4",
    params: TRIVIUM_PARAMS,
    stats: &[],
};
pub const PR_AES: Component = Component {
    name: "pr-aes",
    kind: Kind::CodeAuth,
    summary: "PR-hash tags with an AES-CTR pad (001 §8.2's alternative)",
    source: "001 §4, §8.2, Table 4",
    params: AES_PARAMS,
    stats: &[],
};

/// A registered code authentication choice: its declaration and the pad generator it uses
/// (none: fetches are not authenticated).
pub struct CodeAuthScheme {
    pub decl: &'static Component,
    pub pad: Option<PadKind>,
}

/// Every code authentication choice, `none` first.
pub const SCHEMES: &[CodeAuthScheme] = &[
    CodeAuthScheme { decl: &NONE, pad: None },
    CodeAuthScheme { decl: &PR_TRIVIUM, pad: Some(PadKind::Trivium) },
    CodeAuthScheme { decl: &PR_AES, pad: Some(PadKind::Aes) },
];

const NAMES: [&str; SCHEMES.len()] = crate::decl::registry_names!(SCHEMES);

/// The names `codeauth` accepts, in registration order.
pub const CODEAUTH_SCHEMES: &[&str] = &NAMES;

#[derive(Default, Clone, Debug)]
struct Counters {
    checks: u64,
    cache_hits: u64,
    cache_misses: u64,
    tag_bytes: u64,
    /// Cycles from the block's arrival to its tag's match, summed: what late start costs.
    wait_cycles: u64,
    signed_lazily: u64,
}

/// The authentication unit: its keys (built into the processor), the tag layout, the
/// authentication cache and the record of which lines have tags.
pub struct CodeAuth {
    name: &'static str,
    tagger: Tagger,
    width: Width,
    layout: TagLayout,
    pid: u32,
    pad_latency: Cycle,
    finish: Cycle,
    early_start: bool,
    serial_tag_fetch: bool,
    sign_unsigned: bool,
    entries: usize,
    /// Entries hold whole tag lines (else single tags).
    holds_lines: bool,
    /// Entries held on chip, oldest first: the address of the tag line (or of the tag) and its
    /// bytes.
    cache: VecDeque<(u64, [u8; MAX_LINE])>,
    /// Lines whose tag is in the table (what the loader or the processor signed).
    signed: HashSet<u64>,
    c: Counters,
}

impl CodeAuth {
    /// The unit `codeauth` names (none for `none`), its tag table placed in `m`'s layout
    /// after everything else; `seed` derives the processor's keys.
    pub fn build(p: &Params, m: &mut Machine, data_size: u64, seed: crate::encryption::Seed) -> Result<Option<CodeAuth>, ConfigError> {
        let chosen = p.choice("codeauth", CODEAUTH_SCHEMES)?;
        let scheme = SCHEMES.iter().find(|s| s.decl.name == chosen).expect("a registered name");
        let (name, Some(pad)) = (scheme.decl.name, scheme.pad) else { return Ok(None) };
        let bits = p.u64_min("auth.width", 1)?;
        let width = Width::from_bits(bits as u32).map_err(|e| ConfigError(format!("auth.width: {}", e)))?;
        let block = m.line() as u32;
        let tp_params = secmem_codeauth::Params::new(pad, width, block).map_err(|e| ConfigError(format!("l2.line: {}", e)))?;
        let keys = Keys::derive(&seed.material());
        let tagger = Tagger::new(&keys, tp_params).map_err(|e| ConfigError(e.to_string()))?;
        let blocks = data_size / block as u64;
        let tp = m.layout.alloc(Role::CodeTags, "code authentication tags", blocks * width.slot() as u64);
        let layout = TagLayout::new(block, width.slot(), tp, &[(0, blocks)]).map_err(|e| ConfigError(format!("codeauth: {}", e)))?;
        let pid = p.u64_min("auth.program_id", 1)?;
        let pid = u32::try_from(pid).map_err(|_| ConfigError(format!("auth.program_id: {} does not fit 32 bits", pid)))?;
        let entries = p.u64_min("auth.cache_entries", 1)? as usize;
        if entries > 1 << 16 {
            return Err(ConfigError(format!("auth.cache_entries: {} is more than 65536", entries)));
        }
        let holds_lines = p.choice("auth.cache_holds", &["tags", "lines"])? == "lines";
        Ok(Some(CodeAuth {
            name,
            tagger,
            width,
            layout,
            pid,
            pad_latency: p.u64_min(&format!("{}.pad_latency", name), 0)?,
            finish: p.u64_min("auth.finish_latency", 0)?,
            early_start: p.bool("auth.early_start")?,
            serial_tag_fetch: p.bool("auth.serial_tag_fetch")?,
            sign_unsigned: p.bool("auth.sign_unsigned")?,
            entries,
            holds_lines,
            cache: VecDeque::with_capacity(entries),
            signed: HashSet::new(),
            c: Counters::default(),
        }))
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// TP: where the tag table starts.
    pub fn tp(&self) -> u64 {
        self.layout.tp()
    }

    pub fn program_id(&self) -> u32 {
        self.pid
    }

    /// Where the tag of `line` lies in untrusted memory.
    pub fn tag_addr(&self, line: u64) -> Option<u64> {
        self.layout.tag_addr(line)
    }

    /// Whether the core may start on a block before its check completes.
    pub fn early_start(&self) -> bool {
        self.early_start
    }

    /// Write the tag of the block `bytes` at `line` into the table (and into a cached copy of
    /// its tag line, so the cache never holds a tag older than memory's). Untimed: signing
    /// happens before the program runs.
    pub fn sign(&mut self, m: &mut Machine, line: u64, bytes: &[u8]) -> Result<(), IntegrityError> {
        let tag = self.tagger.tag(bytes, self.pid, line).map_err(|e| IntegrityError::refused(line, e.to_string()))?;
        let at = self.layout.tag_addr(line).ok_or_else(|| IntegrityError::refused(line, "outside program memory: no tag slot"))?;
        let slot = tag.to_slot(self.width);
        m.port.untrusted(Adversary(())).write(at, &slot);
        let (key, off) = self.entry_of(at, m.line());
        if let Some((_, cached)) = self.cache.iter_mut().find(|(a, _)| *a == key) {
            cached[off..off + slot.len()].copy_from_slice(&slot);
        }
        self.signed.insert(line);
        Ok(())
    }

    /// Check the block `plain` fetched at `line`: requested at `t_req`, its plaintext complete
    /// at `t_data`. Returns when its tag matched.
    pub fn check(&mut self, m: &mut Machine, line: u64, plain: &[u8], t_req: Cycle, t_data: Cycle) -> Result<Cycle, IntegrityError> {
        if !self.signed.contains(&line) {
            if !self.sign_unsigned {
                return Err(IntegrityError::refused(line, "code authentication: block is not signed (no tag)"));
            }
            self.sign(m, line, plain)?;
            self.c.signed_lazily += 1;
        }
        self.c.checks += 1;
        let b = m.line();
        let at = self.layout.tag_addr(line).ok_or_else(|| IntegrityError::refused(line, "outside program memory: no tag slot"))?;
        let tline = at - at % b;
        let (key, off) = self.entry_of(at, b);
        let (stored, tag_ready) = match self.cache.iter().position(|(a, _)| *a == key) {
            Some(i) => {
                self.c.cache_hits += 1;
                (Tag::from_slot(&self.cache[i].1[off..], self.width), t_req)
            }
            None => {
                self.c.cache_misses += 1;
                let mut buf = [0u8; MAX_LINE];
                // Requested with the block (the port queues it behind the block's transfer), or
                // after it.
                let t_tag = if self.serial_tag_fetch { t_data } else { t_req };
                let tr = m.port.read(tline, &mut buf[..b as usize], t_tag);
                self.c.tag_bytes += b;
                self.fill(tline, &buf[..b as usize], at);
                (Tag::from_slot(&buf[(at - tline) as usize..], self.width), tr.last)
            }
        };
        let pad_ready = t_req + self.pad_latency;
        let done = t_data.max(pad_ready).max(tag_ready) + self.finish;
        self.c.wait_cycles += done - t_data;
        self.tagger.verify(plain, self.pid, line, stored, Some(at)).map_err(|e| IntegrityError::tampered(line, format!("code authentication: {}", e)))?;
        Ok(done)
    }

    /// The cache entry holding the tag at `at` (lines of `b` bytes) and the tag's offset in it.
    fn entry_of(&self, at: u64, b: u64) -> (u64, usize) {
        if self.holds_lines {
            (at - at % b, (at % b) as usize)
        } else {
            (at, 0)
        }
    }

    /// A tag line `bytes` at `tline` came in for the tag at `at`: into the FIFO as one entry,
    /// or as its tags, the one wanted last (newest) and, when the line has more tags than the
    /// cache has entries, the ones after it first.
    fn fill(&mut self, tline: u64, bytes: &[u8], at: u64) {
        let entries = self.entries;
        let push = |cache: &mut VecDeque<(u64, [u8; MAX_LINE])>, key: u64, data: &[u8]| {
            if cache.len() == entries {
                cache.pop_front();
            }
            let mut e = [0u8; MAX_LINE];
            e[..data.len()].copy_from_slice(data);
            cache.push_back((key, e));
        };
        if self.holds_lines {
            push(&mut self.cache, tline, bytes);
            return;
        }
        let slot = self.width.slot() as u64;
        let n = bytes.len() as u64 / slot;
        let want = (at - tline) / slot;
        // The wanted tag's successors in the line (wrapping), oldest first, then the wanted one.
        let others = (1..n).map(|k| (want + k) % n).take(entries - 1).collect::<Vec<_>>();
        for i in others.into_iter().rev().chain(std::iter::once(want)) {
            let key = tline + i * slot;
            if i != want && self.cache.iter().any(|(a, _)| *a == key) {
                continue;
            }
            push(&mut self.cache, key, &bytes[(i * slot) as usize..((i + 1) * slot) as usize]);
        }
    }

    /// On-chip bytes the authentication cache holds when full (tags or tag lines, without
    /// their addresses).
    pub fn cache_bytes(&self) -> u64 {
        self.entries as u64 * if self.holds_lines { self.layout.block() as u64 } else { self.width.slot() as u64 }
    }

    /// Forget the authentication cache (flush): the next check reads its tag line.
    pub fn drop_cached(&mut self) {
        self.cache.clear();
    }

    /// Bytes of the tag table over the bytes it covers.
    pub fn space_overhead(&self) -> f64 {
        self.width.slot() as f64 / self.layout.block() as f64
    }

    pub fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        self.layout.tag_addr(addr).map(|a| Meta::new(MetaKind::CodeTag, a, self.width.slot() as u64)).into_iter().collect()
    }

    pub fn reset_stats(&mut self) {
        self.c = Counters::default();
    }

    pub fn stats(&self, out: &mut Stats) {
        let c = &self.c;
        out.str("codeauth", self.name);
        out.int("codeauth.checks", c.checks);
        out.int("codeauth.cache_hits", c.cache_hits);
        out.int("codeauth.cache_misses", c.cache_misses);
        out.int("codeauth.cache_bytes", self.cache_bytes());
        out.rate("codeauth.cache_miss_rate", c.cache_misses, c.checks);
        out.int("codeauth.tag_bytes", c.tag_bytes);
        out.int("codeauth.wait_cycles", c.wait_cycles);
        out.rate("codeauth.wait_per_check", c.wait_cycles, c.checks);
        out.int("codeauth.signed_lazily", c.signed_lazily);
        out.float("codeauth.space_overhead", self.space_overhead());
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{params, pattern};
    use crate::{AccessKind, Engine, Stat, Stats};

    const CODE: u64 = 0x40_0000;

    /// An engine over suh2003's bus (80 cycles to the first 8-B beat, 5 cycles a beat) with
    /// 64-B lines, holding 16 signed code lines at `CODE`, flushed.
    fn engine(codeauth: &str, extra: &[&str]) -> Engine {
        let mut v = vec!["l2.line=64B"];
        v.extend_from_slice(extra);
        let mut p = params("none", "none", &v);
        p.set("codeauth", codeauth).unwrap();
        let mut e = Engine::new(&p, 9).unwrap();
        let code = pattern(1, 16 * 64);
        e.write(CODE, &code, 0).unwrap();
        if codeauth != "none" {
            e.sign_code(CODE, &code).unwrap();
        }
        e.flush(0).unwrap();
        e.reset_stats();
        e
    }

    fn fetch(e: &mut Engine, a: u64, t: u64) -> crate::Outcome {
        let o = e.access(a, AccessKind::Fetch, t).unwrap();
        e.settle().unwrap();
        o
    }

    fn int(e: &Engine, k: &str) -> u64 {
        let mut s = Stats::default();
        e.stats(&mut s);
        match s.get(k) {
            Some(Stat::Int(v)) => *v,
            other => panic!("{}: {:?}", k, other),
        }
    }

    #[test]
    fn a_fetch_miss_waits_for_its_tag_line_then_one_cycle_and_a_cached_tag_costs_one_cycle() {
        let mut base = engine("none", &[]);
        let mut auth = engine("pr-trivium", &[]);
        let b0 = fetch(&mut base, CODE, 0);
        let a0 = fetch(&mut auth, CODE, 0);
        // The tag line (64 B = 8 beats of 5 cycles) follows the block on the bus; then the
        // last XOR and compare (§4.1).
        assert_eq!(a0.ready, b0.ready + 8 * 5 + 1);
        assert_eq!(a0.verified, a0.ready);
        // The next block's tag is in the same tag line (n_T = 4): the authentication cache has it.
        let b1 = fetch(&mut base, CODE + 64, 10_000);
        let a1 = fetch(&mut auth, CODE + 64, 10_000);
        assert_eq!(a1.ready, b1.ready + 1);
        assert_eq!((int(&auth, "codeauth.checks"), int(&auth, "codeauth.cache_misses"), int(&auth, "codeauth.cache_hits")), (2, 1, 1));
        assert_eq!(int(&auth, "codeauth.tag_bytes"), 64);
        assert_eq!(int(&auth, "mem.read_bytes"), int(&base, "mem.read_bytes") + 64);
        // Blocks in the cache are trusted (§7 fn. 9): a hit costs what it costs without.
        assert_eq!(fetch(&mut auth, CODE, 20_000).ready, fetch(&mut base, CODE, 20_000).ready);
        assert_eq!(int(&auth, "codeauth.checks"), 2);
    }

    #[test]
    fn a_slow_pad_generator_shows_and_early_start_hides_the_check() {
        // Long after the flush's write-backs left the bus.
        let t = 100_000;
        let mut base = engine("none", &[]);
        let b = fetch(&mut base, CODE, t).ready;
        assert_eq!(b, t + 10 + 80 + 7 * 5, "L2 latency, first beat, seven more");
        // 10 cycles of L2 latency, then the pad; then one cycle.
        let mut slow = engine("pr-aes", &["pr-aes.pad_latency=500"]);
        assert_eq!(fetch(&mut slow, CODE, t).ready, t + 10 + 500 + 1);
        let mut early = engine("pr-trivium", &["auth.early_start=true"]);
        let o = fetch(&mut early, CODE, t);
        assert_eq!(o.ready, b, "the block is usable as it arrives");
        assert_eq!(o.verified, b + 8 * 5 + 1, "its check completes behind it");
        assert!(early.checks_done() >= o.verified, "barriers wait for the check");
        // A tag line requested only once the block is in costs a whole memory access.
        let mut serial = engine("pr-trivium", &["auth.serial_tag_fetch=true"]);
        assert_eq!(fetch(&mut serial, CODE, t).ready, b + 80 + 7 * 5 + 1);
    }

    #[test]
    fn the_authentication_cache_holds_16_tags_as_001_budgets_them() {
        // §8, Table 7: 16 128-bit tags (256 B; ~320 B with their addresses), not 16 tag lines.
        let mut e = engine("pr-trivium", &[]);
        assert_eq!(int(&e, "codeauth.cache_bytes"), 16 * 16);
        // Blocks 0..16 have their tags in four 64-B tag lines; fetching block 0 brings its line's
        // four tags; blocks 1-3 then hit.
        for (i, blk) in (0u64..4).enumerate() {
            fetch(&mut e, CODE + blk * 64, i as u64 * 10_000);
        }
        assert_eq!((int(&e, "codeauth.cache_misses"), int(&e, "codeauth.cache_hits")), (1, 3));
        // Four entries: block 4's tag line pushes out block 0's four tags; block 5 hits,
        // block 1 misses.
        let mut e = engine("pr-trivium", &["auth.cache_entries=4"]);
        for (i, blk) in [0u64, 4, 5, 1].into_iter().enumerate() {
            fetch(&mut e, CODE + blk * 64, i as u64 * 10_000);
        }
        assert_eq!((int(&e, "codeauth.cache_misses"), int(&e, "codeauth.cache_hits")), (3, 1));
        let lines = engine("pr-trivium", &["auth.cache_holds=lines"]);
        assert_eq!(int(&lines, "codeauth.cache_bytes"), 16 * 64);
    }

    #[test]
    fn a_tag_line_larger_than_the_cache_leaves_the_wanted_tag_and_its_successors() {
        // 256-B blocks: 16 tags per tag line; a 4-entry cache keeps the wanted tag and the three after it.
        let mut e = engine("pr-trivium", &["auth.cache_entries=4", "l2.line=256B"]);
        for (i, blk) in [0u64, 1, 2, 3, 4].into_iter().enumerate() {
            fetch(&mut e, CODE + blk * 256, i as u64 * 10_000);
        }
        assert_eq!((int(&e, "codeauth.cache_misses"), int(&e, "codeauth.cache_hits")), (2, 3));
    }

    #[test]
    fn the_authentication_cache_is_a_fifo_of_tag_lines() {
        let mut e = engine("pr-trivium", &["auth.cache_entries=2", "auth.cache_holds=lines"]);
        // Tag lines of blocks 0, 4 and 8 (four 16-B tags per 64-B line).
        for (i, blk) in [0u64, 4, 8, 1].into_iter().enumerate() {
            fetch(&mut e, CODE + blk * 64, i as u64 * 10_000);
        }
        // Block 1's tag line (block 0's) was the oldest and left when block 8's came in.
        assert_eq!((int(&e, "codeauth.cache_misses"), int(&e, "codeauth.cache_hits")), (4, 0));
        let mut e = engine("pr-trivium", &["auth.cache_entries=3", "auth.cache_holds=lines"]);
        for (i, blk) in [0u64, 4, 8, 1].into_iter().enumerate() {
            fetch(&mut e, CODE + blk * 64, i as u64 * 10_000);
        }
        assert_eq!((int(&e, "codeauth.cache_misses"), int(&e, "codeauth.cache_hits")), (3, 1));
    }

    #[test]
    fn a_line_a_load_brought_in_is_authenticated_at_its_first_fetch() {
        let mut e = engine("pr-trivium", &[]);
        let mut b = [0u8; 1];
        e.untrusted().read(CODE + 70, &mut b);
        e.untrusted().write(CODE + 70, &[b[0] ^ 1]);
        e.access(CODE + 64, AccessKind::Load, 0).unwrap();
        e.settle().unwrap();
        let err = e.access(CODE + 64, AccessKind::Fetch, 1000).unwrap_err();
        assert_eq!(err.addr, CODE + 64);
        assert!(err.what.starts_with("code authentication: block 0x400040: authentication tag does not match"), "{}", err.what);
        // An untouched line loaded as data fetches fine, once checked.
        e.access(CODE, AccessKind::Load, 0).unwrap();
        e.settle().unwrap();
        fetch(&mut e, CODE, 2000);
        assert_eq!(int(&e, "codeauth.checks"), 2);
    }

    #[test]
    fn unsigned_code_is_signed_on_first_fetch_or_refused() {
        let mut e = engine("pr-trivium", &[]);
        fetch(&mut e, 0x80_0000, 0);
        assert_eq!(int(&e, "codeauth.signed_lazily"), 1);
        // From then on it is checked like signed code.
        e.flush(0).unwrap();
        e.untrusted().write(0x80_0001, &[0x5a]);
        assert!(e.access(0x80_0000, AccessKind::Fetch, 0).is_err());
        let mut strict = engine("pr-trivium", &["auth.sign_unsigned=false"]);
        let err = strict.access(0x80_0000, AccessKind::Fetch, 0).unwrap_err();
        assert!(err.what.contains("not signed"), "{}", err.what);
    }

    #[test]
    fn with_integrity_and_encryption_signed_code_runs_and_data_is_untouched() {
        for (integ, enc) in [("chash", "otp"), ("mac", "direct"), ("lhash", "ocb")] {
            let mut p = params(integ, enc, &["l2.line=64B"]);
            p.set("codeauth", "pr-trivium").unwrap();
            let mut e = Engine::new(&p, 3).unwrap();
            let code = pattern(5, 4096);
            e.write(CODE, &code, 0).unwrap();
            e.sign_code(CODE, &code).unwrap();
            e.write(0x10_0000, &pattern(6, 256), 0).unwrap();
            e.flush(0).unwrap();
            for a in (CODE..CODE + 4096).step_by(64) {
                fetch(&mut e, a, 0);
            }
            let mut back = vec![0u8; 256];
            e.read(0x10_0000, &mut back, 0).unwrap();
            assert_eq!(back, pattern(6, 256), "{}+{}", integ, enc);
            assert_eq!(int(&e, "codeauth.checks"), 64, "{}+{}", integ, enc);
        }
    }

    #[test]
    fn without_code_authentication_no_statistic_changes() {
        let mut e = engine("none", &[]);
        fetch(&mut e, CODE, 0);
        let mut s = Stats::default();
        e.stats(&mut s);
        assert!(s.0.iter().all(|(k, _)| !k.starts_with("codeauth")));
        assert!(e.codeauth().is_none());
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        let err = |extra: &[&str]| {
            let mut p = params("none", "none", extra);
            p.set("codeauth", "pr-trivium").unwrap();
            Engine::new(&p, 1).err().expect("refused").0
        };
        assert!(err(&["auth.width=96"]).starts_with("auth.width: tag width 96 bits"));
        assert!(err(&["auth.cache_entries=0"]).starts_with("auth.cache_entries"));
        assert!(err(&["auth.cache_holds=words"]).starts_with("auth.cache_holds"));
        assert!(err(&["auth.program_id=5000000000"]).starts_with("auth.program_id"));
        assert!(err(&["auth.program_id=0"]).starts_with("auth.program_id"), "0 is no program (codeauth.PROGRAM_IDS)");
        let mut p = params("none", "none", &[]);
        p.set("codeauth", "sha1").unwrap();
        assert!(Engine::new(&p, 1).err().unwrap().0.starts_with("codeauth: unknown value 'sha1'"));
    }
}
