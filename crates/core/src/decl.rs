//! Components declare their own parameters (in the spirit of Ramulator 2): each scheme module
//! and each part of the machine names its keys with a default, a unit and a one-line meaning,
//! and registers itself. Configuration is data (presets only override), and the
//! documentation (`secmem schemes`, `secmem presets NAME`) is generated from these
//! declarations, so it cannot drift from what the code reads.

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
/// implements and its parameters.
#[derive(Clone, Copy, Debug)]
pub struct Component {
    pub name: &'static str,
    pub kind: Kind,
    pub summary: &'static str,
    pub source: &'static str,
    pub params: &'static [Param],
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

/// The engine's components: the machine parts it reads and every scheme (the core model
/// adds its own, `secmem_sim::components`).
pub fn engine_components() -> Vec<&'static Component> {
    let mut v: Vec<&'static Component> = crate::engine::MACHINE.iter().collect();
    v.extend(crate::integrity::SCHEMES.iter().map(|s| s.decl));
    v.extend(crate::encryption::SCHEMES.iter().map(|s| s.decl));
    v.push(&crate::codeauth::UNIT);
    v.extend(crate::codeauth::SCHEMES.iter().map(|s| s.decl));
    v
}

/// The names of a scheme registry (`SCHEMES`, whose entries hold a `decl: &Component`), in
/// registration order, as a constant array: the registry is the one list of schemes.
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
