//! The speculation stage between the cipher and the core: trusted on-chip predictors a
//! scheme consults to start work before its inputs arrive, and whether the core may use data
//! before its check completes.
//!
//! An L2 miss's outcome carries two times: when the data is usable and when it is verified.
//! 003 §4.3 lets the processor use data speculatively while its hash check completes (only
//! instructions that leave the chip, 003 §4.7, wait); designs that issue only after
//! authentication (001 §4.1, 004 §3) make the core wait: `speculation.use_before_verify`.
//!
//! Predictors: `stamp` guesses encryption metadata (otp's time stamps, 000 §4.4); `fvt` is
//! seed 004's Frequent Value Table, from which a direct-mode scheme speculatively encrypts
//! the values a missed line probably holds (ciphertext speculation, 004 §3.2).

use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_timing::{Cycle, Pipe};

pub mod fvt;
pub mod reorder;
pub mod stamp;

pub use fvt::Fvt;
pub use stamp::MetaPredictor;

pub struct Speculation {
    /// Whether the core may use fetched data before its integrity check (or authentication)
    /// completes.
    pub use_before_verify: bool,
    /// Guesses of encryption metadata, if enabled.
    pub meta: Option<Box<dyn MetaPredictor>>,
    /// Frequent value speculation (004 §3.2), if enabled.
    pub fv: Option<FrequentValues>,
}

/// Frequent value speculation: the table and what it achieved. A scheme that speculates
/// (tdes) encrypts the table's values for each missed line and matches its arriving chunks.
pub struct FrequentValues {
    pub table: Fvt,
    /// Dedicated speculation pipelines of the scheme's cipher (004 Fig. 2), if any: the
    /// scheme builds them (`engine`), else it speculates on its own engine.
    engines: u64,
    pub engine: Option<Pipe>,
    /// Cycles to match an arrived chunk against the speculated ciphertexts (the CAM).
    pub match_latency: u64,
    /// Posted with the fetch request (004 §3.2, Fig. 2 ①-②), not once the scheme has the
    /// line's nonce or time stamp.
    pub at_fetch: bool,
    pub counts: FvCounts,
}

/// What frequent value speculation saw, per 64-bit chunk of the lines fetched on misses.
#[derive(Clone, Copy, Default, Debug)]
pub struct FvCounts {
    /// Lines speculated on (each missed data line of a speculating scheme).
    pub lines: u64,
    /// Their 64-bit chunks.
    pub chunks: u64,
    /// Chunks whose plaintext was in the table when the line was missed (004 Fig. 5).
    pub frequent: u64,
    /// Frequent chunks a 128-bit cipher could predict: both chunks of their 16-B block
    /// frequent (004 Fig. 6, without re-ordering).
    pub paired: u64,
    /// The same once the frequent chunks are grouped together (004 §3.2.2, Fig. 4).
    pub reordered: u64,
    /// Chunks whose fetched ciphertext matched a speculated one (the CAM hit).
    pub hits: u64,
    /// Hit chunks usable before their decryption would have been (the speculation was in time).
    pub early: u64,
    /// Speculative encryptions booked on the engine.
    pub encryptions: u64,
    /// Cycles by which lines were usable earlier than without speculation, summed.
    pub saved_cycles: u64,
}

impl FvCounts {
    /// Count a fetched line of `n` 64-bit chunks whose frequent ones are the bits of `frequent`.
    #[inline]
    pub fn line(&mut self, n: usize, frequent: u64) {
        let pairs = reorder::pair_mask(frequent);
        let f = frequent.count_ones() as u64;
        self.lines += 1;
        self.chunks += n as u64;
        self.frequent += f;
        self.paired += 2 * pairs.count_ones() as u64;
        self.reordered += f & !1;
    }
}

impl FrequentValues {
    /// Give the speculation its own pipelines of a cipher of `latency` cycles and `rate` bytes
    /// per cycle (each), `unit` bytes a block, when `speculation.engines` asks for them.
    pub fn dedicate(&mut self, latency: Cycle, rate: f64, unit: u64) {
        if self.engines > 0 {
            self.engine = Some(Pipe::new(latency, self.engines as f64 * rate, unit));
        }
    }

    pub fn stats(&self, out: &mut Stats) {
        let c = &self.counts;
        out.int("speculation.fv_entries", self.table.capacity() as u64);
        out.int("speculation.fv_lines", c.lines);
        out.int("speculation.fv_chunks", c.chunks);
        out.int("speculation.fv_frequent_chunks", c.frequent);
        out.rate("speculation.fv_frequent_fraction", c.frequent, c.chunks);
        out.rate("speculation.fv_paired_fraction", c.paired, c.frequent);
        out.rate("speculation.fv_reordered_fraction", c.reordered, c.frequent);
        out.int("speculation.fv_hits", c.hits);
        out.rate("speculation.fv_hit_fraction", c.hits, c.chunks);
        out.int("speculation.fv_early_hits", c.early);
        out.int("speculation.fv_encryptions", c.encryptions);
        if let Some(e) = &self.engine {
            out.int("speculation.engine_wait_cycles", e.wait_cycles);
        }
        out.int("speculation.fv_saved_cycles", c.saved_cycles);
        out.rate("speculation.fv_saved_per_line", c.saved_cycles, c.lines);
    }
}

impl Speculation {
    pub fn new(p: &Params, line: u64) -> Result<Speculation, ConfigError> {
        let meta: Option<Box<dyn MetaPredictor>> =
            if p.bool("speculation.stamps")? { Some(Box::new(stamp::StampPredictor::new(line))) } else { None };
        let n = p.u64_min("speculation.frequent_values", 0)?;
        if n > 64 {
            return Err(ConfigError(format!("speculation.frequent_values: {} exceeds 64 entries", n)));
        }
        let fv = (n > 0).then(|| -> Result<FrequentValues, ConfigError> {
            Ok(FrequentValues {
                table: Fvt::new(n as usize),
                engines: p.u64_min("speculation.engines", 0)?,
                engine: None,
                match_latency: p.u64_min("speculation.match_latency", 0)?,
                at_fetch: p.bool("speculation.at_fetch")?,
                counts: FvCounts::default(),
            })
        });
        Ok(Speculation { use_before_verify: p.bool("speculation.use_before_verify")?, meta, fv: fv.transpose()? })
    }

    /// No speculation at all (data waits for its check; nothing is guessed).
    pub fn none() -> Speculation {
        Speculation { use_before_verify: false, meta: None, fv: None }
    }

    /// The program loaded or stored the 64-bit word `word` (frequent value tracking).
    #[inline]
    pub fn track(&mut self, word: u64) {
        if let Some(fv) = &mut self.fv {
            fv.table.observe(word);
        }
    }

    /// Zero the counters (end of warm-up); the table is kept, as 004 §5 warms it up.
    pub fn reset_stats(&mut self) {
        if let Some(fv) = &mut self.fv {
            fv.counts = FvCounts::default();
            if let Some(e) = &mut fv.engine {
                e.reset_stats();
            }
        }
    }

    pub fn stats(&self, out: &mut Stats) {
        if let Some(fv) = &self.fv {
            fv.stats(out);
        }
    }
}
