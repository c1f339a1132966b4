//! Configuration as data: a flat map of dotted keys (`l2.size`) to values, loaded from a
//! preset (TOML) and overridden by `key=value` strings. Each component reads its own keys;
//! units are parsed where the value is read so errors name the key.

use std::sync::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{}", v),
            Value::Float(v) => write!(f, "{}", v),
            Value::Bool(v) => write!(f, "{}", v),
            Value::Str(v) => write!(f, "{}", v),
        }
    }
}

/// A configuration problem, always naming the key or file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The largest size any parameter may hold (1 TiB): untrusted memory is reserved as host
/// address space, half again as large with its metadata.
pub const MAX_SIZE: u64 = 1 << 40;
/// The largest count or cycle number any parameter may hold (about 10^12).
pub const MAX_COUNT: u64 = 1 << 40;
/// The largest preset file read: presets are a few kilobytes of TOML.
pub const MAX_PRESET_BYTES: u64 = 1 << 20;

/// Tighter ceilings for parameters that size a structure held in host memory, checked when
/// the value is read and so before anything is allocated: (what the limit protects, ceiling).
fn host_ceiling(key: &str) -> Option<(&'static str, u64)> {
    let last = key.rsplit('.').next().unwrap_or(key);
    match key {
        // The seeds' largest cache is 4 MiB; its lines' bytes are really held.
        "l1i.size" | "l1d.size" | "l2.size" => Some(("a simulated cache's size", 256 << 20)),
        "core.rob_size" | "core.lsq_size" | "tlb.entries" => Some(("an on-chip structure's entries", 1 << 20)),
        // Ways, buffer and table entries: searched or allocated per entry.
        _ if last == "ways" || last.ends_with("_entries") || last.ends_with("_buffer") => {
            Some(("an on-chip structure's entries", 1 << 16))
        }
        _ => None,
    }
}

/// `v` for `key` if within its ceiling (`general` unless the key has a tighter one).
fn bounded(key: &str, v: u64, general: u64, what: &str) -> Result<u64, ConfigError> {
    let (limit_of, max) = host_ceiling(key).unwrap_or((what, general));
    if v > max {
        return Err(ConfigError(format!("{}: {} is more than {} may be ({} at most)", key, v, limit_of, max)));
    }
    Ok(v)
}

#[derive(Debug, Default)]
pub struct Params {
    map: BTreeMap<String, Value>,
    /// Keys some component has read (to prove presets hold no dead keys).
    read: Mutex<BTreeSet<String>>,
}

impl Clone for Params {
    fn clone(&self) -> Params {
        Params { map: self.map.clone(), read: Mutex::new(self.keys_read()) }
    }
}

