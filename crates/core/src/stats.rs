//! Named statistics: every component appends its own under its prefix.

#[derive(Clone, Debug, PartialEq)]
pub enum Stat {
    Int(u64),
    Float(f64),
    Str(String),
    /// A time series (e.g. IPC per resume cycle), in order.
    Series(Vec<f64>),
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
            Stat::Float(v) => Some(*v),
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
