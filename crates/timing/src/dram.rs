//! DRAM: channels of banks with an open-page row buffer each, behind one data bus per channel.
//!
//! Seed 004 times memory with "a more accurate DRAM model [Gries & Romer] ... in which bank
//! conflicts, page miss, row miss are modeled based on the PC SDRAM specification" (§5), with
//! Table 2's "X-5-5-5 (core clocks), X depends on page status", CAS 20, RP 7 and RCD 7 memory
//! bus clocks, and CPU:memory clock ratios 1:4, 1:5, 1:6 (Fig. 9). This model has what those
//! numbers need and nothing the paper does not give (no refresh, tRAS, tWR, tRRD/tFAW, rank
//! or command-bus limits):
//!
//! - An access to a bank whose open row is the one addressed (row hit) issues its column
//!   command at once; to a precharged bank (miss) it activates the row first (tRCD); to a bank
//!   with another row open (conflict) it precharges, activates, then reads (tRP + tRCD).
//! - A read's first beat arrives tCAS memory clocks after its column command, then one beat
//!   per clock: on an idle memory X = tCAS, tRCD + tCAS, tRP + tRCD + tCAS clocks (100, 135,
//!   170 core cycles at 1:5), each further 8-B beat 5 cycles later: X-5-5-5. A write's data
//!   goes with its column command (SDRAM write latency 0).
//! - A burst holds its bank's row from the first command to the end of the column access
//!   (column command + burst), so row hits to one bank pipeline back to back (tCCD = burst)
//!   and a conflict's precharge follows the previous burst; banks work in parallel and their
//!   bursts share the channel's data bus.
//! - Open page: a row stays open until another row of its bank is needed.
//! - One memory clock = one data-bus beat = `clock` processor cycles (the CPU:memory ratio:
//!   1 GHz / 200 MHz = 5 in Table 2).
//!
//! The structure follows the simulators the field uses, written for the calendar model:
//! like DRAMSim3's `BankState` (open row, state, earliest cycle per command) and Ramulator 2's
//! DRAM nodes (per-node state and row state, command timing constraints), a bank keeps its
//! open row and when it is free; unlike them there is no cycle-by-cycle controller, because
//! requests are not presented in time order.
//!
//! # Requests presented out of time order
//! The timing model presents requests in program order with out-of-order times (a load that
//! issues late, a write that waits for a hash); the bus lets each take the earliest free
//! slots at or after its own time (see `Calendar`). A DRAM bank's state depends on the order
//! it serves requests, so each bank keeps the schedule of its recent bursts in time order,
//! each with its row and kind (hit, miss, conflict). A new request takes the first gap in its
//! bank's schedule at or after its wanted time where
//! - its kind follows from the burst before the gap (that burst's row is open; a bank with
//!   nothing before is precharged),
//! - its burst, with the data beats on the channel's bus (the bus calendar's first fit at
//!   the column command's data slot), ends before the burst after the gap starts, and
//! - it leaves the bank as the burst after the gap found it: a request inserted before a row
//!   hit (or a miss) must itself be a hit on the same row; before a conflict, whose
//!   precharge closes whatever is open, anything may go.
//!
//! Every booking therefore stays valid: the bank's schedule, replayed in time order, is one a
//! real controller could have issued (an FR-FCFS controller serving a row hit between two
//! others, or a request in an idle stretch), and a request never waits behind one that was
//! presented first but wanted later unless the bank's row state demands it. The schedule
//! remembers the last `HISTORY` bursts per bank; time before them is treated as past (a
//! request wanting it is served from the end of the oldest forgotten burst, with its row
//! open), just as the bus calendar clamps requests older than its window.
//!
//! # Address mapping
//! From the least significant bit: the byte within an `interleave` granule (a cache line),
//! the channel, the bank, the granule within the row, the row: row : column-high : bank :
//! channel : column-low. Consecutive lines alternate channels, then banks, so a stream and
//! a miss's neighbouring lines and metadata spread over the banks (bank-level parallelism);
//! a stream comes back to each bank in the same row for `row_bytes / interleave` rounds, so
//! the open page still gives row hits; regions far apart (data, time stamps, counters, tree
//! nodes) fall into different rows of the same banks and conflict, as in 004. This is
//! Ramulator 2's row-bank-column-channel family with the column split around the bank and
//! channel bits (cf. DRAMSim3's configurable field order). A transfer is one burst in the bank
//! of its first byte.

use std::collections::{HashMap, VecDeque};

use crate::calendar::Calendar;
use crate::memory::{transfer, Beat, MemCounters, MemoryModel, Transfer};
use crate::write_queue::{Posted, WriteQueue};
use crate::Cycle;

/// Bursts each bank's schedule remembers.
const HISTORY: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DramParams {
    /// Channels, each with its own banks and data bus (a power of two).
    pub channels: u64,
    /// Banks per channel (a power of two).
    pub banks: u64,
    /// Bytes in one row of one bank across the channel (the page; a power of two).
    pub row_bytes: u64,
    /// Bytes mapped to one channel and bank before the next (a power of two ≤ `row_bytes`).
    pub interleave: u64,
    /// Precharge, activate-to-column-command and CAS latencies, in memory clocks.
    pub t_rp: u64,
    pub t_rcd: u64,
    pub t_cas: u64,
    /// Processor cycles per memory clock, which is also one data-bus beat.
    pub clock: Cycle,
    /// Bytes per beat (the data bus width).
    pub width: u64,
    /// Cycles a posted write waits before it may be scheduled (as `BusParams::write_delay`).
    pub write_delay: Cycle,
}

impl DramParams {
    /// Memory clocks from a burst's first command to its column command.
    #[inline]
    fn prep(&self, k: Kind) -> u64 {
        match k {
            Kind::Hit => 0,
            Kind::Miss => self.t_rcd,
            Kind::Conflict => self.t_rp + self.t_rcd,
        }
    }
}

/// How a burst found its bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Its row was open.
    Hit,
    /// The bank was precharged: activate.
    Miss,
    /// Another row was open: precharge, activate.
    Conflict,
}

/// Refresh: every `every` memory clocks (tREFI) all banks are held `hold` clocks (tRFC) and
/// their rows closed; `every` 0: no refresh. Windows are [k·every, k·every + hold), k ≥ 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Refresh {
    every: u64,
    hold: u64,
}

impl Refresh {
    /// The start of the first refresh window that [a, b) overlaps, if any.
    #[inline]
    fn overlapping(self, a: u64, b: u64) -> Option<u64> {
        if self.every == 0 {
            return None;
        }
        let k = if a >= self.hold { (a - self.hold) / self.every + 1 } else { 1 };
        let start = k * self.every;
        (start < b).then_some(start)
    }

    /// Whether a refresh starts in [a, b): a row open at `a` is closed by `b`.
    #[inline]
    fn closes(self, a: u64, b: u64) -> bool {
        self.every != 0 && a.div_ceil(self.every).max(1) * self.every < b
    }
}

/// A burst in a bank's schedule: the bank is held over memory clocks [start, end).
#[derive(Clone, Copy, Debug)]
struct Burst {
    start: u64,
    end: u64,
    row: u64,
    kind: Kind,
    /// The bank is left precharged at `end` (a cancelled write whose activation finished,
    /// `with_idle_writes`); otherwise `row` stays open.
    closed: bool,
}

#[derive(Clone, Debug, Default)]
struct Bank {
    /// Recent bursts in time order (non-overlapping).
    sched: VecDeque<Burst>,
    /// Nothing may start before this clock (the end of the last forgotten burst) ...
    floor: u64,
    /// ... when this row was open (`None`: precharged).
    floor_row: Option<u64>,
}

impl Bank {
    /// Put `b` at position `i` of the schedule, forgetting the oldest burst beyond `HISTORY`.
    fn insert(&mut self, i: usize, b: Burst) {
        if i == self.sched.len() {
            self.sched.push_back(b);
        } else {
            self.sched.insert(i, b);
        }
        if self.sched.len() > HISTORY {
            let old = self.sched.pop_front().expect("history is not empty");
            (self.floor, self.floor_row) = (old.end, (!old.closed).then_some(old.row));
        }
    }

