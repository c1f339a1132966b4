//! SecureMemory operations and adversary pokes against a plain byte array, through the
//! public `secmem_core::Engine` API only (read, write, flush, check, `untrusted()`).
//!
//! The oracle is what the scheme pair declares (`registry::guarantees`), over every
//! registered pair:
//! - untampered memory reads back exactly what was written, and no operation fails;
//! - after the adversary changes untrusted memory (`poke`), a pair that notices tampering at
//!   the access (a tree, a MAC, OCB's tag) returns the written bytes or an IntegrityError,
//!   never other bytes; one that notices at the check (lhash, 000 §3.2) may return other
//!   bytes but then its next full check must fail;
//! - a replay (`restore` of an old snapshot) is the same with the pair's replay promise (mac
//!   and OCB cannot see it: a stale block with its stale tag is one the processor wrote);
//! - a pair that promises nothing about an attack promises nothing about data after it;
//! - after any IntegrityError, or a MECU reboot (old memory is garbage by design), only
//!   "no panic" is checked from then on.

use secmem_core::decl::{Def, Detection, Role};
use secmem_core::registry::{self, ENCRYPTION_SCHEMES as ENCRYPTION, INTEGRITY_SCHEMES as INTEGRITY};
use secmem_core::{Engine, IntegrityError, Params};

/// The input, consumed a value at a time; zeros once exhausted.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn take(&mut self, n: usize) -> Vec<u8> {
        let k = n.min(self.0.len());
        let (a, b) = self.0.split_at(k);
        self.0 = b;
        let mut v = a.to_vec();
        v.resize(n, 0xA5);
        v
    }
    fn done(&self) -> bool {
        self.0.is_empty()
    }
}

/// What the oracle may still assert.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Trust {
    /// Untampered: exact contents, no errors.
    Exact,
    /// Tampered: written bytes or an IntegrityError (noticed at the check: or a failing
    /// next check).
    Detect(Detection),
    /// Nothing about data (no integrity, replay under mac/OCB, after an error or a reboot).
    Nothing,
}

impl Trust {
    /// After an attack the pair notices `when`: it must be noticed by the later of the
    /// deadlines so far, or nothing is promised any more.
    fn after(self, when: Detection) -> Trust {
        match (self, when) {
            (Trust::Nothing, _) | (_, Detection::Never) => Trust::Nothing,
            (Trust::Exact, d) => Trust::Detect(d),
            (Trust::Detect(a), d) => Trust::Detect(a.max(d)),
        }
    }
}

/// An operation's outcome under the current trust: whether it succeeded. A failure on
/// untampered memory is a bug, except while a MECU is suspended (it refuses every line).
fn outcome(r: Result<(), IntegrityError>, trust: &mut Trust, suspended: bool, integ: &str, enc: &str, what: &str) -> bool {
    match r {
        Ok(()) => true,
        Err(_) if suspended => false,
        Err(err) => {
            assert!(*trust != Trust::Exact, "{integ}+{enc}: {what} failed on untampered memory: {err}");
            *trust = Trust::Nothing;
            false
        }
    }
}

/// The pair and machine one or two selector bytes pick: every registered pair, two memory
/// sizes and two L2 sizes (one byte while they fit in it, as the corpus was made; two once
/// the registry outgrew it). None for a pair that cannot be built (a tree over counters with
/// a scheme keeping none).
fn select(b: &mut Bytes) -> Option<(&'static str, &'static str, u64, Vec<String>)> {
    let (ni, ne) = (INTEGRITY.len(), ENCRYPTION.len());
    let pairs = ni * ne;
    let mut sel = b.u8() as usize;
    if pairs * 4 > 256 {
        sel |= (b.u8() as usize) << 8;
    }
    let (integ, enc) = (INTEGRITY[sel % ni], ENCRYPTION[(sel / ni) % ne]);
    if registry::compatible(registry::integrity(integ).expect("registered"), registry::encryption(enc).expect("registered")).is_err() {
        return None;
    }
    let size: u64 = [16 << 10, 64 << 10][(sel / pairs) & 1];
    let l2 = ["1KiB", "4KiB"][(sel / (2 * pairs)) & 1];
    Some((integ, enc, size, vec![format!("memory.size={}", size), format!("l2.size={}", l2), "l2.ways=2".to_string()]))
}

