//! Every scheme, in one place above them: the engine builds schemes from here, and the CLI,
//! the documentation, the adversary, the security tests and the fuzzers find them here. A new
//! scheme is its own file (with its `DECL` and `SCHEME`) and one line in a list below.

use crate::codeauth;
use crate::decl::{defaults, registry_names, Component, Coverage, Detection, Guarantees, Kind, Role};
use crate::encryption::{self, EncryptionScheme};
use crate::integrity::{self, IntegrityScheme};
use crate::machine::MACHINE;
use crate::params::{ConfigError, Params};

/// Every integrity scheme, in the order they are listed.
pub const INTEGRITY: &[&IntegrityScheme] = &[
    &integrity::none::SCHEME,
    &integrity::mac::SCHEME,
    &integrity::naive::SCHEME,
    &integrity::chash::SCHEME,
    &integrity::mhash::SCHEME,
    &integrity::lhash::SCHEME,
    &integrity::bonsai::SCHEME,
    &integrity::tdx::SCHEME,
];

/// Every encryption scheme, in the order they are listed.
pub const ENCRYPTION: &[&EncryptionScheme] = &[
    &encryption::none::SCHEME,
    &encryption::direct::SCHEME,
    &encryption::otp::SCHEME,
    &encryption::ocb::SCHEME,
    &encryption::tdes::SCHEME,
    &encryption::mecu::SCHEME,
    &encryption::split::SCHEME,
    &encryption::sgx::SCHEME,
    &encryption::xts::SCHEME,
];

const INTEGRITY_NAMES: [&str; INTEGRITY.len()] = registry_names!(INTEGRITY);
const ENCRYPTION_NAMES: [&str; ENCRYPTION.len()] = registry_names!(ENCRYPTION);

/// The integrity schemes' names, in registration order.
pub const INTEGRITY_SCHEMES: &[&str] = &INTEGRITY_NAMES;
/// The encryption schemes' names, in registration order.
pub const ENCRYPTION_SCHEMES: &[&str] = &ENCRYPTION_NAMES;

/// The integrity scheme called `name`.
pub fn integrity(name: &str) -> Result<&'static IntegrityScheme, ConfigError> {
    INTEGRITY.iter().copied().find(|s| s.decl.name == name).ok_or_else(|| {
        ConfigError(format!("unknown integrity scheme '{}' (choose from {})", name, INTEGRITY_SCHEMES.join(", ")))
    })
}

/// The encryption scheme called `name`.
pub fn encryption(name: &str) -> Result<&'static EncryptionScheme, ConfigError> {
    ENCRYPTION.iter().copied().find(|s| s.decl.name == name).ok_or_else(|| {
        ConfigError(format!("unknown encryption scheme '{}' (choose from {})", name, ENCRYPTION_SCHEMES.join(", ")))
    })
}

/// Whether a pair can be built, from what its schemes declare: every region the integrity
/// scheme protects besides program lines (counter blocks, for a tree over counters) must be
/// laid out by the encryption scheme, handed to the guard hooks, and not protected by it.
pub fn compatible(i: &IntegrityScheme, e: &EncryptionScheme) -> Result<(), ConfigError> {
    let (ic, ec) = (&i.coverage, &e.coverage);
    for &r in ic.protects.iter().filter(|r| !Role::LINES.contains(r)) {
        let fits = |c: &Coverage| c.lays_out.contains(&r) && c.guarded.contains(&r) && !c.protects.contains(&r);
        if fits(ec) {
            continue;
        }
        let fit: Vec<&str> = ENCRYPTION.iter().filter(|x| fits(&x.coverage)).map(|x| x.decl.name).collect();
        let why = if !ec.lays_out.contains(&r) {
            "does not keep"
        } else if ec.protects.contains(&r) {
            "protects itself"
        } else {
            "does not hand to another scheme's checks"
        };
        return Err(ConfigError(format!(
            "integrity '{}' protects the {} of the encryption scheme, which '{}' {}: pair it with {}",
            i.decl.name,
            r.name(),
            e.decl.name,
            why,
            fit.join(" or ")
        )));
    }
    Ok(())
}