impl Params {
    /// Parse a preset's TOML text. Tables flatten to dotted keys.
    pub fn from_toml(text: &str, origin: &str) -> Result<Params, ConfigError> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            // Where: the line and column of the error's first byte (a file that is not a
            // preset at all fails on its first line that is not TOML).
            let at = e.span().map(|r| {
                let before = &text.as_bytes()[..r.start.min(text.len())];
                let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
                let col = before.len() - before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) + 1;
                format!("line {}, column {}: ", line, col)
            });
            let what = e.message().trim().replace('\n', "; ");
            ConfigError(format!("{}: {}{}", origin, at.unwrap_or_default(), what))
        })?;
        let mut p = Params::default();
        flatten("", &table, &mut p.map, origin)?;
        Ok(p)
    }

    /// Overlay `other` (e.g. a preset that inherits from a base).
    pub fn overlay(&mut self, other: &Params) {
        for (k, v) in &other.map {
            self.map.insert(k.clone(), v.clone());
        }
    }

    /// Apply `key=value`. Only keys the preset defines exist; the value's kind must match.
    pub fn set_str(&mut self, assignment: &str) -> Result<(), ConfigError> {
        let (k, v) = assignment
            .split_once('=')
            .ok_or_else(|| ConfigError(format!("--set '{}': expected key=value", assignment)))?;
        self.set(k.trim(), v.trim())
    }

    pub fn set(&mut self, key: &str, text: &str) -> Result<(), ConfigError> {
        let old = self.map.get(key).ok_or_else(|| {
            let near = self.nearest(key);
            ConfigError(match near {
                Some(n) => format!("unknown parameter '{}' (did you mean '{}'?)", key, n),
                None => format!("unknown parameter '{}'", key),
            })
        })?;
        let new = match old {
            Value::Int(_) => match text.parse::<i64>() {
                Ok(v) => Value::Int(v),
                // An integer key may take a value with units (sizes, cycles): validated on read.
                Err(_) => Value::Str(text.to_string()),
            },
            Value::Float(_) => Value::Float(
                text.parse::<f64>()
                    .map_err(|_| ConfigError(format!("{}: '{}' is not a number", key, text)))?,
            ),
            Value::Bool(_) => Value::Bool(match text {
                "true" | "1" | "yes" | "on" => true,
                "false" | "0" | "no" | "off" => false,
                _ => return Err(ConfigError(format!("{}: '{}' is not true/false", key, text))),
            }),
            Value::Str(_) => Value::Str(text.to_string()),
        };
        self.map.insert(key.to_string(), new);
        Ok(())
    }

    fn nearest(&self, key: &str) -> Option<&str> {
        nearest(self.map.keys().map(|k| k.as_str()), key)
    }

    /// Set `key` to `v` whether or not it exists (declarations and presets build the map).
    pub fn insert(&mut self, key: &str, v: Value) {
        self.map.insert(key.to_string(), v);
    }

    pub fn contains(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(|s| s.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v))
    }

    fn get(&self, key: &str) -> Result<&Value, ConfigError> {
        self.read.lock().unwrap().insert(key.to_string());
        self.map.get(key).ok_or_else(|| ConfigError(format!("missing parameter '{}'", key)))
    }

    /// Keys read by some component so far.
    pub fn keys_read(&self) -> BTreeSet<String> {
        self.read.lock().unwrap().clone()
    }

    /// Refuse keys of `self` that are not among `known` (every declared key).
    pub fn check_known(&self, known: &[&str], origin: &str) -> Result<(), ConfigError> {
        for k in self.map.keys() {
            if !known.contains(&k.as_str()) && k != "inherit" {
                let hint = nearest(known.iter().copied(), k).map(|n| format!(" (did you mean '{}'?)", n)).unwrap_or_default();
                return Err(ConfigError(format!("{}: unknown parameter '{}'{}", origin, k, hint)));
            }
        }
        Ok(())
    }

    pub fn str(&self, key: &str) -> Result<String, ConfigError> {
        Ok(self.get(key)?.to_string())
    }

    pub fn bool(&self, key: &str) -> Result<bool, ConfigError> {
        match self.get(key)? {
            Value::Bool(b) => Ok(*b),
            v => Err(ConfigError(format!("{}: '{}' is not true/false", key, v))),
        }
    }

    pub fn f64(&self, key: &str) -> Result<f64, ConfigError> {
        match self.get(key)? {
            Value::Float(v) => Ok(*v),
            Value::Int(v) => Ok(*v as f64),
            v => v.to_string().parse().map_err(|_| ConfigError(format!("{}: '{}' is not a number", key, v))),
        }
    }

    /// A count or cycle number, ≥ `min`.
    pub fn u64_min(&self, key: &str, min: u64) -> Result<u64, ConfigError> {
        let v = match self.get(key)? {
            Value::Int(v) if *v >= 0 => *v as u64,
            v => parse_count(&v.to_string())
                .ok_or_else(|| ConfigError(format!("{}: '{}' is not a non-negative whole number", key, v)))?,
        };
        if v < min {
            return Err(ConfigError(format!("{}: {} is too small (at least {})", key, v, min)));
        }
        bounded(key, v, MAX_COUNT, "a count")
    }

    /// A size in bytes: 64, "64B", "256KiB", "4GiB", "1MB" (powers of 1000).
    pub fn size(&self, key: &str) -> Result<u64, ConfigError> {
        let v = self.get(key)?;
        let r = match v {
            Value::Int(i) if *i > 0 => Some(*i as u64),
            Value::Str(s) => parse_size(s),
            _ => None,
        };
        let b = r
            .filter(|&b| b > 0)
            .ok_or_else(|| ConfigError(format!("{}: '{}' is not a size (e.g. 64B, 256KiB, 4GiB)", key, v)))?;
        bounded(key, b, MAX_SIZE, "a size")
    }

    /// A size as `size`, or 0 (a cache that is absent).
    pub fn size_or_zero(&self, key: &str) -> Result<u64, ConfigError> {
        match self.get(key)? {
            Value::Int(0) => Ok(0),
            Value::Str(s) if parse_size(s) == Some(0) => Ok(0),
            _ => self.size(key),
        }
    }

    /// The text of a preset file, refused past [`MAX_PRESET_BYTES`] (a device such as
    /// /dev/zero would never end) and if it is not UTF-8.
    pub fn read_file(path: &str) -> Result<String, ConfigError> {
        use std::io::Read;
        let err = |e: &dyn fmt::Display| ConfigError(format!("preset file '{}': {}", path, e));
        // Opened non-blocking: a FIFO would wait for a writer, deaf to Ctrl-C. A preset is a
        // regular file; a FIFO or device is refused.
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(|e| err(&e))?;
        if !f.metadata().map_err(|e| err(&e))?.is_file() {
            return Err(err(&"not a regular file; a preset is a short TOML file"));
        }
        let mut bytes = Vec::new();
        f.take(MAX_PRESET_BYTES + 1).read_to_end(&mut bytes).map_err(|e| err(&e))?;
        if bytes.len() as u64 > MAX_PRESET_BYTES {
            return Err(err(&format!("longer than {} bytes; a preset is a short TOML file", MAX_PRESET_BYTES)));
        }
        String::from_utf8(bytes).map_err(|_| err(&"not UTF-8 text"))
    }

    /// A frequency in Hz: "1GHz", "200MHz".
    pub fn freq(&self, key: &str) -> Result<f64, ConfigError> {
        let v = self.get(key)?.to_string();
        parse_unit(&v, &[("ghz", 1e9), ("mhz", 1e6), ("khz", 1e3), ("hz", 1.0)])
            .filter(|f| *f > 0.0)
            .ok_or_else(|| ConfigError(format!("{}: '{}' is not a frequency (e.g. 1GHz, 200MHz)", key, v)))
    }

    /// A bandwidth in bytes/s: "3.2GB/s", "1.6GB/s", "800MB/s".
    pub fn rate(&self, key: &str) -> Result<f64, ConfigError> {
        let v = self.get(key)?.to_string();
        parse_unit(&v, &[("gb/s", 1e9), ("mb/s", 1e6), ("kb/s", 1e3), ("b/s", 1.0)])
            .filter(|f| *f > 0.0)
            .ok_or_else(|| ConfigError(format!("{}: '{}' is not a bandwidth (e.g. 3.2GB/s)", key, v)))
    }

    /// Set `key` to one of `choices`, refusing anything else.
    pub fn choice_set(&mut self, key: &str, value: &str, choices: &[&str]) -> Result<(), ConfigError> {
        if !choices.contains(&value) {
            return Err(ConfigError(format!("unknown {} scheme '{}' (choose from {})", key, value, choices.join(", "))));
        }
        self.set(key, value)
    }

    /// One of `choices`.
    pub fn choice(&self, key: &str, choices: &[&str]) -> Result<String, ConfigError> {
        let v = self.str(key)?;
        if choices.contains(&v.as_str()) {
            Ok(v)
        } else {
            Err(ConfigError(format!("{}: unknown value '{}' (choose from {})", key, v, choices.join(", "))))
        }
    }
}