/// The pair's declared choice parameters, integrity scheme first, each in declaration order:
/// a string parameter whose unit lists its values ("own|l2") is one.
pub fn choices(integ: &str, enc: &str) -> Vec<(&'static str, Vec<&'static str>)> {
    let decls = [registry::integrity(integ).expect("registered").decl, registry::encryption(enc).expect("registered").decl];
    decls
        .iter()
        .flat_map(|d| d.params.iter())
        .filter(|p| matches!(p.default, Def::Str(_)) && p.unit.contains('|'))
        .map(|p| (p.key, p.unit.split('|').collect()))
        .collect()
}

/// `engine`: the pair's parameters at their defaults.
pub fn engine(data: &[u8]) {
    let mut b = Bytes(data);
    if let Some((integ, enc, size, sets)) = select(&mut b) {
        let p = secmem_sim::configure("suh2003", Some(integ), Some(enc), &sets).expect("a valid small machine");
        let e = Engine::new(&p, 1).expect("engine");
        run(b, &p, e, integ, enc, size);
    }
}

/// `engine_choices`: the same operations, after a byte per declared choice parameter of the
/// pair (`choices`) picking its value, so that every organisation and placement a scheme
/// declares is attacked (sgx's nodes in the L2, MACs in ECC bits, ...). A target of its own,
/// so that the `engine` corpus keeps its meaning. A combination the schemes refuse (two
/// schemes in the same ECC bits) is a configuration error, which `params` covers: skipped.
pub fn engine_choices(data: &[u8]) {
    let mut b = Bytes(data);
    let Some((integ, enc, size, sets)) = choice_sets(&mut b) else { return };
    let Ok(p) = secmem_sim::configure("suh2003", Some(integ), Some(enc), &sets) else { return };
    let Ok(e) = Engine::new(&p, 1) else { return };
    run(b, &p, e, integ, enc, size);
}

/// The pair, memory size and `--set` lines `engine_choices` reads from the input's start.
fn choice_sets(b: &mut Bytes) -> Option<(&'static str, &'static str, u64, Vec<String>)> {
    let (integ, enc, size, mut sets) = select(b)?;
    for (key, values) in choices(integ, enc) {
        sets.push(format!("{}={}", key, values[b.u8() as usize % values.len()]));
    }
    Some((integ, enc, size, sets))
}

/// What `engine_choices` runs for `data`: the pair and its `--set` lines (None: a pair that
/// cannot be built). For tests of the corpus.
pub fn choice_machine(data: &[u8]) -> Option<(&'static str, &'static str, Vec<String>)> {
    choice_sets(&mut Bytes(data)).map(|(i, e, _, sets)| (i, e, sets))
}

