//! The vocabulary of declarations (in the spirit of Ramulator 2): each scheme module and each
//! part of the machine names its parameters with a default, a unit and a one-line meaning; a
//! scheme also declares what it guarantees against the adversary and which regions of
//! untrusted memory it lays out and protects. Configuration is data (presets only override);
//! the documentation (`secmem schemes`, `secmem presets NAME`), the adversary's expectations,
//! the security tests and the fuzzers are derived from these declarations.
//!
//! A leaf: it names nothing of the crate but parameters. The registry of every scheme lives
//! above the schemes, in `registry`.

use crate::params::{Params, Value};

/// A declared default. Machine parameters have none: every machine comes from a preset (the
/// seeds' Table 1s), which must give them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Def {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(&'static str),
    /// Required from the preset.
    Preset,
}

/// One parameter: `key` (dotted), its default, its unit and what it means.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub key: &'static str,
    pub default: Def,
    pub unit: &'static str,
    pub meaning: &'static str,
}

/// A parameter with a default.
pub const fn param(key: &'static str, default: Def, unit: &'static str, meaning: &'static str) -> Param {
    Param { key, default, unit, meaning }
}

/// One statistic a component reports: `key` (dotted, under the component's prefix), its unit
/// and what it means. A key may be a pattern for keys named at run time: in a segment, `*`
/// stands for any text and `#` for a number (`ptw.reads_from_*`, `core#.ipc`); a last segment
/// `*` alone stands for any rest (`ci95.*`). A statistic that reports a parameter's value
/// under the parameter's own key is declared by the parameter.
#[derive(Clone, Copy, Debug)]
pub struct Statistic {
    pub key: &'static str,
    pub unit: &'static str,
    pub meaning: &'static str,
}

/// A statistic's declaration.
pub const fn stat(key: &'static str, unit: &'static str, meaning: &'static str) -> Statistic {
    Statistic { key, unit, meaning }
}

/// Whether one dotted segment matches a pattern segment (`*`: any text, `#`: digits).
fn segment_matches(pat: &str, seg: &str) -> bool {
    let Some(i) = pat.find(['*', '#']) else { return pat == seg };
    let (head, wild, tail) = (&pat[..i], &pat[i..i + 1], &pat[i + 1..]);
    let Some(rest) = seg.strip_prefix(head) else { return false };
    (1..=rest.len()).any(|n| {
        rest.is_char_boundary(n)
            && (wild == "*" || rest[..n].bytes().all(|b| b.is_ascii_digit()))
            && segment_matches(tail, &rest[n..])
    })
}

impl Statistic {
    /// Whether this statistic is a pattern standing for keys named at run time.
    pub fn is_pattern(&self) -> bool {
        self.key.contains(['*', '#'])
    }

    /// Whether `key` is this statistic (or one of the keys its pattern stands for).
    pub fn matches(&self, key: &str) -> bool {
        let mut want = self.key.split('.').peekable();
        let mut got = key.split('.');
        loop {
            match (want.next(), got.next()) {
                (None, None) => return true,
                (Some("*"), Some(_)) if want.peek().is_none() => return true,
                (Some(w), Some(g)) if segment_matches(w, g) => {}
                _ => return false,
            }
        }
    }
}

/// What a component is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Integrity,
    Encryption,
    /// Code authentication of instruction fetches (seed 001).
    CodeAuth,
    /// A part of the machine (core, caches, memory, engines, stages).
    Machine,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Integrity => "integrity",
            Kind::Encryption => "encryption",
            Kind::CodeAuth => "codeauth",
            Kind::Machine => "machine",
        }
    }
}

/// A component's declaration: its name, what it is, a summary, the seed section it
/// implements, its parameters and the statistics it reports.
#[derive(Clone, Copy, Debug)]
pub struct Component {
    pub name: &'static str,
    pub kind: Kind,
    pub summary: &'static str,
    pub source: &'static str,
    pub params: &'static [Param],
    pub stats: &'static [Statistic],
}

impl Def {
    pub fn value(self) -> Option<Value> {
        match self {
            Def::Int(v) => Some(Value::Int(v)),
            Def::Float(v) => Some(Value::Float(v)),
            Def::Bool(v) => Some(Value::Bool(v)),
            Def::Str(v) => Some(Value::Str(v.to_string())),
            Def::Preset => None,
        }
    }
}

/// Every parameter of `components` with its declared default (those without one are left
/// to the preset), as the base a preset overrides.
pub fn defaults<'a>(components: impl IntoIterator<Item = &'a Component>) -> Params {
    let mut p = Params::default();
    for c in components {
        for d in c.params {
            if let Some(v) = d.default.value() {
                p.insert(d.key, v);
            }
        }
    }
    p
}