fn flatten(prefix: &str, t: &toml::Table, out: &mut BTreeMap<String, Value>, origin: &str) -> Result<(), ConfigError> {
    for (k, v) in t {
        let key = if prefix.is_empty() { k.clone() } else { format!("{}.{}", prefix, k) };
        let val = match v {
            toml::Value::Table(sub) => {
                flatten(&key, sub, out, origin)?;
                continue;
            }
            toml::Value::Integer(i) => Value::Int(*i),
            toml::Value::Float(f) => Value::Float(*f),
            toml::Value::Boolean(b) => Value::Bool(*b),
            toml::Value::String(s) => Value::Str(s.clone()),
            other => return Err(ConfigError(format!("{}: {}: unsupported value {}", origin, key, other))),
        };
        out.insert(key, val);
    }
    Ok(())
}

fn parse_unit(s: &str, units: &[(&str, f64)]) -> Option<f64> {
    let t = s.trim().to_ascii_lowercase();
    for (u, mult) in units {
        if let Some(num) = t.strip_suffix(u) {
            return num.trim().parse::<f64>().ok().map(|n| n * mult);
        }
    }
    t.parse::<f64>().ok()
}

/// "10M", "1_000_000", "2G" style counts.
pub fn parse_count(s: &str) -> Option<u64> {
    let t = s.trim().replace('_', "");
    let (num, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1_000u64),
        'M' => (&t[..t.len() - 1], 1_000_000),
        'G' => (&t[..t.len() - 1], 1_000_000_000),
        _ => (&t[..], 1),
    };
    if let Ok(v) = num.parse::<u64>() {
        return v.checked_mul(mult);
    }
    whole(num, mult)
}

