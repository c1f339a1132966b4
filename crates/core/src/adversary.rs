//! The adversary: every attack of seeds 000/003 against a scheme, on real memory.
//!
//! Each scenario builds a fresh engine, has the processor write known data and flush it, lets
//! the adversary change untrusted memory, and then asks whether the processor noticed: on the
//! next read of the victim, or at the latest at a full check (the log hash only notices at its
//! integrity-check, by design). Tampering of the DMA region must NOT be noticed: it is
//! unprotected by design and read only with ReadWithoutChecking.
//!
//! What each cell should show is derived from the schemes' declared guarantees
//! (`registry::guarantees`), never from their names: a new scheme is attacked as it declares.

use crate::decl::{Detection, Guarantees, Role};
use crate::keyid::KEYID_PAGE;
use crate::layout::MetaKind;
use crate::params::{ConfigError, Params};
use crate::registry;
use crate::Engine;

/// One cell of the detection matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub attack: &'static str,
    /// Whether the attack applies to this scheme (it has the metadata attacked).
    pub applicable: bool,
    pub detected: bool,
    /// What the schemes' declarations say should happen.
    pub expected: bool,
    /// When it was noticed: on the read (`Access`) or only at the full check (`Check`).
    pub when: Option<Detection>,
    /// When the schemes promise to notice it (`Never`: not an attack they detect).
    pub declared: Detection,
    pub detail: String,
}

impl Outcome {
    /// Whether the cell is what the declarations promise: noticed exactly when expected, and
    /// no later than declared (a tree that notices only at the full check breaks its promise).
    pub fn ok(&self) -> bool {
        self.detected == self.expected && self.when.is_none_or(|w| w <= self.declared)
    }
}

pub const ATTACKS: &[&str] = &[
    "flip a data bit",
    "flip a tree chunk bit (every level)",
    "flip a MAC bit",
    "flip a time-stamp bit",
    "replay a block with its metadata",
    "replay all of memory",
    "splice a block to another address",
    "reorder time stamps",
    "page table: add a page twice",
    "page table: skip a page",
    "tamper with the DMA region",
    "read a line under another key ID",
    "put back a line written under another key ID",
];

const PAGES: u64 = 16;
const BASE: u64 = 0x10_0000;
const VICTIM: u64 = BASE + 5 * 4096 + 3 * 64;
const OTHER: u64 = BASE + 9 * 4096 + 3 * 64;
/// Bytes restored around a metadata address on replay: covers any tree chunk (≤ 256 B) and,
/// past it, only metadata left unchanged since the snapshot.
const WINDOW: usize = 256;

/// Distinct contents for every line and round (a splice of equal lines would change nothing).
fn value(k: u64, round: u64) -> Vec<u8> {
    (0..64u64)
        .map(|i| {
            let x = (k << 20 | i << 8 | round).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            (x >> 56) as u8
        })
        .collect()
}

/// A fresh engine holding known data, flushed to memory.
fn prepared(p: &Params, seed: u64) -> Result<Engine, ConfigError> {
    prepared_keyed(p, seed, 0)
}

/// The same, the victim's page under key ID `key` from the start (0: the platform key).
fn prepared_keyed(p: &Params, seed: u64, key: u32) -> Result<Engine, ConfigError> {
    let mut e = Engine::new(p, seed)?;
    if key != 0 {
        e.set_key_id(VICTIM & !(KEYID_PAGE - 1), KEYID_PAGE, key).map_err(|x| ConfigError(x.to_string()))?;
    }
    for k in 0..PAGES * 64 {
        e.write(BASE + k * 64, &value(k, 0), 0).map_err(|x| ConfigError(x.to_string()))?;
    }
    e.flush(0).map_err(|x| ConfigError(x.to_string()))?;
    Ok(e)
}

/// Did the processor notice, and when? Read the victim (and the other line), then check
/// everything.
fn noticed(e: &mut Engine, addrs: &[u64]) -> (Option<Detection>, String) {
    let mut buf = [0u8; 64];
    for &a in addrs {
        if let Err(x) = e.read(a, &mut buf, 0) {
            return (Some(Detection::Access), x.to_string());
        }
    }
    match e.check(0) {
        Err(x) => (Some(Detection::Check), x.to_string()),
        Ok(_) => (None, "no error on read or check".into()),
    }
}

/// A full check alone (no read first).
fn checked(e: &mut Engine) -> (Option<Detection>, String) {
    match e.check(0) {
        Err(x) => (Some(Detection::Check), x.to_string()),
        Ok(_) => (None, "no error at the check".into()),
    }
}

fn flip(e: &mut Engine, addr: u64, bit: u8) {
    let mut b = [0u8];
    e.untrusted().read(addr, &mut b);
    b[0] ^= 1 << bit;
    e.untrusted().write(addr, &b);
}

/// Addresses of `addr`'s metadata of the kinds `which` selects.
fn meta(e: &Engine, addr: u64, which: impl Fn(MetaKind) -> bool) -> Vec<u64> {
    e.metadata_of(addr).into_iter().filter(|m| which(m.kind)).map(|m| m.addr).collect()
}