/// The declaration of `key` among `components`.
pub fn find<'a>(components: impl IntoIterator<Item = &'a Component>, key: &str) -> Option<(&'a Component, &'a Param)> {
    components.into_iter().find_map(|c| c.params.iter().find(|p| p.key == key).map(|p| (c, p)))
}

/// The declaration of statistic `key` among `components`, as (component, declared key, unit,
/// meaning): a statistic declared by that key, else the parameter of that key (a statistic
/// reporting a parameter's value), else a pattern that stands for it.
pub fn find_stat<'a>(
    components: impl IntoIterator<Item = &'a Component> + Clone,
    key: &str,
) -> Option<(&'a Component, &'static str, &'static str, &'static str)> {
    let exact = |c: &'a Component| c.stats.iter().find(|s| s.key == key).map(|s| (c, s.key, s.unit, s.meaning));
    let pattern = |c: &'a Component| c.stats.iter().find(|s| s.is_pattern() && s.matches(key)).map(|s| (c, s.key, s.unit, s.meaning));
    components
        .clone()
        .into_iter()
        .find_map(exact)
        .or_else(|| find(components.clone(), key).map(|(c, p)| (c, p.key, p.unit, p.meaning)))
        .or_else(|| components.into_iter().find_map(pattern))
}

/// The names of a scheme registry (a list of entries holding a `decl: &Component`), in
/// registration order, as a constant array.
macro_rules! registry_names {
    ($schemes:expr) => {{
        let mut n = [""; $schemes.len()];
        let mut i = 0;
        while i < n.len() {
            n[i] = $schemes[i].decl.name;
            i += 1;
        }
        n
    }};
}
pub(crate) use registry_names;

/// When an attack on what a scheme protects is noticed. Ordered: earlier is smaller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Detection {
    /// At the access that reads what was changed: changed bytes are never used unchecked.
    Access,
    /// Only at the next full check (lhash's integrity-check, 000 §3.2): changed bytes may be
    /// used until then, and that check fails.
    Check,
    /// Not at all.
    Never,
}

impl Detection {
    pub fn name(self) -> &'static str {
        match self {
            Detection::Access => "at the access",
            Detection::Check => "at the next check",
            Detection::Never => "never",
        }
    }
}

/// What a scheme promises against the seeds' adversary, who reads and writes untrusted
/// memory at will while the chip's own state stays out of reach. Integrity schemes promise
/// detection; encryption schemes promise privacy, and some also detect (a tag or MACs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guarantees {
    /// A changed bit of protected data or of the scheme's metadata.
    pub tamper: Detection,
    /// A line and its per-line metadata copied over another line's.
    pub splice: Detection,
    /// An old line with all its metadata, or all of memory, put back.
    pub replay: Detection,
    /// No plaintext of protected memory is ever in untrusted memory.
    pub confidential: bool,
    /// Equal plaintexts at two addresses give different ciphertexts.
    pub hides_equal_lines: bool,
    /// The same plaintext rewritten at one address gives a new ciphertext.
    pub hides_rewrites: bool,
    /// Flipping bits of a line's ciphertext flips the same bits of what the processor reads,
    /// unnoticed (counter modes without MACs; no encryption at all).
    pub malleable: bool,
    /// Memory stays private while the system is suspended or off (seed 002: the key leaves
    /// with a removable device); such a scheme takes power events.
    pub at_rest: bool,
    /// An adversary who sets back state kept outside the chip (the MECU's state counter s
    /// where it is kept on the unit, 002 §4.3) makes pads repeat.
    pub rollback_reuses_pads: bool,
    /// A line's counters set back in memory make its next write-back reuse a pad (counters
    /// kept in memory with nothing on chip or in a tree to tell).
    pub stale_counters_reuse_pads: bool,
    /// Pages carry key IDs, each with its own key (MKTME, SEV): a line read under another
    /// key ID than it was written with decrypts to garbage.
    pub key_domains: bool,
    /// A line read under another key ID, or put back from another key ID's write at the same
    /// address (a splice across key IDs), is noticed (TDX's MAC binds the key ID).
    pub cross_domain: Detection,
}

impl Guarantees {
    /// Nothing promised: memory as it is (no integrity, no encryption).
    pub const NONE: Guarantees = Guarantees {
        tamper: Detection::Never,
        splice: Detection::Never,
        replay: Detection::Never,
        confidential: false,
        hides_equal_lines: false,
        hides_rewrites: false,
        malleable: true,
        at_rest: false,
        rollback_reuses_pads: false,
        stale_counters_reuse_pads: false,
        key_domains: false,
        cross_domain: Detection::Never,
    };