/// `num` (digits with an optional decimal fraction) times `mult`, computed exactly, if that
/// is a whole number that fits a u64: a count of "1.5" is refused, "1.5k" is not.
fn whole(num: &str, mult: u64) -> Option<u64> {
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let digits = |d: &str| d.bytes().all(|c| c.is_ascii_digit());
    if int.is_empty() && frac.is_empty() || !digits(int) || !digits(frac) || frac.len() > 18 {
        return None;
    }
    let int: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let scale = 10u128.pow(frac.len() as u32);
    let frac: u128 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    let scaled = frac * mult as u128;
    if scaled % scale != 0 {
        return None;
    }
    u64::try_from(int.checked_mul(mult as u128)? + scaled / scale).ok()
}

pub fn parse_size(s: &str) -> Option<u64> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let units: [(&str, u64); 8] = [
        ("kib", 1 << 10),
        ("mib", 1 << 20),
        ("gib", 1 << 30),
        ("tib", 1 << 40),
        ("kb", 1_000),
        ("mb", 1_000_000),
        ("gb", 1_000_000_000),
        ("b", 1),
    ];
    for (u, mult) in units {
        if let Some(num) = lower.strip_suffix(u) {
            let num = num.trim();
            if let Ok(v) = num.parse::<u64>() {
                return v.checked_mul(mult);
            }
            return whole(num, mult);
        }
    }
    lower.parse::<u64>().ok()
}