    /// The row open at the end of the schedule (`None`: precharged) and when the bank is free.
    fn last(&self) -> (u64, Option<u64>) {
        match self.sched.back() {
            Some(u) => (u.end, (!u.closed).then_some(u.row)),
            None => (self.floor, self.floor_row),
        }
    }
}

/// Row-buffer outcomes, reads and writes together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowCounters {
    pub hits: u64,
    pub misses: u64,
    pub conflicts: u64,
}

/// The bit fields of an address (see the module's "Address mapping").
#[derive(Clone, Copy, Debug)]
struct Map {
    offset_bits: u32,
    channel_mask: u64,
    channel_bits: u32,
    bank_mask: u64,
    bank_bits: u32,
    /// Bits of the granule within a row.
    column_bits: u32,
}

impl Map {
    /// (index of the bank among all banks, channel, row) of `addr`.
    #[inline]
    fn locate(&self, addr: u64) -> (usize, usize, u64) {
        let g = addr >> self.offset_bits;
        let ch = g & self.channel_mask;
        let bank = (g >> self.channel_bits) & self.bank_mask;
        let row = g >> (self.channel_bits + self.bank_bits + self.column_bits);
        (((ch << self.bank_bits) | bank) as usize, ch as usize, row)
    }
}

#[derive(Clone, Debug)]
pub struct Dram {
    p: DramParams,
    map: Map,
    /// Channel-major: bank b of channel c is `banks[c * p.banks + b]`.
    banks: Vec<Bank>,
    /// Each channel's data bus, in memory clocks.
    buses: Vec<Calendar>,
    /// `queue_cycles`: cycles reads waited beyond the latency of their row outcome (busy
    /// bank or data bus).
    pub c: MemCounters,
    pub rows: RowCounters,
    wq: WriteQueue,
    refresh: Refresh,
    /// Write mode (`with_write_mode`): queued writes leave `batch` at a time, the data bus
    /// idling `turnaround` memory clocks before and after each batch.
    turnaround: u64,
    batch: usize,
    /// Per channel in write mode: the first turnaround's first slot and the end of the
    /// writes' data (the switch back not booked yet).
    write_mode: Vec<Option<(u64, u64)>>,
    /// `with_idle_writes`: writes the controller starts on banks per memory clock while no
    /// read waits (0: writes wait for the queue to fill).
    idle_rate: u64,
    /// Per channel, the last `READS_KEPT` reads: (memory clock each reached the controller,
    /// the end of its data, how long before a read presented ahead of it it came) ...
    reads_seen: Vec<VecDeque<(u64, u64, u64)>>,
    /// ... and the latest clock a read presented so far reached it.
    reads_latest: Vec<u64>,
    pub idle: IdleCounters,
    /// Queued writes cancelled by a switch back, by address: the memory clock of the switch,
    /// which ChampSim makes their ready time (`pkt->value().ready_time = current_time`), so
    /// they start after the others in the next gap.
    cancelled_at: HashMap<u64, u64>,
}

/// Reads remembered per channel to tell whether the read queue was empty: ChampSim's DRAM
/// read queue holds no more (champsim_config.json physical_memory rq_size 64).
const READS_KEPT: usize = 64;

/// What `with_idle_writes` did (the `mem.dram_idle_*` statistics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdleCounters {
    /// Reads that found the read queue empty since an earlier time and writes waiting: the
    /// bus had turned to writes, and turns back.
    pub switches: u64,
    /// Writes that left in those gaps.
    pub writes: u64,
    /// Reads held until the write queue fell under its low mark.
    pub held: u64,
    /// Writes started on banks in a gap and cancelled by the switch back, each leaving its
    /// bank with the write's row open or precharged.
    pub cancelled: u64,
}

fn power_of_two(key: &str, v: u64) -> Result<u32, String> {
    if v.is_power_of_two() {
        Ok(v.trailing_zeros())
    } else {
        Err(format!("{}: {} is not a power of two", key, v))
    }
}

impl Dram {
    /// A DRAM with `p`'s geometry and timing; the error names the parameter at fault.
    pub fn new(p: DramParams) -> Result<Dram, String> {
        let channel_bits = power_of_two("dram.channels", p.channels)?;
        let bank_bits = power_of_two("dram.banks", p.banks)?;
        let offset_bits = power_of_two("dram.interleave", p.interleave)?;
        let row_bits = power_of_two("dram.row_bytes", p.row_bytes)?;
        if p.interleave > p.row_bytes {
            return Err(format!("dram.interleave: {} B is more than a row (dram.row_bytes = {} B)", p.interleave, p.row_bytes));
        }
        if p.t_cas == 0 {
            return Err("dram.tCAS: must be at least one memory clock".into());
        }
        if p.clock == 0 || p.width == 0 {
            return Err(format!("memory bus: {} cycles per beat of {} B; both must be positive", p.clock, p.width));
        }
        let map = Map {
            offset_bits,
            channel_mask: p.channels - 1,
            channel_bits,
            bank_mask: p.banks - 1,
            bank_bits,
            column_bits: row_bits - offset_bits,
        };
        Ok(Dram {
            p,
            map,
            banks: vec![Bank::default(); (p.channels * p.banks) as usize],
            buses: (0..p.channels).map(|_| Calendar::new()).collect(),
            c: MemCounters::default(),
            rows: RowCounters::default(),
            wq: WriteQueue::new(0),
            refresh: Refresh::default(),
            turnaround: 0,
            batch: 1,
            write_mode: vec![None; p.channels as usize],
            idle_rate: 0,
            reads_seen: vec![VecDeque::new(); p.channels as usize],
            reads_latest: vec![0; p.channels as usize],
            idle: IdleCounters::default(),
            cancelled_at: HashMap::new(),
        })
    }

    /// Posted writes wait in a controller queue of `entries` writes, so that reads go first
    /// (see `WriteQueue`); 0: no queue, each write is booked when issued.
    pub fn with_write_queue(mut self, entries: usize) -> Dram {
        self.wq = WriteQueue::new(entries);
        self
    }

    /// Every `every` memory clocks (tREFI) each bank is refreshed for `hold` clocks (tRFC),
    /// which closes its open row; 0: no refresh. All banks at once, as ChampSim's
    /// DRAM_CHANNEL::schedule_refresh; a burst that would overlap a refresh waits for its end
    /// (ChampSim lets a busy bank finish its request first).
    pub fn with_refresh(mut self, every: u64, hold: u64) -> Dram {
        self.refresh = Refresh { every, hold };
        self
    }

    /// Queued writes leave in batches of `batch` (the oldest, when the queue overflows),
    /// each batch switching the data bus to writes and back, which idles it `turnaround`
    /// memory clocks each way; reads booked later find no data slot from the first
    /// turnaround to the end of the second. This is ChampSim's write mode
    /// (DRAM_CHANNEL::swap_write_mode: to writes at 7/8 of the queue, back under 6/8 while
    /// reads wait, DRAM_DBUS_TURN_AROUND_TIME each way). Batch 1 and turnaround 0: each write
    /// on its own, as without.
    pub fn with_write_mode(mut self, turnaround: u64, batch: usize) -> Dram {
        (self.turnaround, self.batch) = (turnaround, batch.max(1));
        self
    }

    /// ChampSim's write mode when no read waits (DRAM_CHANNEL::swap_write_mode,
    /// src/dram_controller.cc, 2ff25011): the channel also turns to writes when its read
    /// queue is empty and a write waits (`rq_occu == 0 && wq_occu > 0`), starting one queued
    /// write a controller clock on a free bank (`service_packet(schedule_packet())`, oldest
    /// first); `rate` such starts per memory clock, 0: off. It turns back when the write
    /// queue is empty, or when a read comes while fewer than the low mark wait (6/8 of the
    /// queue: `with_write_queue`'s entries + 1 − `with_write_mode`'s batch); with more, the
    /// read waits until enough writes are out. Each switch idles the data bus a turnaround
    /// from the end of the write on it (or from the switch), and cancels the writes started
    /// on banks that have not reached the bus: such a bank is left precharged if the write's
    /// activation had finished, else with the write's row taken as open.
    ///
    /// Requests come in program order with out-of-order times, so the gap is judged when a
    /// read is presented, from the reads presented before it (the last `READS_KEPT` per
    /// channel): the read queue was empty from the end of the latest data of the reads that
    /// reached the controller before this one until this one, and only a gap older than the
    /// most any of those reads came before one presented ahead of it counts.
    pub fn with_idle_writes(mut self, rate: u64) -> Dram {
        self.idle_rate = rate;
        self
    }