/// Run every attack against the schemes configured in `p`.
pub fn attack_all(p: &Params, seed: u64) -> Result<Vec<Outcome>, ConfigError> {
    let pair = registry::Pair::of(p)?;
    let g = pair.data();
    let mut out = Vec::new();
    let mut cell = |attack: &'static str, applicable: bool, declared: Detection, r: Option<(Option<Detection>, String)>| {
        let (when, detail) = r.unwrap_or((None, "not applicable".into()));
        let declared = if applicable { declared } else { Detection::Never };
        out.push(Outcome { attack, applicable, detected: when.is_some(), expected: declared != Detection::Never, when, declared, detail });
    };

    // Flip a data bit.
    let mut e = prepared(p, seed)?;
    flip(&mut e, VICTIM + 17, 4);
    cell(ATTACKS[0], true, g.tamper, Some(noticed(&mut e, &[VICTIM])));

    // Flip a bit in every tree level, one fresh memory each: detected only if all are.
    let probe = prepared(p, seed)?;
    let levels = meta(&probe, VICTIM, |k| matches!(k, MetaKind::TreeLevel(_)));
    let r = if levels.is_empty() {
        None
    } else {
        // Noticed only if every level is, as late as the latest.
        let mut all = (Some(Detection::Access), String::new());
        for (i, &node) in levels.iter().enumerate() {
            let mut e = prepared(p, seed)?;
            flip(&mut e, node + 1, 0);
            let (d, why) = noticed(&mut e, &[VICTIM]);
            let Some(d) = d else {
                all = (None, format!("level {} ({} from the leaf) not noticed", levels.len() - 1 - i, i + 1));
                break;
            };
            all = (all.0.max(Some(d)), format!("all {} levels noticed; e.g. {}", levels.len(), why));
        }
        Some(all)
    };
    cell(ATTACKS[1], !levels.is_empty(), pair.tamper_of(Role::Tree), r);

    // Flip a MAC bit.
    let macs = meta(&probe, VICTIM, |k| k == MetaKind::Mac);
    let r = macs.first().map(|&a| {
        let mut e = prepared(p, seed).unwrap();
        flip(&mut e, a + 2, 3);
        noticed(&mut e, &[VICTIM])
    });
    cell(ATTACKS[2], !macs.is_empty(), pair.tamper_of(Role::Macs), r);

    // Flip a time-stamp bit (the integrity scheme's own stamps).
    let ts = meta(&probe, VICTIM, |k| k == MetaKind::LogStamp);
    let r = ts.first().map(|&a| {
        let mut e = prepared(p, seed).unwrap();
        flip(&mut e, a, 2);
        noticed(&mut e, &[VICTIM])
    });
    cell(ATTACKS[3], !ts.is_empty(), pair.tamper_of(Role::Log), r);

    // Replay a block with all its metadata (tree path, MAC, stamps; encryption metadata of
    // every chunk involved): only what stays on chip can tell.
    let mut e = prepared(p, seed)?;
    let old = e.untrusted().snapshot();
    // A host that cannot reserve a second copy is an error, not an abort.
    let mut old_mem = crate::UntrustedMemory::try_new(e.untrusted().size(), false)
        .map_err(|x| ConfigError(format!("memory.size: the replay's copy of memory: {}", x)))?;
    old_mem.restore(&old).map_err(ConfigError)?;
    e.write(VICTIM, &value(999, 1), 0).map_err(|x| ConfigError(x.to_string()))?;
    e.flush(0).map_err(|x| ConfigError(x.to_string()))?;
    let mut addrs = vec![VICTIM];
    for md in e.metadata_of(VICTIM) {
        addrs.push(md.addr);
        if let MetaKind::TreeLevel(_) = md.kind {
            addrs.extend(e.encryption().metadata_of(md.addr).into_iter().map(|x| x.addr));
        }
    }
    for a in addrs {
        let n = (WINDOW as u64).min(e.untrusted().size().saturating_sub(a)) as usize;
        if n == 0 {
            continue;
        }
        let mut buf = vec![0u8; n];
        old_mem.read(a, &mut buf);
        e.untrusted().write(a, &buf);
    }
    cell(ATTACKS[4], true, g.replay, Some(noticed(&mut e, &[VICTIM])));

    // Replay all of memory.
    let mut e = prepared(p, seed)?;
    let old = e.untrusted().snapshot();
    e.write(VICTIM, &value(998, 1), 0).map_err(|x| ConfigError(x.to_string()))?;
    e.flush(0).map_err(|x| ConfigError(x.to_string()))?;
    e.untrusted().restore(&old).map_err(ConfigError)?;
    cell(ATTACKS[5], true, g.replay, Some(noticed(&mut e, &[VICTIM])));

    // Splice: copy the victim block and its per-line metadata over another block's.
    let mut e = prepared(p, seed)?;
    let mut line = [0u8; 64];
    e.untrusted().read(VICTIM, &mut line);
    e.untrusted().write(OTHER, &line);
    let from = e.metadata_of(VICTIM);
    let to = e.metadata_of(OTHER);
    for (a, b) in from.iter().zip(&to) {
        if matches!(a.kind, MetaKind::TreeLevel(_) | MetaKind::PageTable) || a.addr == b.addr {
            continue;
        }
        let mut buf = vec![0u8; a.len as usize];
        e.untrusted().read(a.addr, &mut buf);
        e.untrusted().write(b.addr, &buf);
    }
    cell(ATTACKS[6], true, g.splice, Some(noticed(&mut e, &[OTHER])));

    // Reorder time stamps (lhash): give the victim a stamp from the future.
    let r = ts.first().map(|&a| {
        let mut e = prepared(p, seed).unwrap();
        let mut b = [0u8; 4];
        e.untrusted().read(a, &mut b);
        e.untrusted().write(a, &(u32::from_le_bytes(b) + 1000).to_le_bytes());
        noticed(&mut e, &[VICTIM])
    });
    cell(ATTACKS[7], !ts.is_empty(), pair.tamper_of(Role::Log), r);

    // Page table manipulation (lhash): unlist a used page, then either use it again (it is
    // added a second time) or just check (its chunks are skipped).
    let pt = meta(&probe, VICTIM, |k| k == MetaKind::PageTable);
    for (i, reuse) in [(8, true), (9, false)] {
        let r = pt.first().map(|&a| {
            let mut e = prepared(p, seed).unwrap();
            let page = (VICTIM / 4096) % 8;
            flip(&mut e, a, page as u8);
            if reuse {
                noticed(&mut e, &[VICTIM])
            } else {
                checked(&mut e)
            }
        });
        cell(ATTACKS[i], !pt.is_empty(), pair.tamper_of(Role::Log), r);
    }

    // The DMA region is unprotected by design: tampering must not be flagged, and the
    // processor reads exactly what the device (or adversary) wrote.
    let mut e = prepared(p, seed)?;
    let (dma, _) = e.dma_region();
    e.untrusted().write(dma + 128, b"device data");
    let mut got = [0u8; 11];
    let r = e.read_without_checking(dma + 128, &mut got, 0);
    let (d, why) = noticed(&mut e, &[VICTIM]);
    let ok = r.is_ok() && &got == b"device data";
    let r = if ok { (d, why) } else { (Some(Detection::Access), "ReadWithoutChecking did not return the device's data".into()) };
    cell(ATTACKS[10], true, Detection::Never, Some(r));

    // Key IDs (MKTME, TDX): the victim's page is key ID 1's. Its owner (the page tables are
    // software's, not the adversary's) maps it under key ID 2, which reads it; or the
    // adversary copies the line written under key ID 1, with its per-line metadata, to the
    // same address of a machine where key ID 2 wrote that page.
    let keyed = g.key_domains;
    let io = |x: crate::IntegrityError| ConfigError(x.to_string());
    let page = VICTIM & !(KEYID_PAGE - 1);
    let r = if keyed {
        let mut e = prepared_keyed(p, seed, 1)?;
        let v = value((VICTIM - BASE) / 64, 0);
        e.set_key_id(page, KEYID_PAGE, 2).map_err(io)?;
        let mut got = [0u8; 64];
        Some(match e.read(VICTIM, &mut got, 0) {
            Err(x) => (Some(Detection::Access), x.to_string()),
            Ok(_) => {
                let what = if got[..] == v[..] { "the plaintext" } else { "garbage" };
                let (d, why) = checked(&mut e);
                (d, format!("key ID 2 read {}; {}", what, why))
            }
        })
    } else {
        None
    };
    cell(ATTACKS[11], keyed, g.cross_domain, r);
    let r = if keyed {
        let from = prepared_keyed(p, seed, 1)?;
        let mut e = prepared_keyed(p, seed, 2)?;
        let mut pieces = vec![(VICTIM, e.line())];
        pieces.extend(from.metadata_of(VICTIM).into_iter().filter(|m| !matches!(m.kind, MetaKind::TreeLevel(_) | MetaKind::PageTable)).map(|m| (m.addr, m.len)));
        for (a, n) in pieces {
            copy_raw(&mut e, Some(&from), a, a, n);
        }
        Some(noticed(&mut e, &[VICTIM]))
    } else {
        None
    };
    cell(ATTACKS[12], keyed, g.cross_domain, r);

    Ok(out)
}

