//! The seeds' machines as data (`configs/*.toml`), built into the binary so a fresh install
//! needs no files; a path to a TOML file works too.

use secmem_core::decl::{self, Component};
use secmem_core::{ConfigError, Params};

pub const PRESETS: &[(&str, &str)] = &[
    ("suh2003", include_str!("../../../configs/suh2003.toml")),
    ("gassend2003", include_str!("../../../configs/gassend2003.toml")),
    ("shi2007", include_str!("../../../configs/shi2007.toml")),
    ("enck2008", include_str!("../../../configs/enck2008.toml")),
    ("champsim", include_str!("../../../configs/champsim.toml")),
    ("durahim2009", include_str!("../../../configs/durahim2009.toml")),
];

pub const DEFAULT_PRESET: &str = "suh2003";

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// Every component's declaration: the machine's parts and every scheme.
pub fn components() -> Vec<&'static Component> {
    let mut v = secmem_core::registry::engine_components();
    v.extend(crate::params::CORE.iter());
    v
}

/// Load a preset by name or path, following `inherit`, over the declared defaults: a
/// preset only overrides.
pub fn load(name_or_path: &str) -> Result<Params, ConfigError> {
    let own = load_depth(name_or_path, 0)?;
    let all = components();
    // A typo in a preset file must not silently do nothing. The cache levels a preset adds
    // (`caches.private`) have the keys every level has.
    let private = if own.contains("caches.private") { own.str("caches.private")? } else { String::new() };
    let level_keys: Vec<String> = private
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .flat_map(|level| crate::hierarchy::LEVEL_KEYS.iter().map(move |k| format!("{}.{}", level, k)))
        .collect();
    let mut known: Vec<&str> = all.iter().flat_map(|c| c.params.iter().map(|p| p.key)).collect();
    known.extend(level_keys.iter().map(String::as_str));
    own.check_known(&known, name_or_path)?;
    let mut p = decl::defaults(all);
    p.overlay(&own);
    Ok(p)
}

fn load_depth(name: &str, depth: usize) -> Result<Params, ConfigError> {
    if depth > 8 {
        return Err(ConfigError(format!("preset '{}': inheritance is too deep (a cycle?)", name)));
    }
    let text = match PRESETS.iter().find(|(n, _)| *n == name) {
        Some((_, t)) => t.to_string(),
        None if name.ends_with(".toml") || name.contains('/') => Params::read_file(name)?,
        None => {
            return Err(ConfigError(format!(
                "unknown preset '{}' (choose from {}, or give a .toml file)",
                name,
                preset_names().join(", ")
            )))
        }
    };
    let own = Params::from_toml(&text, name)?;
    let inherit = own.iter().find(|(k, _)| *k == "inherit").map(|(_, v)| v.to_string());
    match inherit {
        Some(base) => {
            let mut p = load_depth(&base, depth + 1)?;
            p.overlay(&own);
            Ok(p)
        }
        None => Ok(own),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gassend2003_inherits_suh2003_and_overrides_the_hash_engine() {
        let g = load("gassend2003").unwrap();
        let s = load("suh2003").unwrap();
        assert_eq!(g.u64_min("hash.latency", 0).unwrap(), 80);
        assert_eq!(s.u64_min("hash.latency", 0).unwrap(), 160);
        assert_eq!(g.size("l2.size").unwrap(), 1 << 20);
        assert_eq!(g.str("encryption").unwrap(), "none");
    }

    #[test]
    fn champsim_adds_a_private_level_with_every_level_key_and_no_unknown_one() {
        let c = load("champsim").unwrap();
        assert_eq!(c.str("caches.private").unwrap(), "l2c");
        for k in crate::hierarchy::LEVEL_KEYS {
            assert!(c.contains(&format!("l2c.{}", k)), "l2c.{}", k);
        }
        let dir = std::env::temp_dir().join(format!("secmem-level-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("l3.toml");
        let text = "inherit = \"champsim\"\n[caches]\nprivate = \"l2c,l3\"\n[l3]\nsize = \"1MiB\"\nwayz = 8\n";
        std::fs::write(&f, text).unwrap();
        let e = load(f.to_str().unwrap()).unwrap_err().0;
        assert!(e.ends_with("unknown parameter 'l3.wayz' (did you mean 'l3.ways'?)"), "{}", e);
    }

    #[test]
    fn durahim2009_memory_gives_table5_block_latencies_and_code_authentication_is_on() {
        let p = load("durahim2009").unwrap();
        assert_eq!(p.str("codeauth").unwrap(), "pr-trivium");
        let (lat, width) = (p.u64_min("memory.latency", 0).unwrap(), p.size("memory.bus_width").unwrap());
        let beat = (p.freq("core.clock").unwrap() / p.freq("memory.bus_clock").unwrap()) as u64;
        // 001 Table 5, "Memory Latency in SimpleScalar": request to the block's last beat.
        for (block, cycles) in [(16, 26), (32, 34), (64, 50), (128, 82), (256, 146)] {
            assert_eq!(lat + (block / width - 1) * beat, cycles, "{} B", block);
        }
        assert_eq!(p.u64_min("auth.cache_entries", 0).unwrap(), 16);
    }

    #[test]
    fn unknown_preset_is_refused_by_name() {
        let e = load("intel2025").unwrap_err().0;
        assert!(e.starts_with("unknown preset 'intel2025' (choose from suh2003, gassend2003"), "{}", e);
        assert!(load("/nonexistent/x.toml").unwrap_err().0.starts_with("preset file '/nonexistent/x.toml'"));
    }
}