/// Every pair that can be built, by integrity scheme then encryption scheme, in registration
/// order: what the attack matrix, the security tests and the fuzzers iterate.
pub fn pairs() -> impl Iterator<Item = (&'static IntegrityScheme, &'static EncryptionScheme)> {
    INTEGRITY.iter().flat_map(|&i| ENCRYPTION.iter().map(move |&e| (i, e))).filter(|(i, e)| compatible(i, e).is_ok())
}

/// The names of every pair that can be built, as `pairs`.
pub fn pair_names() -> Vec<(&'static str, &'static str)> {
    pairs().map(|(i, e)| (i.decl.name, e.decl.name)).collect()
}

/// What the scheme pair configured in `p` promises together for program data.
pub fn guarantees(p: &Params) -> Result<Guarantees, ConfigError> {
    Ok(Pair::of(p)?.data())
}

/// The declarations of the pair configured in `p`.
#[derive(Clone, Copy, Debug)]
pub struct Pair {
    pub integrity: Guarantees,
    pub integrity_coverage: Coverage,
    pub encryption: Guarantees,
    pub encryption_coverage: Coverage,
}

impl Pair {
    pub fn of(p: &Params) -> Result<Pair, ConfigError> {
        Pair::new(integrity(&p.str("integrity")?)?, encryption(&p.str("encryption")?)?, p)
    }

    pub fn new(i: &IntegrityScheme, e: &EncryptionScheme, p: &Params) -> Result<Pair, ConfigError> {
        compatible(i, e)?;
        // Built after the integrity scheme, the encryption carries its lines; before, none.
        let mut encryption_coverage = e.coverage;
        if !integrity_first(i, e) {
            encryption_coverage.protects = &[Role::Data];
        }
        Ok(Pair { integrity: (i.guarantees)(p)?, integrity_coverage: i.coverage, encryption: (e.guarantees)(p)?, encryption_coverage })
    }

    /// Program data: each attack noticed as soon as either scheme notices it.
    pub fn data(&self) -> Guarantees {
        self.integrity.and(self.encryption)
    }

    /// How soon a changed bit in a region holding `role` is noticed. The integrity scheme's
    /// own metadata is noticed by it, and by the encryption scheme only where that carries
    /// such lines (tree chunks; not per-line MACs or a log's stamps, which go to memory as
    /// they are). Anything else (data, the encryption's own metadata) changes what a read of
    /// data decrypts or checks, so it is noticed as data is.
    pub fn tamper_of(&self, role: Role) -> Detection {
        let own = self.integrity_coverage.lays_out.contains(&role) && !self.encryption_coverage.lays_out.contains(&role);
        if own {
            let carried = if self.encryption_coverage.protects.contains(&role) { self.encryption.tamper } else { Detection::Never };
            self.integrity.tamper.min(carried)
        } else {
            self.data().tamper
        }
    }
}

/// A scheme's declaration, guarantees under its default parameters and coverage, by kind and
/// name (`secmem schemes NAME`).
pub fn scheme(kind: Kind, name: &str) -> Result<(&'static Component, Guarantees, Coverage), ConfigError> {
    let p = defaults(engine_components());
    match kind {
        Kind::Integrity => integrity(name).and_then(|s| Ok((s.decl, (s.guarantees)(&p)?, s.coverage))),
        Kind::Encryption => encryption(name).and_then(|s| Ok((s.decl, (s.guarantees)(&p)?, s.coverage))),
        _ => Err(ConfigError(format!("{}: only integrity and encryption schemes declare guarantees", name))),
    }
}

/// Whether the integrity scheme of a pair is built first. It is, as the seeds order them,
/// unless it protects a region the encryption scheme lays out (a tree over counter blocks
/// waits for the counters' scheme). An encryption scheme carries the lines laid out before
/// it: tree chunks when integrity comes first, none of a tree built after it.
pub fn integrity_first(i: &IntegrityScheme, e: &EncryptionScheme) -> bool {
    !i.coverage.needs(&e.coverage)
}

