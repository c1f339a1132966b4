//! secmem-sim: the timing model around the secure engine, and the run loop.

pub mod bench;
pub mod bpred;
pub mod btb;
pub mod checkpointed;
pub mod cpistack;
pub mod error;
pub mod hierarchy;
pub mod mmu;
pub mod multi;
pub mod ooo;
pub mod pagemap;
pub mod params;
pub mod presets;
pub mod run;
pub mod sample;
pub mod storeq;
mod warm;

pub use presets::{components, load as load_preset, preset_names, DEFAULT_PRESET};
pub use multi::{run_mix, MixInput};
pub use run::{run, run_sampled, RunOptions, RunResult};
pub use sample::Sampling;

use secmem_core::{ConfigError, Params};

/// A preset with `--integrity`/`--encryption` choices and `--set` overrides applied, in that
/// order, each refused with one clear line if wrong.
pub fn configure(
    preset: &str,
    integrity: Option<&str>,
    encryption: Option<&str>,
    sets: &[String],
) -> Result<Params, ConfigError> {
    let mut p = load_preset(preset)?;
    if let Some(i) = integrity {
        p.choice_set("integrity", i, secmem_core::registry::INTEGRITY_SCHEMES)?;
    }
    if let Some(e) = encryption {
        p.choice_set("encryption", e, secmem_core::registry::ENCRYPTION_SCHEMES)?;
    }
    for s in sets {
        p.set_str(s)?;
    }
    // Scheme names given through --set are checked here too.
    p.choice("integrity", secmem_core::registry::INTEGRITY_SCHEMES).map_err(scheme_err("integrity"))?;
    p.choice("encryption", secmem_core::registry::ENCRYPTION_SCHEMES).map_err(scheme_err("encryption"))?;
    p.choice("codeauth", secmem_core::codeauth::CODEAUTH_SCHEMES).map_err(scheme_err("codeauth"))?;
    // A pair whose schemes cannot work together (a tree over counters with a scheme keeping
    // none) is refused here too, before any run.
    let r = secmem_core::registry::integrity(&p.str("integrity")?)?;
    secmem_core::registry::compatible(r, secmem_core::registry::encryption(&p.str("encryption")?)?)?;
    params::cores(&p)?;
    Ok(p)
}

fn scheme_err(kind: &'static str) -> impl Fn(ConfigError) -> ConfigError {
    move |e| ConfigError(e.0.replacen(&format!("{}: unknown value", kind), &format!("unknown {} scheme", kind), 1))
}

#[cfg(test)]
mod tests;