/// Up to 64 operations from the input against `e`, checked against a plain byte array.
fn run(mut b: Bytes, p: &Params, mut e: Engine, integ: &str, enc: &str, size: u64) {
    let raw = e.untrusted().size();
    let (dma, dma_size) = e.dma_region();
    let pair = registry::Pair::of(p).expect("declared guarantees");
    let g = pair.data();
    let mut model = vec![0u8; size as usize];
    let mut trust = Trust::Exact;
    // lhash under tampering: a read returned bytes other than the written ones.
    let mut owed_failure = false;
    let mut snap = None;
    let mut suspended = false;

    for _ in 0..64 {
        if b.done() {
            break;
        }
        let op = b.u8() % 10;
        let addr = b.u16() as u64 % size;
        let len = (b.u8() as u64).min(size - addr) as usize;
        match op {
            0 | 1 => {
                let data = b.take(len);
                let r = e.write(addr, &data, 0).map(|_| ());
                if outcome(r, &mut trust, suspended, integ, enc, "write") {
                    model[addr as usize..addr as usize + len].copy_from_slice(&data);
                }
            }
            2 | 3 => {
                let mut out = vec![0u8; len];
                let r = e.read(addr, &mut out, 0).map(|_| ());
                if outcome(r, &mut trust, suspended, integ, enc, "read") {
                    let same = out == model[addr as usize..addr as usize + len];
                    match trust {
                        Trust::Exact => assert!(same || suspended, "{integ}+{enc}: read 0x{addr:x}+{len} differs from what was written"),
                        Trust::Detect(Detection::Access) => assert!(same, "{integ}+{enc}: tampered read 0x{addr:x}+{len} returned other bytes, undetected"),
                        Trust::Detect(_) => owed_failure |= !same,
                        Trust::Nothing => {}
                    }
                }
            }
            4 => {
                let r = e.flush(0).map(|_| ());
                outcome(r, &mut trust, suspended, integ, enc, "flush");
            }
            5 => {
                let r = e.check(0).map(|_| ());
                let ok = outcome(r, &mut trust, suspended, integ, enc, "check");
                assert!(!(ok && owed_failure), "{integ}+{enc}: the check passed after a read returned tampered bytes");
                owed_failure = false;
            }
            6 => {
                // The adversary writes anywhere in untrusted memory (data, metadata, DMA).
                let a = b.u32() as u64 % raw;
                let n = (b.u8() as u64 % 16 + 1).min(raw - a) as usize;
                let bytes = b.take(n);
                let mut old = vec![0u8; n];
                e.untrusted().read(a, &mut old);
                e.untrusted().write(a, &bytes);
                let in_dma = a >= dma && a + n as u64 <= dma + dma_size;
                if old != bytes && !in_dma {
                    // Noticed as the regions it touched promise (a log's stamps: at the check).
                    let role = |x: u64| e.layout().region_of(x).map_or(Role::Data, |r| r.role);
                    trust = trust.after(pair.tamper_of(role(a)).max(pair.tamper_of(role(a + n as u64 - 1))));
                }
            }
            7 => match b.u8() % 3 {
                0 => snap = Some(e.untrusted().snapshot()),
                1 => {
                    if let Some(s) = &snap {
                        e.untrusted().restore(s).expect("same size");
                        trust = trust.after(g.replay);
                    }
                }
                _ => {
                    // The unprotected region reads raw, exactly what is in untrusted memory.
                    let off = addr % dma_size;
                    let n = len.min((dma_size - off) as usize);
                    let mut got = vec![0u8; n];
                    e.read_without_checking(dma + off, &mut got, 0).expect("inside the DMA region");
                    let mut raw_bytes = vec![0u8; n];
                    e.untrusted().read(dma + off, &mut raw_bytes);
                    assert_eq!(got, raw_bytes, "read_without_checking is not the raw bytes");
                    assert!(e.read_without_checking(dma + dma_size, &mut [0u8; 1], 0).is_err());
                    assert!(e.read_without_checking(u64::MAX, &mut [0u8; 2], 0).is_err());
                }
            },
            8 => {
                for m in e.metadata_of(addr) {
                    let a = m.addr;
                    assert!(a < raw, "{integ}+{enc}: metadata '{}' of 0x{addr:x} at 0x{a:x}, outside memory of {raw} bytes", m.kind);
                }
                assert!(e.metadata_of(size + addr).is_empty() && e.metadata_of(u64::MAX).is_empty());
            }
            _ => {
                // Power events: only a scheme that keeps memory private at rest (the MECU) has
                // them; others refuse with an error.
                let r = match b.u8() % 3 {
                    0 => e.suspend().map(|_| suspended = true),
                    1 => e.resume().map(|_| suspended = false),
                    _ => {
                        let r = e.reboot();
                        if r.is_ok() {
                            trust = Trust::Nothing;
                            suspended = false;
                        }
                        r
                    }
                };
                if !g.at_rest {
                    assert!(r.is_err(), "{integ}+{enc}: a power event without a MECU was accepted");
                }
            }
        }
    }
}