pub const ENCRYPTION_ATTACKS: &[&str] = &[
    "read plaintext from untrusted memory",
    "equal plaintexts give equal ciphertexts at two addresses",
    "equal plaintexts give equal ciphertexts on a rewrite",
    "flip ciphertext bits into chosen plaintext (sell -> buy!)",
    "the same, with a hash tree on top",
    "offline read at suspend finds plaintext or the key (mecu)",
    "roll back s kept on the removable device (mecu)",
    "roll back s kept on the MECU: pad reuse (mecu)",
    "roll back a line's counters in memory, then rewrite it: pad reuse",
    "read another key ID's line and get its plaintext",
];

/// The first registered integrity scheme that notices every attack at the access (a hash
/// tree), to put on top of an encryption scheme.
fn a_tree(p: &Params) -> Result<&'static str, ConfigError> {
    let every = Guarantees::detecting(Detection::Access, Detection::Access, Detection::Access);
    let enc = registry::encryption(&p.str("encryption")?)?;
    for s in registry::INTEGRITY {
        if registry::compatible(s, enc).is_ok() && (s.guarantees)(p)? == every {
            return Ok(s.decl.name);
        }
    }
    Err(ConfigError("no registered integrity scheme notices every attack at the access".into()))
}

/// Attacks on the privacy of memory for the encryption scheme of `p` (its integrity is
/// replaced by none, then by a hash tree for the fifth row). What each row should show comes
/// from the scheme's declared guarantees.
pub fn attack_encryption(p: &Params, seed: u64) -> Result<Vec<Outcome>, ConfigError> {
    let with_params = |integ: &str| -> Result<Params, ConfigError> {
        let mut q = p.clone();
        q.set("integrity", integ)?;
        Ok(q)
    };
    let with = |integ: &str| -> Result<Engine, ConfigError> { Engine::new(&with_params(integ)?, seed) };
    let io = |x: crate::IntegrityError| ConfigError(x.to_string());
    let alone = registry::guarantees(&with_params("none")?)?;
    let tree = a_tree(p)?;
    let under_tree = registry::guarantees(&with_params(tree)?)?;
    // Rows 6 and 7 keep the state counter on the device, then on the unit.
    let s_kept = |on_device: bool| -> Result<Params, ConfigError> {
        let mut q = with_params("none")?;
        q.set("mecu.s_on_device", if on_device { "true" } else { "false" })?;
        Ok(q)
    };
    let rollback = [registry::guarantees(&s_kept(true)?)?.rollback_reuses_pads, registry::guarantees(&s_kept(false)?)?.rollback_reuses_pads];
    let mut out = Vec::new();
    let mut cell = |i: usize, happened: bool, detail: String| {
        // Rows 5-7 are for memory that stays private at rest (002); row 8 for schemes whose
        // rewrites get new pads (where they never do, row 2 already shows it).
        let applicable = match i {
            5..=7 => alone.at_rest,
            8 => alone.confidential && alone.hides_rewrites,
            9 => alone.key_domains,
            _ => true,
        };
        // Rows 0-3 and 5-7: the attack succeeds (a leak, a chosen plaintext, a reused pad);
        // row 4: the tree notices.
        let expected = match i {
            0 => !alone.confidential,
            1 => !alone.hides_equal_lines,
            2 => !alone.hides_rewrites,
            3 => alone.malleable,
            4 => under_tree.tamper != Detection::Never,
            5 => !alone.confidential,
            6 => rollback[0],
            7 => rollback[1],
            8 => alone.stale_counters_reuse_pads,
            // A key per key ID: never the plaintext.
            _ => !alone.key_domains,
        };
        let declared = if i == 4 { under_tree.tamper } else { Detection::Never };
        let when = (i == 4 && happened).then_some(Detection::Access);
        out.push(Outcome {
            attack: ENCRYPTION_ATTACKS[i],
            applicable,
            detected: applicable && happened,
            expected: applicable && expected,
            when: when.filter(|_| applicable),
            declared,
            detail,
        });
    };
    let secret: Vec<u8> = b"TOP-SECRET-PLAN!".iter().cycle().take(64).copied().collect();

    // Plaintext left in untrusted memory after a flush.
    let mut e = with("none")?;
    for k in 0..64u64 {
        e.write(BASE + k * 4096, &secret, 0).map_err(io)?;
    }
    e.flush(0).map_err(io)?;
    let mut found = None;
    let mut page = vec![0u8; 4096];
    let data = e.data_size();
    for a in e.untrusted().touched_pages(0, data) {
        e.untrusted().read(a, &mut page);
        if page.windows(8).any(|w| w == &secret[..8]) {
            found = Some(a);
            break;
        }
    }
    cell(0, found.is_some(), found.map_or("no plaintext found".into(), |a| format!("plaintext at 0x{:x}", a)));

    // Equal plaintexts at two addresses, and rewritten at one.
    let raw = |e: &mut Engine, a: u64| {
        let mut b = [0u8; 64];
        e.untrusted().read(a, &mut b);
        b
    };
    let mut e = with("none")?;
    e.write(VICTIM, &secret, 0).map_err(io)?;
    e.write(OTHER, &secret, 0).map_err(io)?;
    e.flush(0).map_err(io)?;
    let (a, b) = (raw(&mut e, VICTIM), raw(&mut e, OTHER));
    cell(1, a == b, if a == b { "identical lines".into() } else { "ciphertexts differ".into() });
    e.write(VICTIM, &secret, 0).map_err(io)?;
    e.flush(0).map_err(io)?;
    let again = raw(&mut e, VICTIM);
    cell(2, a == again, if a == again { "identical after the rewrite".into() } else { "ciphertext changed".into() });

    // Malleability (002 §4.3): XOR "sell" ^ "buy!" into the ciphertext.
    for (i, integ) in [(3, "none"), (4, tree)] {
        let mut e = with(integ)?;
        e.write(VICTIM, b"sell", 0).map_err(io)?;
        e.flush(0).map_err(io)?;
        let mut ct = [0u8; 4];
        e.untrusted().read(VICTIM, &mut ct);
        for (c, (x, y)) in ct.iter_mut().zip(b"sell".iter().zip(b"buy!")) {
            *c ^= x ^ y;
        }
        e.untrusted().write(VICTIM, &ct);
        let mut got = [0u8; 4];
        let r = e.read(VICTIM, &mut got, 0);
        if i == 3 {
            let ok = r.is_ok() && &got == b"buy!";
            cell(i, ok, if ok { "read back \"buy!\"".into() } else { format!("{:?}", r.map(|_| got)) });
        } else {
            let (d, why) = match r {
                Err(x) => (true, format!("under {}: {}", tree, x)),
                Ok(_) => {
                    let (d, why) = noticed(&mut e, &[VICTIM]);
                    (d.is_some(), format!("under {}: {}", tree, why))
                }
            };
            cell(i, d, why);
        }
    }

    // A line's counters set back in memory (with nothing else): does its next write-back
    // reuse the pad of the write-back the counters were rolled back over?
    let stale = {
        let (p2, p3) = (b"second plaintext", b"third, rewritten");
        let mut e = with("none")?;
        e.write(VICTIM, b"first plaintext!", 0).map_err(io)?;
        e.flush(0).map_err(io)?;
        let meta: Vec<(u64, Vec<u8>)> = e
            .encryption()
            .metadata_of(VICTIM)
            .into_iter()
            .map(|m| {
                let mut b = vec![0u8; m.len as usize];
                e.untrusted_ref().read(m.addr, &mut b);
                (m.addr, b)
            })
            .collect();
        e.write(VICTIM, p2, 0).map_err(io)?;
        e.flush(0).map_err(io)?;
        let c2 = raw(&mut e, VICTIM);
        for (a, b) in &meta {
            e.untrusted().write(*a, b);
        }
        let r = e.write(VICTIM, p3, 0).and_then(|_| e.flush(0));
        let c3 = raw(&mut e, VICTIM);
        let reuse = r.is_ok() && (0..16).all(|k| c2[k] ^ c3[k] == p2[k] ^ p3[k]);
        let why = match r {
            Err(x) => format!("refused: {}", x),
            Ok(_) if reuse => "XOR of the ciphertexts is the XOR of the plaintexts".into(),
            Ok(_) => "no pad reuse".into(),
        };
        (reuse, why)
    };

    // Another key ID reads a line (its page handed over by the software owning the page
    // tables): the plaintext, or garbage?
    let cross = if alone.key_domains {
        let mut e = with("none")?;
        let page = VICTIM & !(KEYID_PAGE - 1);
        e.set_key_id(page, KEYID_PAGE, 1).map_err(io)?;
        e.write(VICTIM, &secret, 0).map_err(io)?;
        e.flush(0).map_err(io)?;
        e.set_key_id(page, KEYID_PAGE, 2).map_err(io)?;
        let mut got = [0u8; 64];
        match e.read(VICTIM, &mut got, 0) {
            Ok(_) if got[..] == secret[..] => (true, "key ID 2 read key ID 1's plaintext".into()),
            Ok(_) => (false, "key ID 2 read garbage".into()),
            Err(x) => (false, format!("refused: {}", x)),
        }
    } else {
        (false, "not applicable".into())
    };

    // Non-volatile memory (002): what an adversary holding the machine while suspended sees,
    // and a rollback of the global state counter s.
    if !alone.at_rest {
        for i in 5..8 {
            cell(i, false, "not applicable".into());
        }
        cell(8, stale.0, stale.1);
        cell(9, cross.0, cross.1);
        return Ok(out);
    }
    let pw = |x: crate::power::PowerError| ConfigError(x.to_string());
    let mut e = with("none")?;
    for k in 0..64u64 {
        e.write(BASE + k * 4096, &secret, 0).map_err(io)?;
    }
    e.suspend().map_err(pw)?;
    let view = e.mecu_offline_view().map_err(pw)?;
    let end = e.layout().end();
    let mut leaked = view.key.map(|_| "the key is readable".to_string());
    for a in e.untrusted().touched_pages(0, end) {
        e.untrusted().read(a, &mut page);
        if page.windows(8).any(|w| w == &secret[..8]) {
            leaked = Some(format!("plaintext at 0x{:x}", a));
            break;
        }
    }
    cell(5, leaked.is_some(), leaked.unwrap_or_else(|| "no plaintext, no key".into()));
    let (p1, p2) = (b"attack at dawn!!", b"retreat at nine!");
    for (i, on_device) in [(6, true), (7, false)] {
        let mut e = Engine::new(&s_kept(on_device)?, seed)?;
        e.suspend().map_err(pw)?;
        e.resume().map_err(pw)?;
        e.write(VICTIM, p1, 0).map_err(io)?;
        e.suspend().map_err(pw)?;
        let c1 = raw(&mut e, VICTIM);
        let rolled = e.mecu_set_state_counter(0);
        e.resume().map_err(pw)?;
        e.write(VICTIM, p2, 0).map_err(io)?;
        e.suspend().map_err(pw)?;
        let c2 = raw(&mut e, VICTIM);
        let reuse = (0..16).all(|k| c1[k] ^ c2[k] == p1[k] ^ p2[k]);
        let why = match (&rolled, reuse) {
            (Err(x), _) => format!("refused: {}", x),
            (Ok(_), true) => "XOR of the ciphertexts is the XOR of the plaintexts".into(),
            (Ok(_), false) => "rolled back, but no pad reuse".into(),
        };
        cell(i, rolled.is_ok() && reuse, why);
    }
    cell(8, stale.0, stale.1);
    cell(9, cross.0, cross.1);
    Ok(out)
}