    /// An integrity scheme's promise: detection of each attack, nothing about privacy. A line
    /// read under the wrong key ID decrypts to garbage, so a scheme that checks what the
    /// processor reads notices it as it notices tampering (one that checks ciphertext, like
    /// TDX's MAC, must bind the key ID to say so).
    pub const fn detecting(tamper: Detection, splice: Detection, replay: Detection) -> Guarantees {
        Guarantees { tamper, splice, replay, malleable: matches!(tamper, Detection::Never), cross_domain: tamper, ..Guarantees::NONE }
    }

    /// What a pair of schemes promises together: each attack is noticed as soon as either
    /// notices it; memory is private if either keeps it so; bit flips go through only if both
    /// let them and nothing notices them.
    pub fn and(self, o: Guarantees) -> Guarantees {
        let tamper = self.tamper.min(o.tamper);
        Guarantees {
            tamper,
            splice: self.splice.min(o.splice),
            replay: self.replay.min(o.replay),
            confidential: self.confidential || o.confidential,
            hides_equal_lines: self.hides_equal_lines || o.hides_equal_lines,
            hides_rewrites: self.hides_rewrites || o.hides_rewrites,
            malleable: self.malleable && o.malleable && tamper == Detection::Never,
            at_rest: self.at_rest || o.at_rest,
            rollback_reuses_pads: self.rollback_reuses_pads || o.rollback_reuses_pads,
            stale_counters_reuse_pads: self.stale_counters_reuse_pads || o.stale_counters_reuse_pads,
            key_domains: self.key_domains || o.key_domains,
            cross_domain: self.cross_domain.min(o.cross_domain),
        }
    }

    /// One line per promise, as `secmem schemes NAME` prints them: (what, promise).
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
        vec![
            ("tampering noticed", self.tamper.name().into()),
            ("splicing noticed", self.splice.name().into()),
            ("replay noticed", self.replay.name().into()),
            ("plaintext kept out of memory", yes(self.confidential)),
            ("equal lines hidden", yes(self.hides_equal_lines)),
            ("rewrites hidden", yes(self.hides_rewrites)),
            ("malleable", yes(self.malleable)),
            ("private while suspended or off", yes(self.at_rest)),
            ("rollback of the state counter reuses pads", yes(self.rollback_reuses_pads)),
            ("stale counters in memory reuse pads", yes(self.stale_counters_reuse_pads)),
            ("key IDs per page (other domains read garbage)", yes(self.key_domains)),
            ("cross-key-ID reads and splices noticed", self.cross_domain.name().into()),
        ]
    }
}

/// What a region of untrusted memory holds: what schemes lay out, and what they protect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Program memory.
    Data,
    /// Hash-tree nodes.
    Tree,
    /// MACs, tags and their bitmaps.
    Macs,
    /// Counters and time stamps of counter modes and nonces (otp, ocb, tdes, mecu).
    Counters,
    /// Integrity time stamps and the page table of a log hash.
    Log,
    /// Random vectors (direct).
    Vectors,
    /// Code authentication tags (seed 001).
    CodeTags,
    /// The unprotected region for untrusted I/O.
    Unprotected,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Data => "data",
            Role::Tree => "tree nodes",
            Role::Macs => "MACs",
            Role::Counters => "counters",
            Role::Log => "log stamps",
            Role::Vectors => "random vectors",
            Role::CodeTags => "code tags",
            Role::Unprotected => "unprotected I/O",
        }
    }

    /// What moves through an encryption scheme as whole lines: program data and hash-tree
    /// chunks (held in the L2 like data, 003 §4.3). Per-line metadata (MACs, stamps, a log's
    /// page table) goes to memory as it is.
    pub const LINES: &'static [Role] = &[Role::Data, Role::Tree];
}

/// Which regions a scheme lays out and which it protects (integrity: verifies; encryption:
/// carries encrypted). The engine builds the scheme that lays out what the other protects
/// first: a tree over counter blocks is built after the counters' scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coverage {
    pub lays_out: &'static [Role],
    pub protects: &'static [Role],
    /// Regions it lays out whose every read and write goes through the machine's guard hooks
    /// (`Machine::check_meta`, `update_meta`), so another scheme may protect them (a tree over
    /// counters needs the counters' scheme to hand it each block).
    pub guarded: &'static [Role],
}

impl Coverage {
    pub const NOTHING: Coverage = Coverage { lays_out: &[], protects: &[], guarded: &[] };

    /// Whether this scheme protects any region `other` lays out.
    pub fn needs(&self, other: &Coverage) -> bool {
        self.protects.iter().any(|r| other.lays_out.contains(r))
    }
}