/// The key of `keys` nearest to `key` (a typo's likely intent), if near enough.
fn nearest<'a>(keys: impl Iterator<Item = &'a str>, key: &str) -> Option<&'a str> {
    keys.map(|k| (edit_distance(k, key), k)).filter(|(d, _)| *d <= 3).min().map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + (ca != *cb) as usize).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Params {
        Params::from_toml("integrity = \"chash\"\n[l2]\nsize = \"1MiB\"\nways = 4\n[aes]\nthroughput = \"3.2GB/s\"\n", "t").unwrap()
    }

    #[test]
    fn sizes_with_units_parse() {
        assert_eq!(parse_size("256KiB"), Some(262_144));
        assert_eq!(parse_size("4GiB"), Some(4 << 30));
        assert_eq!(parse_size("64B"), Some(64));
        assert_eq!(parse_size("1.5MiB"), Some(1_572_864));
        assert_eq!(parse_size("12 parsecs"), None);
        assert_eq!(parse_count("10M"), Some(10_000_000));
        assert_eq!(parse_count("1.5k"), Some(1500));
        assert_eq!(parse_count("1.5"), None, "counts are whole");
        assert_eq!(parse_size("1.5B"), None, "sizes are whole bytes");
        assert_eq!(parse_count("inf"), None);
        assert_eq!(parse_size("1e30GiB"), None);
    }

    #[test]
    fn sizes_and_counts_have_ceilings_checked_before_anything_is_reserved() {
        let mut p = Params::from_toml("[memory]\nsize = 1\n[l2]\nsize = 1\nways = 1\n[otp]\nts_buffer_entries = 1\n[aes]\nlatency = 1\n", "t").unwrap();
        p.set_str("memory.size=64TiB").unwrap();
        assert_eq!(p.size("memory.size").unwrap_err().0, "memory.size: 70368744177664 is more than a size may be (1099511627776 at most)");
        p.set_str("memory.size=1TiB").unwrap();
        assert_eq!(p.size("memory.size").unwrap(), MAX_SIZE);
        p.set_str("l2.size=1GiB").unwrap();
        assert!(p.size("l2.size").unwrap_err().0.starts_with("l2.size: 1073741824 is more than a simulated cache's size may be"));
        p.set_str("l2.ways=100000").unwrap();
        assert!(p.u64_min("l2.ways", 1).unwrap_err().0.starts_with("l2.ways: 100000 is more than an on-chip structure's entries"));
        p.set_str("otp.ts_buffer_entries=1G").unwrap();
        assert!(p.u64_min("otp.ts_buffer_entries", 0).unwrap_err().0.starts_with("otp.ts_buffer_entries:"));
        p.set_str("aes.latency=2000G").unwrap();
        assert!(p.u64_min("aes.latency", 1).unwrap_err().0.starts_with("aes.latency: 2000000000000 is more than a count may be"));
    }

    #[test]
    fn a_preset_file_is_read_with_a_bound() {
        assert!(Params::read_file("/nonexistent.toml").unwrap_err().0.starts_with("preset file '/nonexistent.toml': "));
        assert_eq!(Params::read_file("/dev/zero").unwrap_err().0, "preset file '/dev/zero': not a regular file; a preset is a short TOML file");
        let big = std::env::temp_dir().join(format!("secmem-big-preset-{}.toml", std::process::id()));
        std::fs::write(&big, vec![b'#'; MAX_PRESET_BYTES as usize + 1]).unwrap();
        let e = Params::read_file(big.to_str().unwrap()).unwrap_err().0;
        std::fs::remove_file(&big).unwrap();
        assert!(e.ends_with(&format!("longer than {} bytes; a preset is a short TOML file", MAX_PRESET_BYTES)), "{}", e);
        let e = Params::from_toml("[l2]\nsize = 1\nroot:x:0:0:root:/root:/bin/bash\n", "p").unwrap_err().0;
        assert!(e.starts_with("p: line 3, column ") && !e.contains('\n'), "{}", e);
        let e = Params::from_toml("[l2]\nsize = \n", "p").unwrap_err().0;
        assert!(e.starts_with("p: line 2, column ") && !e.contains('\n'), "one line: {}", e);
    }

    #[test]
    fn set_overrides_known_keys_with_units() {
        let mut p = sample();
        p.set_str("l2.size=256KiB").unwrap();
        assert_eq!(p.size("l2.size").unwrap(), 262_144);
        p.set_str("l2.ways=8").unwrap();
        assert_eq!(p.u64_min("l2.ways", 1).unwrap(), 8);
        assert!((p.rate("aes.throughput").unwrap() - 3.2e9).abs() < 1.0);
    }

    #[test]
    fn unknown_keys_are_refused_with_a_suggestion() {
        let mut p = sample();
        let e = p.set_str("l2.sise=1MiB").unwrap_err().0;
        assert_eq!(e, "unknown parameter 'l2.sise' (did you mean 'l2.size'?)");
        assert!(p.set_str("nonsense").unwrap_err().0.contains("key=value"));
    }

    #[test]
    fn bad_values_name_the_key() {
        let mut p = sample();
        p.set_str("l2.size=lots").unwrap();
        assert_eq!(p.size("l2.size").unwrap_err().0, "l2.size: 'lots' is not a size (e.g. 64B, 256KiB, 4GiB)");
        p.set_str("l2.ways=-3").unwrap();
        assert!(p.u64_min("l2.ways", 1).unwrap_err().0.starts_with("l2.ways:"));
        assert!(p.choice("integrity", &["none", "mac"]).unwrap_err().0.contains("unknown value 'chash'"));
    }
}
