//! The speculation stage between the cipher and the core: trusted on-chip predictors a
//! scheme consults to start work before its inputs arrive, and whether the core may use data
//! before its check completes.
//!
//! An L2 miss's outcome carries two times: when the data is usable and when it is verified.
//! 003 §4.3 lets the processor use data speculatively while its hash check completes (only
//! instructions that leave the chip, 003 §4.7, wait); designs that issue only after
//! authentication (001 §4.1, 004 §3) make the core wait: `speculation.use_before_verify`.
//!
//! Predictors: `stamp` guesses encryption metadata (otp's time stamps, 000 §4.4). Seed 004's
//! frequent-value table plugs in here too.

use crate::params::{ConfigError, Params};

pub mod stamp;

/// Guesses of a line's encryption metadata word (a time stamp, a counter) before it arrives.
pub trait MetaPredictor: Send {
    fn name(&self) -> &'static str;
    /// A guess for the metadata of the line at `addr`, if the predictor has one.
    fn predict(&mut self, addr: u64) -> Option<u64>;
    /// The real metadata of the line at `addr` arrived (training).
    fn observe(&mut self, addr: u64, meta: u64);
}

pub struct Speculation {
    /// Whether the core may use fetched data before its integrity check (or authentication)
    /// completes.
    pub use_before_verify: bool,
    /// Guesses of encryption metadata, if enabled.
    pub meta: Option<Box<dyn MetaPredictor>>,
}

impl Speculation {
    pub fn new(p: &Params, line: u64) -> Result<Speculation, ConfigError> {
        let meta: Option<Box<dyn MetaPredictor>> =
            if p.bool("speculation.stamps")? { Some(Box::new(stamp::StampPredictor::new(line))) } else { None };
        Ok(Speculation { use_before_verify: p.bool("speculation.use_before_verify")?, meta })
    }

    /// No speculation at all (data waits for its check; nothing is guessed).
    pub fn none() -> Speculation {
        Speculation { use_before_verify: false, meta: None }
    }
}