    pub fn params(&self) -> DramParams {
        self.p
    }

    #[inline]
    fn beats(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.p.width).max(1)
    }

    /// Schedule a burst of `n` beats at `addr` wanted from memory clock `w`: its first data
    /// slot on the channel's bus and its row outcome. `data` is the distance from the column
    /// command to the first data slot.
    fn burst(&mut self, addr: u64, n: u64, w: u64, data: u64) -> (u64, Kind) {
        self.place(addr, n, w, data, true)
    }

    /// `burst`, booking it only if `book` (else the answer is what `burst` would book now).
    fn place(&mut self, addr: u64, n: u64, w: u64, data: u64, book: bool) -> (u64, Kind) {
        let (b, ch, row) = self.map.locate(addr);
        let (p, rf) = (self.p, self.refresh);
        let bank = &mut self.banks[b];
        let bus = &mut self.buses[ch];
        let mut w = w.max(bank.floor);
        // The first gap that may hold the burst: after the last burst ending by `w` (mostly
        // the last one: requests come roughly in time order).
        let mut i = match bank.sched.back() {
            Some(u) if u.end > w => bank.sched.partition_point(|u| u.end <= w),
            _ => bank.sched.len(),
        };
        loop {
            let (free, open) = match i.checked_sub(1).map(|j| bank.sched[j]) {
                Some(u) => (u.end, (!u.closed).then_some(u.row)),
                None => (bank.floor, bank.floor_row),
            };
            let first = free.max(w);
            let kind = match open {
                _ if rf.closes(free, first) => Kind::Miss,
                Some(r) if r == row => Kind::Hit,
                Some(_) => Kind::Conflict,
                None => Kind::Miss,
            };
            let next = bank.sched.get(i);
            let until = next.map_or(u64::MAX, |u| u.start);
            // The next burst must find the bank as it would have without this one (a refresh
            // between the two closes the row whatever it was).
            let keeps = |end: u64| next.is_none_or(|u| u.kind == Kind::Conflict || kind == Kind::Hit || rf.closes(end, u.start));
            if rf.every != 0 || keeps(0) {
                let prep = p.prep(kind);
                let col = first + prep;
                if col + n <= until {
                    let s = bus.find(col + data, n);
                    let col = s - data;
                    if col + n > until {
                        // Every later gap's first fit on the bus is at or after `s` too: skip
                        // the gaps that end before a burst with its data there could.
                        i = bank.sched.partition_point(|u| u.start < col + n);
                        continue;
                    }
                    if let Some(r) = rf.overlapping(first, col + n) {
                        // A refresh holds the bank: start after it, the row closed.
                        w = r + rf.hold;
                        continue;
                    }
                    if !keeps(col + n) {
                        i += 1;
                        continue;
                    }
                    if !book {
                        return (s, kind);
                    }
                    bus.take(s, n);
                    let b = Burst { start: col - prep, end: col + n, row, kind, closed: false };
                    bank.insert(i, b);
                    let r = &mut self.rows;
                    *match kind {
                        Kind::Hit => &mut r.hits,
                        Kind::Miss => &mut r.misses,
                        Kind::Conflict => &mut r.conflicts,
                    } += 1;
                    return (s, kind);
                }
            }
            i += 1;
        }
    }

    /// Read `bytes` at `addr` requested at `t`.
    pub fn read(&mut self, addr: u64, bytes: u64, t: Cycle) -> Transfer {
        let (n, bc) = (self.beats(bytes), self.p.clock);
        if self.turnaround > 0 || self.batch > 1 {
            self.leave_write_mode(self.map.locate(addr).1);
        }
        // Commands issue on memory clock edges.
        let w = t.div_ceil(bc);
        let (s, kind) = if self.idle_rate > 0 {
            let from = self.idle_writes(addr, w);
            let (s, kind) = self.burst(addr, n, from, self.p.t_cas - 1);
            let ch = self.map.locate(addr).1;
            let (seen, latest) = (&mut self.reads_seen[ch], &mut self.reads_latest[ch]);
            if seen.len() == READS_KEPT {
                seen.pop_front();
            }
            seen.push_back((w, s + n, latest.saturating_sub(w)));
            *latest = w.max(*latest);
            (s, kind)
        } else {
            self.burst(addr, n, w, self.p.t_cas - 1)
        };
        let tr = transfer(s, n, bc);
        let c = &mut self.c;
        c.queue_cycles += tr.first - (w + self.p.prep(kind) + self.p.t_cas) * bc;
        c.busy_cycles += n * bc;
        c.read_bytes += n * self.p.width;
        c.reads += 1;
        tr
    }

    /// A posted write of `bytes` at `addr` issued at `t`: when the writer is rid of it (on
    /// memory, or accepted by the write queue if there is one).
    pub fn write(&mut self, addr: u64, bytes: u64, t: Cycle) -> Cycle {
        let n = self.beats(bytes);
        let c = &mut self.c;
        c.busy_cycles += n * self.p.clock;
        c.write_bytes += n * self.p.width;
        c.writes += 1;
        if !self.wq.enabled() {
            return self.drain(Posted { addr, bytes, t });
        }
        let displaced = self.wq.post(Posted { addr, bytes, t }).map(|w| self.drain_batch(w));
        self.wq.accept(t, displaced)
    }

    /// Book the queued write `oldest` and, in write mode, the next oldest up to a batch;
    /// returns when `oldest` is on memory. A channel switches its data bus to writes (a
    /// turnaround) unless it is still in write mode from the batch before (queued again by
    /// the time that one's data ended, with no read presented since: a flood of writes, as a
    /// memory image, stays in write mode as ChampSim's does while no read waits); it switches
    /// back when the next read comes (`leave_write_mode`).
    fn drain_batch(&mut self, oldest: Posted) -> Cycle {
        if self.batch == 1 && self.turnaround == 0 {
            return self.drain(oldest);
        }
        let (bc, ta) = (self.p.clock, self.turnaround);
        let mut batch = vec![oldest];
        while batch.len() < self.batch {
            match self.wq.take_oldest() {
                Some(w) => batch.push(w),
                None => break,
            }
        }
        if !self.cancelled_at.is_empty() {
            batch.iter().for_each(|w| _ = self.cancelled_at.remove(&w.addr));
        }
        // Once the whole batch is queued.
        let from = batch.iter().map(|w| (w.t + self.p.write_delay).div_ceil(bc)).max().unwrap_or(0);
        let channels = self.p.channels as usize;
        // Per channel: where its writes may start, and the end of their data.
        let mut start: Vec<Option<u64>> = vec![None; channels];
        let mut end = vec![0; channels];
        let mut beats = vec![0; channels];
        let mut done = 0;
        for (k, w) in batch.iter().enumerate() {
            let ch = self.map.locate(w.addr).1;
            let at = match start[ch] {
                Some(at) => at,
                None => {
                    let at = match self.write_mode[ch] {
                        Some((_, e)) if from <= e => e,
                        _ => {
                            self.leave_write_mode(ch);
                            let s = self.buses[ch].find(from, ta.max(1));
                            if ta > 0 {
                                self.buses[ch].take(s, ta);
                            }
                            self.write_mode[ch] = Some((s, s + ta));
                            s + ta
                        }
                    };
                    start[ch] = Some(at);
                    at
                }
            };
            let n = self.beats(w.bytes);
            let (s, _) = self.burst(w.addr, n, at, 0);
            end[ch] = end[ch].max(s + n);
            beats[ch] += n;
            if k == 0 {
                done = (s + n) * bc;
            }
        }
        // The channel is the writes' until their data ends, as far as a batch to free banks
        // takes (one activation, then the bursts back to back: a write kept later by a busy
        // bank leaves write mode to the reads meanwhile).
        for ch in 0..channels {
            let (Some(at), Some((s0, e0))) = (start[ch], self.write_mode[ch]) else { continue };
            let bound = at + self.p.t_rp + self.p.t_rcd + beats[ch];
            let e = e0.max(end[ch].min(bound));
            self.block(ch, s0, e);
            self.write_mode[ch] = Some((s0, e));
        }
        done
    }

    /// `with_idle_writes` for the read of `addr` reaching the controller at memory clock `w`:
    /// the writes that went while no read waited, the switch back, and the read's bank as the
    /// cancelled writes left it; returns the clock from which the read may be scheduled.
    fn idle_writes(&mut self, addr: u64, w: u64) -> u64 {
        let ch = self.map.locate(addr).1;
        let (bc, delay, ta, map) = (self.p.clock, self.p.write_delay, self.turnaround, self.map);
        let arrival = move |x: &Posted| (x.t + delay).div_ceil(bc);
        // Queued writes of this channel that had reached the controller by `w`.
        let here = move |x: &Posted| map.locate(x.addr).1 == ch && arrival(x) <= w;
        // When the read queue last emptied: the end of the latest data of the reads that came
        // before. Reads presented later may still come before this one, as early as the most
        // any recent read came before one presented ahead of it (`late`): only a gap older
        // than that is known to be empty.
        let (mut emptied, mut late) = (0, 0);
        for &(a, e, l) in &self.reads_seen[ch] {
            if a < w {
                emptied = emptied.max(e);
            }
            late = late.max(l);
        }
        if emptied + late >= w {
            return w;
        }
        let Some(first) = self.wq.pending().filter(|x| here(x)).map(arrival).min() else { return w };
        let g0 = emptied.max(first);
        if g0 + late >= w {
            return w;
        }
        self.idle.switches += 1;
        self.block(ch, g0, g0 + ta);
        let low = (self.wq.capacity() + 1).saturating_sub(self.batch).max(1);
        // Writes out in the gap, in the order ChampSim starts them (`ready`): those whose data
        // starts before the read comes, then, while the low mark or more wait, those the read
        // waits for.
        let (mut end, mut started, mut held) = (None, 0, false);
        loop {
            let waiting = self.wq.pending().filter(|x| here(x)).count();
            let Some(i) = self.ready(ch, w).first().map(|&(_, k)| k) else { break };
            let x = *self.wq.pending().nth(i).expect("a queued write");
            let (n, at) = (self.beats(x.bytes), arrival(&x).max(g0));
            if self.place(x.addr, n, at, 0, false).0 >= w {
                if waiting < low {
                    break;
                }
                held = true;
            }
            self.wq.remove(i);
            self.cancelled_at.remove(&x.addr);
            let (s, _) = self.burst(x.addr, n, at, 0);
            end = Some(end.unwrap_or(0).max(s + n));
            started += 1;
            self.idle.writes += 1;
        }
        let left = self.wq.pending().filter(|x| here(x)).count();
        // The switch back: when the queue emptied, when the read came, or when the writes it
        // waited for were out; the bus idles a turnaround after the last write's data.
        let switch = match end {
            Some(e) if held => e.max(w),
            _ => w,
        };
        // (When the queue emptied before the read came, the bus turned back then.)
        let back = match end {
            Some(e) if left == 0 && !held => e,
            Some(e) => e.max(switch),
            None => switch,
        };
        self.block(ch, back, back + ta);
        if held {
            self.idle.held += 1;
        }
        if left > 0 {
            self.cancelled_writes(ch, g0, started, switch, w);
        }
        switch
    }

    /// The queued writes of channel `ch` that had reached the controller by `w`, in the order
    /// ChampSim's schedule_packet starts them: by ready time (arrival, or the last
    /// cancellation), then queue position; as (ready, position in the queue).
    fn ready(&self, ch: usize, w: u64) -> Vec<(u64, usize)> {
        let (bc, delay, map) = (self.p.clock, self.p.write_delay, self.map);
        let mut order: Vec<(u64, usize)> = (self.wq.pending().enumerate())
            .filter_map(|(k, x)| {
                let a = (x.t + delay).div_ceil(bc);
                (map.locate(x.addr).1 == ch && a <= w).then(|| (self.cancelled_at.get(&x.addr).copied().unwrap_or(a), k))
            })
            .collect();
        order.sort_unstable();
        order
    }

    /// The banks as the switch back at `switch` left them: ChampSim started the queued writes
    /// one a controller clock (`idle_rate` a memory clock) from `g0`, after the `started`
    /// that went out, each on a bank with none yet, in `ready` order (schedule_packet prefers
    /// free banks); swap_write_mode cancels each one not on the bus, leaving its bank
    /// precharged if the write's activation had finished (its ready time within tCAS), else
    /// with the write's row as its open row, and makes the switch its ready time.
    fn cancelled_writes(&mut self, ch: usize, g0: u64, started: u64, switch: u64, w: u64) {
        let (map, rf) = (self.map, self.refresh);
        let mut taken = vec![false; self.banks.len()];
        let mut rank = started;
        let mut firsts = Vec::new();
        for (_, k) in self.ready(ch, w) {
            let addr = self.wq.pending().nth(k).expect("a queued write").addr;
            let (b, _, row) = map.locate(addr);
            if taken[b] {
                continue;
            }
            taken[b] = true;
            let s = g0 + rank / self.idle_rate;
            if s >= switch {
                break;
            }
            firsts.push((b, row, s, addr));
            rank += 1;
        }
        for (b, wrow, s, addr) in firsts {
            self.cancelled_at.insert(addr, switch);
            let bank = &mut self.banks[b];
            let (free, open) = bank.last();
            // A bank still busy (or booked later already) took no write; nor one refreshed then.
            if free > s || rf.overlapping(s, switch).is_some() {
                continue;
            }
            let open = if rf.closes(free, s) { None } else { open };
            let kind = match open {
                Some(r) if r == wrow => Kind::Hit,
                Some(_) => Kind::Conflict,
                None => Kind::Miss,
            };
            let closed = s + self.p.prep(kind) < switch;
            bank.insert(bank.sched.len(), Burst { start: s, end: switch, row: wrow, kind, closed });
            self.idle.cancelled += 1;
        }
    }

    /// Every free data-bus slot of channel `ch` in [from, to) taken.
    fn block(&mut self, ch: usize, from: u64, to: u64) {
        let bus = &mut self.buses[ch];
        let mut x = from;
        while x < to {
            let s = bus.find(x, 1);
            if s >= to {
                break;
            }
            bus.take(s, 1);
            x = s + 1;
        }
    }

    /// Channel `ch` back from write mode to reads: the turnaround after its writes' data.
    fn leave_write_mode(&mut self, ch: usize) {
        if let Some((_, e)) = self.write_mode[ch].take() {
            let ta = self.turnaround;
            let back = self.buses[ch].find(e, ta.max(1));
            self.block(ch, e, back + ta);
        }
    }

    /// Book a write now; returns when it is on memory.
    fn drain(&mut self, w: Posted) -> Cycle {
        let (n, bc) = (self.beats(w.bytes), self.p.clock);
        let (s, _) = self.burst(w.addr, n, (w.t + self.p.write_delay).div_ceil(bc), 0);
        (s + n) * bc
    }

    /// Cycle from which nothing is booked or queued (queued writes: a bound, as if drained
    /// one after the other after everything booked, each a conflict).
    pub fn free_at(&self) -> Cycle {
        let bc = self.p.clock;
        let open = self.write_mode.iter().flatten().map(|&(_, e)| e + self.turnaround);
        let end = self.buses.iter().map(Calendar::end).chain(open).max().unwrap_or(0) * bc;
        let worst = self.p.t_rp + self.p.t_rcd + 1 + 2 * self.turnaround;
        self.wq.drained_by(end, self.p.write_delay, |w| (worst + self.beats(w.bytes)) * bc)
    }

    pub fn reset_stats(&mut self) {
        self.c = MemCounters::default();
        self.rows = RowCounters::default();
        self.idle = IdleCounters::default();
        self.wq.reset_stats();
    }
}