/// The attacks of seed 001 on code authentication (§5), each refused at the fetch.
pub const CODE_ATTACKS: &[&str] = &[
    "run the unmodified program",
    "inject code (change instruction bytes)",
    "splice a block and its tag to another address",
    "replay a block and tag of another program",
    "forge a tag for injected code",
    "tamper with TP's target (shift the tag table)",
];

/// Code lines of the program the code attacks fetch.
const CODE_LINES: u64 = 64;

/// A fresh engine holding a signed program of `CODE_LINES` lines at `BASE` (its bytes differ
/// by `variant`), written through the processor, signed by the loader, flushed to memory.
fn signed_program(p: &Params, seed: u64, pid: u32, variant: u64) -> Result<Engine, ConfigError> {
    let mut p = p.clone();
    p.set("auth.program_id", &pid.to_string())?;
    p.set("auth.sign_unsigned", "false")?;
    let mut e = Engine::new(&p, seed)?;
    let b = e.line();
    let lines = CODE_LINES * 64 / b;
    let code: Vec<u8> = (0..CODE_LINES).flat_map(|k| value(k, 100 + variant)).collect();
    let cerr = |x: crate::IntegrityError| ConfigError(x.to_string());
    e.write(BASE, &code, 0).map_err(cerr)?;
    e.sign_code(BASE, &code[..(lines * b) as usize]).map_err(cerr)?;
    e.flush(0).map_err(cerr)?;
    Ok(e)
}

