//! The time-stamp buffer (000 Table 1: 32 entries of 8 bytes): time stamps are 4 B on an 8-B
//! bus, so a fetched bus word carries a neighbour's stamp along; keeping recent words on chip
//! saves bus reads. It holds bus-word addresses only: values are always read from untrusted
//! memory, so what the adversary changed is what the scheme sees.

use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use secmem_timing::{Cycle, Tags, Transfer};

pub struct TsBuffer {
    tags: Tags,
    pub reads: u64,
    pub hits: u64,
}

impl TsBuffer {
    pub fn new(p: &Params, key: &str) -> Result<TsBuffer, ConfigError> {
        let entries = p.u64_min(key, 1)?;
        let tags = Tags::new(entries * 8, entries as usize, 8).map_err(|e| ConfigError(format!("{}: {}", key, e)))?;
        Ok(TsBuffer { tags, reads: 0, hits: 0 })
    }

    /// Read the 4-byte stamp at `ts_addr` requested at `t`: its value and arrival.
    #[inline]
    pub fn read(&mut self, m: &mut Machine, ts_addr: u64, t: Cycle) -> (u32, Cycle) {
        let ts = m.mem.read_u32(ts_addr);
        self.reads += 1;
        if self.tags.access(ts_addr & !7).1 {
            self.hits += 1;
            return (ts, t + 1);
        }
        (ts, m.bus.read(t, 4).last)
    }

    /// Read the stamp at `ts_addr` and the line after it (000 Fig. 7b): a buffered stamp costs
    /// no bus time; otherwise stamp and line go back to back in one transfer, so the stamp's
    /// beat never splits the gap the line needs. Returns (stamp, its arrival, line transfer).
    #[inline]
    pub fn read_with_line(&mut self, m: &mut Machine, ts_addr: u64, line: u64, t: Cycle) -> (u32, Cycle, Transfer) {
        let ts = m.mem.read_u32(ts_addr);
        self.reads += 1;
        if self.tags.access(ts_addr & !7).1 {
            self.hits += 1;
            return (ts, t + 1, m.bus.read(t, line));
        }
        let width = m.bus.params().width;
        let tr = m.bus.read(t, width + line);
        (ts, tr.first, Transfer { first: tr.first + m.bus.params().beat_cycles, last: tr.last })
    }

    /// Write a stamp (one bus beat); the word stays buffered.
    #[inline]
    pub fn write(&mut self, m: &mut Machine, ts_addr: u64, ts: u32, t: Cycle) -> Cycle {
        m.mem.write_u32(ts_addr, ts);
        self.tags.access(ts_addr & !7);
        m.bus.write(t, 4)
    }

    pub fn bus_reads(&self) -> u64 {
        self.reads - self.hits
    }

    pub fn clear(&mut self) {
        for s in 0..self.tags.slots() as u32 {
            self.tags.invalidate(s);
        }
    }

    pub fn reset_stats(&mut self) {
        (self.reads, self.hits) = (0, 0);
    }
}