/// The engine's components: the machine parts it reads and every scheme (the core model adds
/// its own, `secmem_sim::components`).
pub fn engine_components() -> Vec<&'static Component> {
    let mut v: Vec<&'static Component> = MACHINE.iter().collect();
    v.extend(INTEGRITY.iter().map(|s| s.decl));
    v.extend(ENCRYPTION.iter().map(|s| s.decl));
    v.push(&codeauth::UNIT);
    v.extend(codeauth::SCHEMES.iter().map(|s| s.decl));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decl::{Detection, Role};

    const TREE_OVER_COUNTERS: IntegrityScheme = IntegrityScheme {
        decl: &integrity::none::DECL,
        guarantees: |_| Ok(Guarantees::NONE),
        coverage: Coverage { lays_out: &[Role::Tree], protects: &[Role::Counters], guarded: &[] },
        build: integrity::none::SCHEME.build,
    };
    #[test]
    fn the_scheme_that_lays_out_what_the_other_protects_is_built_first() {
        // The seeds' pairs: integrity first, encryption then carries the tree's chunks.
        for (i, e) in pairs() {
            let over_counters = i.coverage.protects.contains(&Role::Counters);
            assert_eq!(integrity_first(i, e), !over_counters, "{}+{}", i.decl.name, e.decl.name);
        }
        // A tree over counter blocks waits for the counters' scheme, which then carries none
        // of the tree's chunks: only the tree notices a change there.
        assert!(!integrity_first(&TREE_OVER_COUNTERS, &encryption::split::SCHEME));
        let p = crate::testutil::params("none", "split", &[]);
        let pair = Pair::new(&TREE_OVER_COUNTERS, &encryption::split::SCHEME, &p).unwrap();
        assert_eq!(pair.tamper_of(Role::Tree), Detection::Never);
        // It pairs only with a scheme that hands its counters to the guard hooks.
        let err = Pair::new(&TREE_OVER_COUNTERS, &encryption::ocb::SCHEME, &p).unwrap_err();
        assert!(err.0.contains("'ocb' does not hand to another scheme's checks: pair it with split"), "{}", err);
        let err = compatible(&TREE_OVER_COUNTERS, &encryption::sgx::SCHEME).unwrap_err();
        assert!(err.0.contains("'sgx' protects itself"), "{}", err);
        let err = compatible(&TREE_OVER_COUNTERS, &encryption::direct::SCHEME).unwrap_err();
        assert!(err.0.contains("'direct' does not keep"), "{}", err);
        let seeds = Pair::new(&integrity::chash::SCHEME, &encryption::ocb::SCHEME, &p).unwrap();
        assert_eq!(seeds.tamper_of(Role::Tree), Detection::Access);
    }

    #[test]
    fn a_pair_notices_an_attack_as_soon_as_either_scheme_does() {
        let p = |i: &str, e: &str| crate::testutil::params(i, e, &[]);
        let lo = Pair::of(&p("lhash", "ocb")).unwrap();
        // ocb's tag notices changed data at once; replay only lhash notices, at its check.
        assert_eq!((lo.data().tamper, lo.data().replay), (Detection::Access, Detection::Check));
        // lhash's stamps are not lines: ocb never sees them, only lhash's check does.
        assert_eq!(lo.tamper_of(Role::Log), Detection::Check);
        let co = Pair::of(&p("chash", "otp")).unwrap();
        assert_eq!(co.tamper_of(Role::Counters), Detection::Access, "a changed stamp garbles data the tree checks");
        assert!(!co.data().malleable && Pair::of(&p("none", "otp")).unwrap().data().malleable);
        let no = Pair::of(&p("none", "none")).unwrap().data();
        assert_eq!(no, Guarantees::NONE);
    }

    #[test]
    fn unknown_schemes_are_named_with_the_choices() {
        let err = integrity("bogus").err().unwrap();
        assert!(err.0.contains("unknown integrity scheme 'bogus'") && err.0.contains("chash"), "{}", err);
        let err = encryption("bogus").err().unwrap();
        assert!(err.0.contains("unknown encryption scheme 'bogus'") && err.0.contains("otp"), "{}", err);
    }
}