/// Fetch every line of the program: the first refusal, or none.
fn fetched(e: &mut Engine) -> (bool, String) {
    let b = e.line();
    for a in (BASE..BASE + CODE_LINES * 64).step_by(b as usize) {
        let r = e.access(a, crate::AccessKind::Fetch, 0).and_then(|_| e.settle());
        if let Err(x) = r {
            return (true, x.to_string());
        }
    }
    (false, "every block fetched and executed".into())
}

/// The tag slot of `addr` and its bytes.
fn tag_of(e: &Engine, addr: u64) -> (u64, u64) {
    let m = e.metadata_of(addr).into_iter().find(|m| m.kind == MetaKind::CodeTag).expect("code authentication on");
    (m.addr, m.len)
}

fn copy_raw(e: &mut Engine, from_engine: Option<&Engine>, from: u64, to: u64, n: u64) {
    let mut buf = vec![0u8; n as usize];
    match from_engine {
        Some(o) => o.untrusted_ref().read(from, &mut buf),
        None => e.untrusted().read(from, &mut buf),
    }
    e.untrusted().write(to, &buf);
}

/// Run every code attack against the code authentication configured in `p` (with whatever
/// integrity and encryption it also names).
pub fn attack_codeauth(p: &Params, seed: u64) -> Result<Vec<Outcome>, ConfigError> {
    let mut out = Vec::new();
    let mut cell = |attack: &'static str, expected: bool, (detected, detail): (bool, String)| {
        // Code authentication refuses at the fetch (001 §4.1).
        let declared = if expected { Detection::Access } else { Detection::Never };
        out.push(Outcome { attack, applicable: true, detected, expected, when: detected.then_some(Detection::Access), declared, detail });
    };
    let victim = BASE + 5 * 64;
    let other = BASE + 9 * 64;
    let b = signed_program(p, seed, 1, 0)?.line();

    let mut e = signed_program(p, seed, 1, 0)?;
    cell(CODE_ATTACKS[0], false, fetched(&mut e));

    let mut e = signed_program(p, seed, 1, 0)?;
    flip(&mut e, victim + 3, 2);
    cell(CODE_ATTACKS[1], true, fetched(&mut e));

    // The block at `other` with its tag, put at `victim` and `victim`'s tag slot.
    let mut e = signed_program(p, seed, 1, 0)?;
    let (vt, n) = tag_of(&e, victim);
    let (ot, _) = tag_of(&e, other);
    copy_raw(&mut e, None, other, victim, b);
    copy_raw(&mut e, None, ot, vt, n);
    cell(CODE_ATTACKS[2], true, fetched(&mut e));

    // Program 2 (other code, same processor key) at the same address: its block and tag.
    let mut e = signed_program(p, seed, 1, 0)?;
    let o = signed_program(p, seed, 2, 1)?;
    copy_raw(&mut e, Some(&o), victim, victim, b);
    copy_raw(&mut e, Some(&o), vt, vt, n);
    cell(CODE_ATTACKS[3], true, fetched(&mut e));

    // Injected bytes with a tag the adversary made up (no key: any value is a guess).
    let mut e = signed_program(p, seed, 1, 0)?;
    flip(&mut e, victim + 7, 5);
    let forged: Vec<u8> = value(77, 3)[..n as usize].to_vec();
    e.untrusted().write(vt, &forged);
    cell(CODE_ATTACKS[4], true, fetched(&mut e));

    // TP's target: the table moved by one tag line (as if TP pointed one line on).
    let mut e = signed_program(p, seed, 1, 0)?;
    let first = tag_of(&e, BASE).0;
    let table = tag_of(&e, BASE + (CODE_LINES * 64 - b)).0 + n - first;
    let mut t = vec![0u8; table as usize];
    e.untrusted().read(first + b, &mut t[..(table - b.min(table)) as usize]);
    e.untrusted().write(first, &t);
    cell(CODE_ATTACKS[5], true, fetched(&mut e));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(integ: &str, enc: &str) -> Params {
        crate::testutil::params(integ, enc, &["l2.size=32KiB"])
    }

    #[test]
    fn every_scheme_pair_does_what_it_declares_and_mac_misses_replay() {
        for (integ, enc) in crate::registry::pair_names() {
            {
                let cells = attack_all(&params(integ, enc), 3).unwrap();
                assert_eq!(cells.len(), ATTACKS.len());
                for c in &cells {
                    assert!(c.ok(), "{}+{}: {}: noticed {:?}, declared {:?}: {}", integ, enc, c.attack, c.when, c.declared, c.detail);
                }
                if enc == "none" {
                    // The seeds' own statement, independent of the declarations (and Intel's
                    // for TDX's MACs: no replay protection).
                    let replay = cells.iter().find(|c| c.attack == "replay a block with its metadata").unwrap();
                    assert_eq!(replay.detected, !matches!(integ, "mac" | "none" | "tdx"), "{}", integ);
                }
            }
        }
    }

    #[test]
    fn memory_protection_as_shipped_does_what_the_vendors_document() {
        // Independent of the declarations: MKTME/SEV (AES-XTS, a key per key ID) leave replay,
        // splicing and tampering unnoticed and leak rewrites; TDX's MAC notices tampering,
        // splicing and key-ID mix-ups, not replay (Intel's TDX white paper).
        let row = |cells: &[Outcome], attack: &str| cells.iter().find(|c| c.attack == attack).unwrap().clone();
        let alone = attack_all(&params("none", "xts"), 3).unwrap();
        for a in ["flip a data bit", "replay a block with its metadata", "splice a block to another address", "read a line under another key ID", "put back a line written under another key ID"] {
            let c = row(&alone, a);
            assert!(c.applicable && !c.detected, "xts: {}: {}", a, c.detail);
        }
        assert!(row(&alone, "read a line under another key ID").detail.contains("read garbage"));
        let tdx = attack_all(&params("tdx", "xts"), 3).unwrap();
        for (a, noticed) in [
            ("flip a data bit", true),
            ("flip a MAC bit", true),
            ("splice a block to another address", true),
            ("read a line under another key ID", true),
            ("put back a line written under another key ID", true),
            ("replay a block with its metadata", false),
            ("replay all of memory", false),
        ] {
            let c = row(&tdx, a);
            assert_eq!(c.detected, noticed, "tdx+xts: {}: {}", a, c.detail);
            assert!(c.ok(), "tdx+xts: {}", a);
        }
        // Without the key ID in the MAC, a line of another key ID passes: its ciphertext and
        // address are unchanged.
        let mut p = params("tdx", "xts");
        p.set("tdx.bind_key_id", "false").unwrap();
        let unbound = attack_all(&p, 3).unwrap();
        for a in ["read a line under another key ID", "put back a line written under another key ID"] {
            let c = row(&unbound, a);
            assert!(c.applicable && !c.detected && c.ok(), "unbound: {}: {}", a, c.detail);
        }
        let enc = attack_encryption(&params("none", "xts"), 5).unwrap();
        assert!(row(&enc, "equal plaintexts give equal ciphertexts on a rewrite").detected, "XTS is deterministic per address");
        assert!(!row(&enc, "equal plaintexts give equal ciphertexts at two addresses").detected);
        let cross = row(&enc, "read another key ID's line and get its plaintext");
        assert!(cross.applicable && !cross.detected && cross.ok(), "{}", cross.detail);
        // With one key ID there are no domains: the rows do not apply.
        let one = attack_all(&crate::testutil::params("tdx", "xts", &["l2.size=32KiB", "xts.key_ids=1"]), 3).unwrap();
        assert!(!row(&one, "read a line under another key ID").applicable);
    }

    #[test]
    fn a_detection_later_than_declared_or_a_miss_is_not_ok() {
        let cell = |detected, expected, when, declared| Outcome { attack: "a", applicable: true, detected, expected, when, declared, detail: String::new() };
        assert!(cell(true, true, Some(Detection::Access), Detection::Access).ok());
        assert!(cell(true, true, Some(Detection::Check), Detection::Check).ok());
        assert!(!cell(true, true, Some(Detection::Check), Detection::Access).ok(), "a tree noticing only at the check");
        assert!(!cell(false, true, None, Detection::Access).ok(), "a miss");
        assert!(!cell(true, false, Some(Detection::Access), Detection::Never).ok(), "noticing the unprotected region");
    }

    #[test]
    fn the_seed_schemes_declare_what_the_seeds_say() {
        // Independent of the declarations: 003 §4 (trees notice everything at the access, a MAC
        // misses replay), 000 §3.2 (the log hash notices at its check), 000 §4 and 004 §2 (a
        // counter mode is malleable, a fresh vector or counter hides rewrites), 002 §4 (the
        // MECU keeps one pad per block and resume cycle).
        let g = |i: &str, e: &str| registry::guarantees(&params(i, e)).unwrap();
        for i in ["none", "mac", "naive", "chash", "mhash", "lhash"] {
            let d = g(i, "none");
            let want = match i {
                "none" => (Detection::Never, Detection::Never, Detection::Never),
                "mac" => (Detection::Access, Detection::Access, Detection::Never),
                "lhash" => (Detection::Check, Detection::Check, Detection::Check),
                _ => (Detection::Access, Detection::Access, Detection::Access),
            };
            assert_eq!((d.tamper, d.splice, d.replay), want, "{}", i);
        }
        for e in ["none", "direct", "otp", "ocb", "tdes", "mecu"] {
            let d = g("none", e);
            assert_eq!(d.confidential, e != "none", "{}", e);
            assert_eq!(d.hides_equal_lines, e != "none", "{}", e);
            assert_eq!(d.hides_rewrites, !matches!(e, "none" | "mecu"), "{}", e);
            assert_eq!(d.malleable, matches!(e, "none" | "otp" | "mecu"), "{}", e);
            assert_eq!(d.at_rest, e == "mecu", "{}", e);
            assert!(!d.stale_counters_reuse_pads, "{}: its counters or stamps come from the chip", e);
            assert_eq!(d.tamper != Detection::Never, e == "ocb", "{}: only ocb authenticates by default", e);
        }
        // Per-chunk MACs (004 §3.3) make counter mode and tdes notice changes, not replay.
        for (e, key) in [("otp", "otp.chunk_mac_bytes=4"), ("tdes", "tdes.chunk_mac_bytes=4")] {
            let d = registry::guarantees(&crate::testutil::params("none", e, &[key])).unwrap();
            assert_eq!((d.tamper, d.replay, d.malleable), (Detection::Access, Detection::Never, false), "{}", e);
        }
    }

    #[test]
    fn every_encryption_scheme_meets_the_seeds_expectations() {
        for enc in crate::registry::ENCRYPTION_SCHEMES {
            let cells = attack_encryption(&params("none", enc), 5).unwrap();
            for c in &cells {
                assert!(c.ok(), "{}: {}: {}", enc, c.attack, c.detail);
            }
        }
    }

    #[test]
    fn code_attacks_are_refused_at_fetch_alone_and_with_integrity_and_encryption() {
        for (integ, enc, ca) in [("none", "none", "pr-trivium"), ("none", "none", "pr-aes"), ("chash", "otp", "pr-trivium"), ("none", "otp", "pr-aes")] {
            for line in [if integ == "chash" { "32B" } else { "16B" }, "64B", "256B"] {
                let mut p = params(integ, enc);
                p.set("codeauth", ca).unwrap();
                p.set("l2.line", line).unwrap();
                let cells = attack_codeauth(&p, 4).unwrap();
                assert_eq!(cells.len(), CODE_ATTACKS.len());
                for c in &cells {
                    assert!(c.ok(), "{}+{}+{} {}: {}: {}", integ, enc, ca, line, c.attack, c.detail);
                }
                if integ == "none" && enc == "none" {
                    // Nothing else protects the code: code authentication itself refused it.
                    for c in &cells[1..] {
                        assert!(c.detail.contains("code authentication: block 0x"), "{}: {}", c.attack, c.detail);
                    }
                }
            }
        }
    }

    #[test]
    fn without_code_authentication_injected_code_runs() {
        let mut e = Engine::new(&params("none", "none"), 1).unwrap();
        e.write(BASE, &value(1, 0), 0).unwrap();
        assert!(e.sign_code(BASE, &value(1, 0)).unwrap_err().what.contains("code authentication is off"));
        e.flush(0).unwrap();
        flip(&mut e, BASE + 3, 1);
        assert!(e.access(BASE, crate::AccessKind::Fetch, 0).is_ok());
    }

    #[test]
    fn read_without_checking_is_confined_to_the_dma_region() {
        let mut e = Engine::new(&params("chash", "otp"), 1).unwrap();
        let (base, size) = e.dma_region();
        assert!(base >= e.data_size(), "outside protected memory");
        let mut b = [0u8; 8];
        assert!(e.read_without_checking(base + size - 8, &mut b, 0).is_ok());
        let err = e.read_without_checking(0x1000, &mut b, 0).unwrap_err();
        assert!(err.contains("outside the unprotected region"), "{}", err);
        assert!(e.read_without_checking(base + size - 4, &mut b, 0).is_err());
    }
}