impl MemoryModel for Dram {
    fn read(&mut self, addr: u64, bytes: u64, t: Cycle) -> Transfer {
        Dram::read(self, addr, bytes, t)
    }

    fn write(&mut self, addr: u64, bytes: u64, t: Cycle) -> Cycle {
        Dram::write(self, addr, bytes, t)
    }

    fn beat(&self) -> Beat {
        Beat { width: self.p.width, cycles: self.p.clock }
    }

    /// A row hit's: tCAS.
    fn latency(&self) -> Cycle {
        self.p.t_cas * self.p.clock
    }

    fn free_at(&self) -> Cycle {
        Dram::free_at(self)
    }

    fn counters(&self) -> &MemCounters {
        &self.c
    }

    fn reset_stats(&mut self) {
        Dram::reset_stats(self)
    }

    fn extra_stats(&self, out: &mut dyn FnMut(&'static str, u64)) {
        out("dram_row_hits", self.rows.hits);
        out("dram_row_misses", self.rows.misses);
        out("dram_row_conflicts", self.rows.conflicts);
        if self.idle_rate > 0 {
            out("dram_idle_switches", self.idle.switches);
            out("dram_idle_writes", self.idle.writes);
            out("dram_idle_held_reads", self.idle.held);
            out("dram_idle_cancelled_rows", self.idle.cancelled);
        }
        self.wq.stats(out);
    }

    fn name(&self) -> &'static str {
        "dram"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::{Bus, BusParams};
    use crate::xorshift;

    /// 004 Table 2 at a CPU:memory clock ratio of 1:`clock`: CAS 20, RP 7, RCD 7, an 8-B
    /// bus; 1 channel of 4 banks with 4 KiB rows, 64-B lines interleaved.
    fn table2_at(clock: Cycle) -> DramParams {
        DramParams { channels: 1, banks: 4, row_bytes: 4096, interleave: 64, t_rp: 7, t_rcd: 7, t_cas: 20, clock, width: 8, write_delay: 0 }
    }

    fn table2() -> Dram {
        Dram::new(table2_at(5)).unwrap()
    }

    /// The address of `line` within `row` of `bank` (one channel, 4 banks, 64 lines a row).
    fn at(bank: u64, row: u64, line: u64) -> u64 {
        ((row << 8) | (line << 2) | bank) << 6
    }

    #[test]
    fn idle_reads_take_x_5_5_5_with_x_set_by_the_page() {
        let mut d = table2();
        // Precharged bank: RCD 7 + CAS 20 clocks of 5 cycles, then 8-B beats 5 cycles apart.
        let r = d.read(at(0, 0, 0), 64, 0);
        assert_eq!((r.first, r.last), (135, 170));
        // Row hit: CAS only.
        let r = d.read(at(0, 0, 1), 64, 1000);
        assert_eq!((r.first, r.last), (1100, 1135));
        // Another row open in the bank: RP 7 + RCD 7 + CAS 20.
        let r = d.read(at(0, 1, 0), 64, 2000);
        assert_eq!((r.first, r.last), (2170, 2205));
        assert_eq!(d.rows, RowCounters { hits: 1, misses: 1, conflicts: 1 });
        assert_eq!(d.c.queue_cycles, 0);
        assert_eq!((d.c.reads, d.c.read_bytes, d.c.busy_cycles), (3, 192, 120));
        assert_eq!(MemoryModel::latency(&d), 100);
    }

    #[test]
    fn the_clock_ratio_scales_every_timing() {
        // Fig. 9's 1:4 and 1:6: 27 clocks to a precharged bank's first beat, a beat a clock.
        for ratio in [4, 6] {
            let mut d = Dram::new(table2_at(ratio)).unwrap();
            let r = d.read(at(2, 5, 3), 64, 0);
            assert_eq!((r.first, r.last), (27 * ratio, 34 * ratio));
            assert_eq!(d.beat(), Beat { width: 8, cycles: ratio });
        }
    }

    #[test]
    fn a_request_off_the_memory_clock_waits_for_its_edge() {
        let mut d = table2();
        let r = d.read(at(0, 0, 0), 64, 1);
        assert_eq!(r.first, 5 + 135);
        assert_eq!(d.c.queue_cycles, 0, "clock alignment is not queueing");
    }

    #[test]
    fn banks_overlap_their_activations_and_share_the_data_bus() {
        let mut d = table2();
        // Four precharged banks at once: the activations overlap, the bursts follow each
        // other on the bus.
        let firsts: Vec<Cycle> = (0..4).map(|b| d.read(at(b, 0, 0), 64, 0).first).collect();
        assert_eq!(firsts, vec![135, 175, 215, 255]);
        assert_eq!(d.c.queue_cycles, 40 + 80 + 120);
        // The same four in one bank's four rows: each precharges after the burst before it.
        let mut d = table2();
        let firsts: Vec<Cycle> = (0..4).map(|row| d.read(at(0, row, 0), 64, 0).first).collect();
        // Miss: commands at 0 (ACT) and 7, data slots 26..34, bank held 0..15.
        // Conflicts: PRE at 15, 37, 59; column at 29, 51, 73; first beats at +20 clocks.
        assert_eq!(firsts, vec![135, 49 * 5, 71 * 5, 93 * 5]);
        assert_eq!(d.rows, RowCounters { hits: 0, misses: 1, conflicts: 3 });
    }

    #[test]
    fn row_hits_to_one_bank_pipeline_back_to_back() {
        let mut d = table2();
        let rs: Vec<(Cycle, Cycle)> = (0..3).map(|k| d.read(at(1, 0, k), 64, 0)).map(|r| (r.first, r.last)).collect();
        // Column commands at 7, 15, 23: the data bus never idles.
        assert_eq!(rs, vec![(135, 170), (175, 210), (215, 250)]);
        assert_eq!(d.rows, RowCounters { hits: 2, misses: 1, conflicts: 0 });
    }

    #[test]
    fn a_request_presented_late_fills_an_earlier_gap_its_row_allows() {
        let mut d = table2();
        d.read(at(0, 0, 0), 64, 0); // bank 0 held 0..15, row 0 open
        let far = d.read(at(0, 1, 0), 64, 10_000); // conflict: PRE at clock 2000
        assert_eq!(far.first, 10_170);
        // Wanted at 1000, presented after: a hit on row 0 before the conflict, which closes
        // whatever is open.
        assert_eq!(d.read(at(0, 0, 1), 64, 1000).first, 1100);
        // A third row in the same gap: a conflict there too.
        assert_eq!(d.read(at(0, 2, 0), 64, 1500).first, 1670);
        // Row 0 again at 1600: bank busy with row 2 until clock 322, then PRE, ACT.
        assert_eq!(d.read(at(0, 0, 2), 64, 1600).first, (322 + 14 + 20) * 5);
        assert_eq!(d.rows, RowCounters { hits: 1, misses: 1, conflicts: 3 });
    }

    #[test]
    fn a_request_that_would_close_the_row_of_a_later_hit_goes_after_it() {
        let mut d = table2();
        d.read(at(0, 0, 0), 64, 0);
        let hit = d.read(at(0, 0, 1), 64, 10_000); // row 0 still open: column at clock 2000
        assert_eq!(hit.first, 10_100);
        // Row 1 wanted at 1000 would leave the later hit a closed row: it waits until that
        // hit's burst ends (clock 2008), then PRE, ACT, column at 2022.
        let r = d.read(at(0, 1, 0), 64, 1000);
        assert_eq!(r.first, (2022 + 20) * 5);
        assert_eq!(d.c.queue_cycles, r.first - (1000 + 170));
        // Row 0 wanted at 2000 still fits before the hit, as a hit.
        assert_eq!(d.read(at(0, 0, 2), 64, 2000).first, 2100);
    }

    #[test]
    fn a_refresh_closes_rows_and_holds_the_banks() {
        let mut d = table2().with_refresh(1000, 50);
        assert_eq!(d.read(at(0, 0, 0), 64, 0).first, 135, "precharged: RCD + CAS");
        // Clock 500, no refresh since: a hit.
        assert_eq!(d.read(at(0, 0, 1), 64, 2500).first, (500 + 20) * 5);
        // Clock 1000: the refresh holds the bank until 1050 and closes row 0: ACT, column at
        // 1057, first beat 20 clocks on (a hit at 1000 without refresh: 1020).
        let r = d.read(at(0, 0, 2), 64, 5000);
        assert_eq!(r.first, (1057 + 20) * 5);
        assert_eq!(d.rows, RowCounters { hits: 1, misses: 2, conflicts: 0 });
        assert_eq!(d.c.queue_cycles, r.first - (1000 + 27) * 5, "the wait for the refresh is queueing");
        // A burst that would run into the next refresh (clock 2000) waits for its end too.
        let r = d.read(at(1, 0, 0), 64, 1995 * 5);
        assert_eq!(r.first, (2050 + 27) * 5);
        // Without refresh nothing changes.
        let mut plain = table2().with_refresh(0, 50);
        plain.read(at(0, 0, 0), 64, 0);
        assert_eq!(plain.read(at(0, 0, 2), 64, 5000).first, (1000 + 20) * 5);
    }

    #[test]
    fn writes_leave_in_batches_between_two_bus_turnarounds() {
        let mut d = table2().with_write_queue(2).with_write_mode(10, 2);
        assert_eq!(d.write(at(1, 0, 0), 64, 0), 0);
        assert_eq!(d.write(at(2, 0, 0), 64, 0), 0);
        // The third overflows the queue: the two oldest leave together. Turnaround on clocks
        // 0..10, then bank 1 (ACT 10, column and data 17..25) and bank 2 (data 25..33), then
        // the turnaround back (33..43). The writer waits for the oldest, on memory at 25.
        assert_eq!(d.write(at(3, 0, 0), 64, 0), 25 * 5);
        assert_eq!(d.wq.pending().count(), 1);
        // A read presented afterwards, wanted at 0 (its data could go at clock 26), finds the
        // bus the writes' until the turnaround back ends.
        assert_eq!(d.read(at(0, 0, 0), 64, 0).first, 44 * 5);
        assert_eq!(d.rows, RowCounters { hits: 0, misses: 3, conflicts: 0 });
        // A flood: two batches with no read between stay in write mode, one turnaround each
        // way. The second batch (bank 3 row 0, a miss: data 40..48; bank 1 row 0, a hit whose
        // data waits for the bus: 48..56) follows the first's data without switching back.
        let mut d = table2().with_write_queue(2).with_write_mode(10, 2);
        d.write(at(1, 0, 0), 64, 0);
        d.write(at(2, 0, 0), 64, 0);
        d.write(at(3, 0, 0), 64, 0);
        d.write(at(1, 0, 1), 64, 0);
        assert_eq!(d.write(at(2, 0, 1), 64, 0), 48 * 5, "accepted when the batch's oldest is on memory");
        // The read switches the bus back after the data (56..66).
        assert_eq!(d.read(at(0, 0, 0), 64, 0).first, 67 * 5);
        // Batch 1, no turnaround: as without write mode.
        let mut plain = table2().with_write_queue(2).with_write_mode(0, 1);
        for k in 1..4 {
            plain.write(at(k, 0, 0), 64, 0);
        }
        assert_eq!(plain.read(at(0, 0, 0), 64, 0).first, 135, "the one drained write (data 7..15) leaves the read its slot at 26");
    }

    /// 004's Table 2 with a queue of 4 writes, batches of 2 (low mark 3) and a turnaround of
    /// 30 clocks; with or without ChampSim's write mode when no read waits. A read opens row
    /// 0 of bank 0 (data 26..34): the read queue is empty from clock 34.
    fn idle_machine(on: bool) -> Dram {
        let mut d = table2().with_write_queue(4).with_write_mode(30, 2).with_idle_writes(if on { 1 } else { 0 });
        d.read(at(0, 0, 0), 64, 0);
        d
    }

    #[test]
    fn a_read_after_a_gap_turns_the_bus_back_and_finds_the_row_a_cancelled_write_opened() {
        let (mut off, mut on) = (idle_machine(false), idle_machine(true));
        for d in [&mut off, &mut on] {
            assert_eq!(d.write(at(1, 0, 0), 64, 40 * 5), 40 * 5, "queued");
        }
        // Without the rule bank 1 is precharged: ACT at 45, column at 52, data from 71.
        assert_eq!(off.read(at(1, 1, 0), 64, 45 * 5).first, 72 * 5);
        // With it the bus turned to writes at 40 (the write came, no read waiting) and bank 1
        // took the write then (ACT at 40); the read at 45 turns the bus back (idle 45..75),
        // cancels the write before its activation finished (47), so row 0 counts as open:
        // the read precharges (column at 59) and its data waits for the bus until 78.
        let r = on.read(at(1, 1, 0), 64, 45 * 5);
        assert_eq!(r.first, 79 * 5);
        assert_eq!(on.rows, RowCounters { hits: 0, misses: 1, conflicts: 1 });
        assert_eq!(on.wq.pending().count(), 1, "the cancelled write is still queued");
        assert_eq!(on.idle, IdleCounters { switches: 1, writes: 0, held: 0, cancelled: 1 });
        assert_eq!(on.c.queue_cycles, r.first - (45 + 14 + 20) * 5, "the turnaround is queueing");
        let mut s = Vec::new();
        on.extra_stats(&mut |k, v| s.push((k, v)));
        assert!(s.contains(&("dram_idle_switches", 1)) && s.contains(&("dram_idle_cancelled_rows", 1)), "{:?}", s);
        let mut s = Vec::new();
        off.extra_stats(&mut |k, v| s.push((k, v)));
        assert!(!s.iter().any(|(k, _)| k.starts_with("dram_idle")), "{:?}", s);
        // A read coming while another is in flight finds no gap.
        let mut busy = idle_machine(true);
        busy.read(at(2, 0, 0), 64, 30 * 5);
        busy.write(at(1, 0, 0), 64, 40 * 5);
        assert_eq!(busy.read(at(1, 1, 0), 64, 45 * 5).first, 72 * 5);
        assert_eq!(busy.idle.switches, 0);
    }

    #[test]
    fn a_gap_is_judged_only_beyond_how_late_recent_reads_were_presented() {
        // The same reads (bank 2 at 100, bank 3 at 60; data end 134 and 94), a write at 140
        // and a read at 160, the read queue empty over 134..160: presented in time order the
        // gap is judged, and the bus turns to writes.
        let mut in_order = idle_machine(true);
        in_order.read(at(3, 0, 0), 64, 60 * 5);
        in_order.read(at(2, 0, 0), 64, 100 * 5);
        // Presented the other way round, the read of bank 3 came 40 clocks before one presented
        // ahead of it: a read presented after the one at 160 might still come in 120..160, so
        // a gap of 26 clocks is not known to be empty.
        let mut late = idle_machine(true);
        late.read(at(2, 0, 0), 64, 100 * 5);
        late.read(at(3, 0, 0), 64, 60 * 5);
        for d in [&mut in_order, &mut late] {
            d.write(at(1, 0, 0), 64, 140 * 5);
            d.read(at(1, 1, 0), 64, 160 * 5);
        }
        assert_eq!((in_order.idle.switches, late.idle.switches), (1, 0));
    }

    #[test]
    fn a_read_coming_while_the_low_mark_of_writes_waits_is_held_until_one_is_out() {
        let (mut off, mut on) = (idle_machine(false), idle_machine(true));
        for d in [&mut off, &mut on] {
            for bank in 1..4 {
                d.write(at(bank, 0, 0), 64, 40 * 5);
            }
        }
        // Without the rule: a row hit at 45, data from 64.
        assert_eq!(off.read(at(0, 0, 1), 64, 45 * 5).first, 65 * 5);
        // With it three writes (the low mark) wait when the read comes at 45: the bus stays
        // with the writes until the oldest is out (bank 1: ACT 40, data after the turnaround,
        // 70..78); then it turns back (idle 78..108) and the read is scheduled (column at 78).
        let r = on.read(at(0, 0, 1), 64, 45 * 5);
        assert_eq!(r.first, 109 * 5);
        // The two writes left were started at 41 and 42 on banks 2 and 3 (activations done by
        // 48 and 49) and are cancelled at 78: both banks are left precharged.
        assert_eq!(on.idle, IdleCounters { switches: 1, writes: 1, held: 1, cancelled: 2 });
        assert_eq!(on.wq.pending().count(), 2);
        for bank in [2, 3] {
            let u = on.banks[bank].sched.back().unwrap();
            assert!(u.closed && u.end == 78, "{:?}", u);
        }
        assert_eq!(on.c.queue_cycles, r.first - (45 + 20) * 5);
    }

    #[test]
    fn a_cancelled_write_starts_after_the_others_in_the_next_gap() {
        // Low mark 7: nothing holds the reads. Three writes reach the queue at 40.
        let mut d = table2().with_write_queue(8).with_write_mode(30, 2).with_idle_writes(1);
        d.read(at(0, 0, 0), 64, 0);
        for bank in 1..4 {
            d.write(at(bank, 0, 0), 64, 40 * 5);
        }
        // A read at 41 ends a gap of one clock: only the oldest write (bank 1) was started,
        // at 40, and is cancelled at 41 with its activation under way (row 0 left open).
        d.read(at(0, 0, 1), 64, 41 * 5);
        assert_eq!(d.idle.cancelled, 1);
        let u = *d.banks[1].sched.back().unwrap();
        assert!((u.start, u.end, u.closed) == (40, 41, false), "{:?}", u);
        // The next gap (from that read's data end, 79, to 100): ChampSim gave the cancelled
        // write the switch as its ready time, so banks 2 and 3 start first (79, 80) and bank 1
        // last (81), where it finds its own row open: a row hit, cancelled after its tCAS
        // began, which leaves the bank precharged.
        d.read(at(0, 0, 2), 64, 100 * 5);
        let starts: Vec<(u64, bool)> = (1..4).map(|b| d.banks[b].sched.back().map(|u| (u.start, u.closed)).unwrap()).collect();
        assert_eq!(starts, vec![(81, true), (79, true), (80, true)]);
        assert_eq!(d.idle, IdleCounters { switches: 2, writes: 0, held: 0, cancelled: 4 });
    }

    #[test]
    fn writes_go_out_in_a_long_gap_and_the_bus_turns_back_when_the_queue_is_empty() {
        let (mut off, mut on) = (idle_machine(false), idle_machine(true));
        for d in [&mut off, &mut on] {
            d.write(at(1, 0, 0), 64, 40 * 5);
            // The next read comes much later: a row hit, data from 1019 either way.
            assert_eq!(d.read(at(0, 0, 1), 64, 1000 * 5).first, 1020 * 5);
        }
        // With the rule the write went in the gap (ACT at 40, data 70..78, the bus back to
        // reads at 108), so bank 1 has row 0 open for a read presented later, wanted at 200.
        assert_eq!(on.wq.pending().count(), 0);
        assert_eq!(on.idle, IdleCounters { switches: 1, writes: 1, held: 0, cancelled: 0 });
        assert_eq!(on.read(at(1, 0, 1), 64, 200 * 5).first, 220 * 5);
        // Without it the write is still queued and bank 1 precharged.
        assert_eq!(off.wq.pending().count(), 1);
        assert_eq!(off.read(at(1, 0, 1), 64, 200 * 5).first, 227 * 5);
    }

    #[test]
    fn a_long_stream_runs_at_the_bus_rate_across_row_switches() {
        // A line every 40 cycles (the bus's rate): 64 lines a row in each of 4 banks, so every
        // 256th line starts a round of conflicts. The first round's activations leave the
        // stream 7 clocks behind, the first conflicts 14 (X = 170); later conflicts hide
        // their precharge in that slack. Long enough for the schedules to forget old bursts
        // and the bus calendar's window to slide.
        let mut d = table2();
        let n = 256 * 800u64;
        for k in 0..n {
            let r = d.read(k * 64, 64, k * 40);
            let x = if k < 256 { 135 } else { 170 };
            assert_eq!((r.first, r.last), (k * 40 + x, k * 40 + x + 35), "line {}", k);
        }
        assert_eq!(d.rows, RowCounters { hits: n - 800 * 4, misses: 4, conflicts: 799 * 4 });
        assert_eq!(d.free_at(), (n - 1) * 40 + 170 + 35);
    }

    #[test]
    fn writes_take_their_bank_and_bus_like_reads_with_data_at_the_command() {
        let mut d = table2();
        // Precharged bank: ACT at clock 0, column (with the data) at 7, 8 beats.
        assert_eq!(d.write(at(3, 0, 0), 64, 0), (7 + 8) * 5);
        // A read of the open row right after: column at 15, first beat 20 clocks later.
        assert_eq!(d.read(at(3, 0, 1), 64, 0).first, (15 + 20) * 5);
        assert_eq!((d.c.writes, d.c.write_bytes), (1, 64));
        let mut delayed = Dram::new(DramParams { write_delay: 100, ..table2_at(5) }).unwrap();
        assert_eq!(delayed.write(at(3, 0, 0), 64, 0), 100 + (7 + 8) * 5, "write_delay still holds writes back");
    }

    #[test]
    fn queued_writes_let_reads_presented_later_go_first() {
        // Without a queue the write, issued at 95 (column at clock 26, data 26..34), takes
        // the bus slots the read wanted at 0 needs.
        let mut d = table2();
        assert_eq!(d.write(at(1, 0, 0), 64, 95), 34 * 5);
        assert_eq!(d.read(at(0, 0, 0), 64, 0).first, 175);
        // With a queue the read goes first; the write waits for an entry to be needed.
        let mut d = table2().with_write_queue(4);
        assert_eq!(d.write(at(1, 0, 0), 64, 95), 95, "accepted by the queue at once");
        assert_eq!(d.read(at(0, 0, 0), 64, 0).first, 135);
        for k in 0..3 {
            assert_eq!(d.write(at(2, 0, k), 64, 100_000), 100_000);
        }
        // The fifth write displaces the first, which drains after the read's burst (data
        // 34..42, on memory at 210): the fifth waits for its entry until then.
        assert_eq!(d.write(at(2, 0, 3), 64, 100), 210);
        assert_eq!((d.wq.full_waits, d.wq.wait_cycles), (1, 110));
        // It did drain: a hit on its open row follows its burst.
        assert_eq!(d.read(at(1, 0, 1), 64, 0).first, (42 + 20) * 5);
        assert_eq!(d.rows.hits, 1);
    }

    #[test]
    fn a_queued_write_drains_into_time_reads_left_idle() {
        let mut d = table2().with_write_queue(2);
        d.write(at(1, 0, 0), 64, 0);
        for k in 0..4 {
            d.read(at(0, 0, k), 64, 1000 + k * 40);
        }
        // Displaced by the third write long after: it drains at its own issue time, into
        // the idle memory, and the writer that displaced it does not wait.
        d.write(at(2, 0, 0), 64, 5000);
        assert_eq!(d.write(at(2, 0, 1), 64, 5000), 5000);
        assert_eq!(d.wq.full_waits, 0);
        // Bank 1 holds row 0 from clock 0 to 15: a read wanting it at 0 is a hit at 15.
        assert_eq!(d.read(at(1, 0, 1), 64, 0).first, (15 + 20) * 5);
        assert_eq!(d.rows, RowCounters { hits: 4, misses: 2, conflicts: 0 }, "two writes still queued");
    }

    #[test]
    fn free_at_counts_queued_writes() {
        let mut d = table2().with_write_queue(4);
        d.read(at(0, 0, 0), 64, 0);
        assert_eq!(d.free_at(), 170);
        d.write(at(1, 0, 0), 64, 0);
        // Not booked yet; bounded as a conflict after everything booked: (14 + 1 + 8) clocks.
        assert_eq!(d.free_at(), 170 + 23 * 5);
    }

    /// Random reads and writes with jittered times over a few rows of every bank of a
    /// two-channel DRAM; returns every read's (addr, beats, wanted clock, first data slot).
    /// Requests `every` cycles apart, each up to `jitter` cycles early.
    fn scramble(d: &mut Dram, seed: u64, count: u64, every: u64, jitter: u64) -> Vec<(u64, u64, u64, u64)> {
        let mut rnd = xorshift(seed);
        let mut reads = Vec::new();
        for i in 0..count {
            let t = (i * every).saturating_sub(rnd(jitter));
            let addr = rnd(1 << 15) & !7;
            let bytes = [8, 64, 64, 64, 72, 128][rnd(6) as usize];
            if rnd(3) == 0 {
                d.write(addr, bytes, t);
            } else {
                let r = d.read(addr, bytes, t);
                let n = d.beats(bytes);
                reads.push((addr, n, t.div_ceil(5), r.first / 5 - 1));
            }
        }
        reads
    }

    /// Every bank's schedule, replayed in time order, is one the DRAM could have run: bursts
    /// do not overlap, each hit finds its row open, each miss a precharged bank; no data bus
    /// slot is booked twice (the calendar would panic in debug builds).
    fn assert_consistent(d: &Dram) {
        let rf = d.refresh;
        for bank in &d.banks {
            assert_eq!((bank.floor, bank.floor_row), (0, None), "the test stays within the history");
            let mut open = None;
            let mut free = 0;
            for u in &bank.sched {
                assert!(u.start >= free, "{:?} overlaps the burst before", u);
                assert_eq!(rf.overlapping(u.start, u.end), None, "{:?} overlaps a refresh", u);
                if rf.closes(free, u.start) {
                    open = None;
                }
                match u.kind {
                    Kind::Hit => assert_eq!(open, Some(u.row), "{:?}", u),
                    Kind::Miss => assert_eq!(open, None, "{:?}", u),
                    Kind::Conflict => assert!(open.is_some(), "{:?}", u),
                }
                (open, free) = ((!u.closed).then_some(u.row), u.end);
            }
        }
    }

    #[test]
    fn out_of_order_requests_leave_a_schedule_a_controller_could_run() {
        let cases = [
            (0x2545_f491_4f6c_dd1du64, 0, false, 0),
            (0x9e37_79b9_7f4a_7c15, 0, false, 0),
            (0x1234_5678_9abc_def1, 3, false, 0),
            (0x9e37_79b9_7f4a_7c15, 0, true, 0),
            (0x1234_5678_9abc_def1, 3, true, 0),
            (0x1234_5678_9abc_def1, 3, true, 2),
            (0x2545_f491_4f6c_dd1d, 5, true, 1),
        ];
        let mut cancelled = 0;
        for (seed, queue, champsim, idle) in cases {
            let p = DramParams { channels: 2, row_bytes: 1024, ..table2_at(5) };
            let mut d = Dram::new(p).unwrap().with_write_queue(queue);
            if champsim {
                // Refresh and write batches: a refresh every 700 clocks, 3 of them in the run.
                d = d.with_refresh(700, 40).with_write_mode(6, 2).with_idle_writes(idle);
            }
            // With the idle write mode, less jitter: gaps between reads are judged only beyond it.
            let (every, jitter) = if idle > 0 { (150, 200) } else { (60, 4000) };
            let reads = scramble(&mut d, seed, 300, every, jitter);
            assert_consistent(&d);
            let c = d.rows;
            // (Spread out, the idle cases meet refreshes between more of their hits.)
            assert!(c.hits > if idle > 0 { 30 } else { 50 } && c.conflicts > 50, "the mix exercises both: {:?}", c);
            let booked: usize = d.banks.iter().map(|b| b.sched.len()).sum();
            // A cancelled write holds its bank's row without a burst of its own.
            assert_eq!(booked as u64, c.hits + c.misses + c.conflicts + d.idle.cancelled);
            if idle > 0 {
                assert!(d.idle.switches > 5 && d.idle.writes > 0, "{:?}", d.idle);
                cancelled += d.idle.cancelled;
            }
            assert_eq!(booked as u64, d.c.reads + d.c.writes - d.wq.pending().count() as u64 + d.idle.cancelled);
            // Each read's burst is in its bank's schedule, its column command CAS before its
            // data, its first command no earlier than wanted.
            for (addr, n, w, s) in reads {
                let (b, _, row) = d.map.locate(addr);
                let col = s + 1 - p.t_cas;
                let u = d.banks[b].sched.iter().find(|u| u.end == col + n && u.row == row);
                let u = u.unwrap_or_else(|| panic!("read of {:#x} (column at {}) not in its bank", addr, col));
                assert_eq!(u.start, col - p.prep(u.kind));
                assert!(u.start >= w, "{:?} starts before its request at {}", u, w);
            }
        }
        assert!(cancelled > 0, "the idle cases leave a cancelled write's row");
    }

    #[test]
    fn batched_reads_and_writes_are_one_call_each() {
        let models: Vec<fn() -> Box<dyn MemoryModel>> = vec![
            || Box::new(Bus::new(BusParams { latency: 80, width: 8, beat_cycles: 5, write_delay: 0 })),
            || Box::new(Bus::new(BusParams { latency: 80, width: 8, beat_cycles: 5, write_delay: 0 }).with_write_queue(3)),
            || Box::new(table2()),
            || Box::new(table2().with_write_queue(3)),
        ];
        for make in models {
            let (mut a, mut b) = (make(), make());
            let mut rnd = xorshift(0x0bad_cafe_f00d_1234);
            for i in 0..300u64 {
                let t = (i * 300).saturating_sub(rnd(2000));
                let addrs: Vec<u64> = (0..1 + rnd(13)).map(|_| rnd(1 << 20) & !63).collect();
                if rnd(2) == 0 {
                    let singles: Vec<Transfer> = addrs.iter().map(|&x| a.read(x, 64, t)).collect();
                    let mut batch = Vec::new();
                    b.read_many(&addrs, 64, t, &mut |tr| batch.push(tr));
                    assert_eq!(singles, batch, "{} reads {}", a.name(), i);
                } else {
                    let singles = addrs.iter().fold(t, |done, &x| done.max(a.write(x, 64, t)));
                    assert_eq!(singles, b.write_many(&addrs, 64, t), "{} writes {}", a.name(), i);
                }
            }
            assert_eq!(a.counters(), b.counters());
            assert_eq!(a.free_at(), b.free_at());
            let (mut sa, mut sb) = (Vec::new(), Vec::new());
            a.extra_stats(&mut |k, v| sa.push((k, v)));
            b.extra_stats(&mut |k, v| sb.push((k, v)));
            assert_eq!(sa, sb);
        }
    }

    #[test]
    fn row_outcomes_and_the_queue_are_reported_as_statistics() {
        let mut d = table2().with_write_queue(1);
        d.read(at(0, 0, 0), 64, 0);
        d.read(at(0, 0, 1), 64, 0);
        d.read(at(0, 1, 0), 64, 0);
        d.write(at(1, 0, 0), 64, 0);
        d.write(at(1, 0, 1), 64, 0); // displaces the first, on memory at 75: waits 75
        let mut s = Vec::new();
        d.extra_stats(&mut |k, v| s.push((k, v)));
        let expect = [
            ("dram_row_hits", 1),
            ("dram_row_misses", 2),
            ("dram_row_conflicts", 1),
            ("write_queue_full_waits", 1),
            ("write_queue_wait_cycles", 75),
        ];
        assert_eq!(s, expect);
        d.reset_stats();
        s.clear();
        d.extra_stats(&mut |k, v| s.push((k, v)));
        assert!(s.iter().all(|&(_, v)| v == 0), "{:?}", s);
        assert_eq!(d.name(), "dram");
    }

    #[test]
    fn a_geometry_that_cannot_be_mapped_is_an_error_naming_the_parameter() {
        let bad = |p: DramParams| Dram::new(p).unwrap_err();
        let p = table2_at(5);
        assert_eq!(bad(DramParams { banks: 3, ..p }), "dram.banks: 3 is not a power of two");
        assert_eq!(bad(DramParams { channels: 0, ..p }), "dram.channels: 0 is not a power of two");
        assert!(bad(DramParams { interleave: 8192, ..p }).starts_with("dram.interleave: 8192 B is more than a row"));
        assert!(bad(DramParams { t_cas: 0, ..p }).starts_with("dram.tCAS"));
    }
}
