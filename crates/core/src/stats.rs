//! Named statistics: every component appends its own under its prefix.

#[derive(Clone, PartialEq)]
pub enum Stat {
    Int(u64),
    Float(f64),
    /// A ratio of two counts (a miss rate, loads per miss): its value, numerator and
    /// denominator. The parts let a sampled run combine windows with the ratio estimator
    /// (`secmem_sim::sample`); everywhere else it is the float it is.
    Rate(f64, u64, u64),
    Str(String),
    /// A time series (e.g. IPC per resume cycle), in order.
    Series(Vec<f64>),
}

/// A rate prints as the float it is: its parts are for the sampled estimator, and a digest of
/// statistics (`Debug`) must not change because a value learnt where it came from.
impl std::fmt::Debug for Stat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stat::Int(v) => f.debug_tuple("Int").field(v).finish(),
            Stat::Float(v) | Stat::Rate(v, _, _) => f.debug_tuple("Float").field(v).finish(),
            Stat::Str(v) => f.debug_tuple("Str").field(v).finish(),
            Stat::Series(v) => f.debug_tuple("Series").field(v).finish(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats(pub Vec<(String, Stat)>);

impl Stats {
    pub fn int(&mut self, k: &str, v: u64) {
        self.0.push((k.to_string(), Stat::Int(v)));
    }
    pub fn float(&mut self, k: &str, v: f64) {
        self.0.push((k.to_string(), Stat::Float(if v.is_finite() { v } else { 0.0 })));
    }
    /// `num / den` (0 when `den` is 0), kept with its parts.
    pub fn rate(&mut self, k: &str, num: u64, den: u64) {
        self.0.push((k.to_string(), Stat::Rate(ratio(num, den), num, den)));
    }
    pub fn str(&mut self, k: &str, v: &str) {
        self.0.push((k.to_string(), Stat::Str(v.to_string())));
    }
    pub fn series(&mut self, k: &str, v: Vec<f64>) {
        self.0.push((k.to_string(), Stat::Series(v.into_iter().map(|x| if x.is_finite() { x } else { 0.0 }).collect())));
    }
    pub fn get(&self, k: &str) -> Option<&Stat> {
        self.0.iter().find(|(key, _)| key == k).map(|(_, v)| v)
    }
    pub fn get_f64(&self, k: &str) -> Option<f64> {
        match self.get(k)? {
            Stat::Int(v) => Some(*v as f64),
            Stat::Float(v) | Stat::Rate(v, _, _) => Some(*v),
            Stat::Str(_) | Stat::Series(_) => None,
        }
    }
    pub fn get_series(&self, k: &str) -> Option<&[f64]> {
        match self.get(k)? {
            Stat::Series(v) => Some(v),
            _ => None,
        }
    }
}

/// a / b, 0 when b is 0.
pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}
