//! The timed port: the only way a scheme reaches untrusted memory.
//!
//! Every call moves the bytes *and* books their transfer on the memory model, at the address
//! they live at, in one step: a scheme cannot read or write untrusted bytes without paying for
//! them, nor pay for bytes it did not move. Bytes moved == bytes booked holds by construction
//! (`mem.read_bytes` counts whole beats of exactly the bytes moved). The one exception is
//! set-up that belongs before the timed run (`Port::set_untimed`): it moves bytes unbooked.
//!
//! The raw memory is reachable only with an [`Adversary`] token, which only the engine can
//! make: it is the adversary's view (`Engine::untrusted`), never a scheme's.

use crate::layout::{PerLine, MAX_LINE};
use crate::mem::UntrustedMemory;
use secmem_timing::{Beat, Cycle, MemCounters, MemoryModel, Transfer};

/// Permission to touch untrusted memory without the port: the adversary's, handed out by the
/// engine only (its constructor is private to `engine`).
pub struct Adversary(pub(crate) ());

pub struct Port {
    mem: UntrustedMemory,
    model: Box<dyn MemoryModel>,
    /// Set-up outside the timed run (`Machine::untimed`): bytes move, nothing is booked.
    untimed: bool,
    side: Option<Box<Side>>,
}

/// Side bits: a few bits kept beside each line in the memory's ECC lanes (an ECC DIMM has 8
/// check bits per 64 data bits, `layout::ECC_BITS_PER_BYTE`), as Intel TDX keeps its MACs
/// and TD-owner bits. They live at addresses of their own (a `PerLine` store) so the adversary
/// reads and flips them like any memory, but they travel on the ECC lanes of the line's own
/// beats: moving them books nothing. So they can be read or written only together with their
/// line: right after the port moved it (`read_side`, `write_side`).
struct Side {
    store: PerLine,
    /// Lines of [0, covered) have side bits.
    covered: u64,
    line: usize,
    /// The line last moved (u64::MAX: none) and its bytes as they crossed the bus.
    last: u64,
    bytes: [u8; MAX_LINE],
    /// When the last line read on its own (`read`) was all on chip; None after other moves.
    arrived: Option<Cycle>,
}

impl Port {
    pub fn new(mem: UntrustedMemory, model: Box<dyn MemoryModel>) -> Port {
        Port { mem, model, untimed: false, side: None }
    }

    /// Untrusted memory spanning the whole layout, never written (once the layout is complete).
    pub(crate) fn allocate(&mut self, mem: UntrustedMemory) {
        self.mem = mem;
    }

    /// While `on`, transfers move their bytes but book nothing and count nothing: they
    /// complete when asked for. Only for work that belongs before the timed run (lhash's
    /// set-up of a page a fast-forwarded program built, `Machine::untimed`).
    pub(crate) fn set_untimed(&mut self, on: bool) {
        self.untimed = on;
    }

    /// Whether transfers are untimed now (`set_untimed`).
    pub(crate) fn untimed(&self) -> bool {
        self.untimed
    }

    /// Read `out.len()` bytes at `addr`, requested at `t`.
    #[inline]
    pub fn read(&mut self, addr: u64, out: &mut [u8], t: Cycle) -> Transfer {
        self.mem.read(addr, out);
        self.moved(addr, out);
        let tr = if self.untimed { Transfer { first: t, last: t } } else { self.model.read(addr, out.len() as u64, t) };
        if let Some(s) = &mut self.side {
            if s.last == addr {
                s.arrived = Some(tr.last);
            }
        }
        tr
    }

    /// Read two pieces back to back in one transfer (a time stamp and the line after it,
    /// 000 Fig. 7b): when each has arrived.
    #[inline]
    pub fn read_pair(&mut self, a: u64, first: &mut [u8], b: u64, second: &mut [u8], t: Cycle) -> (Transfer, Transfer) {
        self.mem.read(a, first);
        self.mem.read(b, second);
        self.moved(a, first);
        self.moved(b, second);
        if self.untimed {
            return (Transfer { first: t, last: t }, Transfer { first: t, last: t });
        }
        self.model.read_pair(a, first.len() as u64, b, second.len() as u64, t)
    }

    /// Read the line at `addr` and metadata stored beside it (004 §2.2: "the MACs are stored
    /// along with each encrypted memory block"), the metadata's bytes `meta` at `meta_addr` in
    /// the layout: one access at the line's address whose burst carries both, line first.
    /// When each has arrived.
    #[inline]
    pub fn read_beside(&mut self, addr: u64, out: &mut [u8], meta_addr: u64, meta: &mut [u8], t: Cycle) -> (Transfer, Transfer) {
        self.mem.read(addr, out);
        self.mem.read(meta_addr, meta);
        self.moved(addr, out);
        if self.untimed {
            return (Transfer { first: t, last: t }, Transfer { first: t, last: t });
        }
        let both = self.model.read(addr, (out.len() + meta.len()) as u64, t);
        let beat = self.model.beat();
        let line_last = (both.first + ((out.len() as u64).div_ceil(beat.width) - 1) * beat.cycles).min(both.last);
        (Transfer { first: both.first, last: line_last }, Transfer { first: line_last, last: both.last })
    }

    /// Read `n` bytes at each of `addrs` into `out[i][..n]`, all requested at `t`; `arrive`
    /// gets each transfer in order.
    #[inline]
    pub fn read_lines(&mut self, addrs: &[u64], out: &mut [[u8; MAX_LINE]], n: usize, t: Cycle, arrive: &mut dyn FnMut(Transfer)) {
        for (&a, buf) in addrs.iter().zip(out.iter_mut()) {
            self.mem.read(a, &mut buf[..n]);
            self.moved(a, &buf[..n]);
        }
        if self.untimed {
            addrs.iter().for_each(|_| arrive(Transfer { first: t, last: t }));
            return;
        }
        self.model.read_many(addrs, n as u64, t, arrive);
    }

    /// Write `data` at `addr`, posted at `t`: when it is on memory.
    #[inline]
    pub fn write(&mut self, addr: u64, data: &[u8], t: Cycle) -> Cycle {
        self.mem.write(addr, data);
        self.moved(addr, data);
        if self.untimed {
            return t;
        }
        self.model.write(addr, data.len() as u64, t)
    }

    /// Write the line at `addr` with the metadata stored beside it (`read_beside`), posted at
    /// `t`: one access at the line's address. When it is on memory.
    #[inline]
    pub fn write_beside(&mut self, addr: u64, data: &[u8], meta_addr: u64, meta: &[u8], t: Cycle) -> Cycle {
        self.mem.write(addr, data);
        self.mem.write(meta_addr, meta);
        self.moved(addr, data);
        if self.untimed {
            return t;
        }
        self.model.write(addr, (data.len() + meta.len()) as u64, t)
    }

    /// Write two pieces as one transfer (a line and its time stamp). When both are on memory.
    #[inline]
    pub fn write_pair(&mut self, a: u64, first: &[u8], b: u64, second: &[u8], t: Cycle) -> Cycle {
        self.mem.write(a, first);
        self.mem.write(b, second);
        self.moved(a, first);
        self.moved(b, second);
        if self.untimed {
            return t;
        }
        self.model.write_pair(a, first.len() as u64, b, second.len() as u64, t)
    }

    /// Write `lines[i][..n]` at each of `addrs`, all posted at `t`. When the last is on memory.
    #[inline]
    pub fn write_lines(&mut self, addrs: &[u64], lines: &[[u8; MAX_LINE]], n: usize, t: Cycle) -> Cycle {
        for (&a, l) in addrs.iter().zip(lines) {
            self.mem.write(a, &l[..n]);
            self.moved(a, &l[..n]);
        }
        if self.untimed {
            return t;
        }
        self.model.write_many(addrs, n as u64, t)
    }

    /// Give the lines of [0, `covered`) side bits in `store` (one entry per `line`-byte line).
    /// One scheme of a machine may keep side bits: a second is refused (their bits would share
    /// the lanes).
    pub fn attach_side(&mut self, store: PerLine, covered: u64, line: u64) -> Result<(), String> {
        if self.side.is_some() {
            return Err("another scheme of this machine already keeps its metadata in the ECC bits".into());
        }
        self.side = Some(Box::new(Side { store, covered, line: line as usize, last: u64::MAX, bytes: [0; MAX_LINE], arrived: None }));
        Ok(())
    }

    /// Remember the line a transfer moved, for its side bits.
    #[inline]
    fn moved(&mut self, addr: u64, bytes: &[u8]) {
        if let Some(s) = &mut self.side {
            if bytes.len() == s.line && addr < s.covered {
                s.last = addr;
                s.bytes[..s.line].copy_from_slice(bytes);
                s.arrived = None;
            }
        }
    }

    /// The bytes of the line at `addr` as they crossed the bus (ciphertext), if it is the line
    /// the port moved last: what a unit beside the memory controller computes its side bits on.
    pub fn moved_line(&self, addr: u64) -> Option<&[u8]> {
        self.side.as_ref().filter(|s| s.last == addr).map(|s| &s.bytes[..s.line])
    }

    /// When the line at `addr` was all on chip, if it is the line the port moved last and it
    /// was read on its own (`read`): when a unit beside the memory controller can start on
    /// its ciphertext.
    pub fn moved_line_arrived(&self, addr: u64) -> Option<Cycle> {
        self.side.as_ref().filter(|s| s.last == addr).and_then(|s| s.arrived)
    }

    /// The side bits of the line at `addr` into `out`, which arrived with it: only right after
    /// the port moved that line (false otherwise, nothing read).
    pub fn read_side(&mut self, addr: u64, out: &mut [u8]) -> bool {
        let Some(a) = self.side.as_ref().filter(|s| s.last == addr).map(|s| s.store.addr(addr)) else { return false };
        self.mem.read(a, out);
        true
    }

    /// Write the side bits of the line at `addr`, which go out with it: only right after the
    /// port moved that line (false otherwise, nothing written).
    pub fn write_side(&mut self, addr: u64, bits: &[u8]) -> bool {
        let Some(a) = self.side.as_ref().filter(|s| s.last == addr).map(|s| s.store.addr(addr)) else { return false };
        self.mem.write(a, bits);
        true
    }

    /// A host-side hint, no simulated effect: the line at `addr` will soon be read.
    #[inline]
    pub fn prefetch(&self, addr: u64) {
        self.mem.prefetch(addr);
    }

    /// Base addresses of pages ever written within [lo, hi), ascending: which lines exist to
    /// be re-encrypted or checked (what the memory controller's own bookkeeping would know).
    pub fn touched_pages(&self, lo: u64, hi: u64) -> Vec<u64> {
        self.mem.touched_pages(lo, hi)
    }

    pub fn size(&self) -> u64 {
        self.mem.size()
    }

    pub fn resident_bytes(&self) -> u64 {
        self.mem.resident_bytes()
    }

    pub fn beat(&self) -> Beat {
        self.model.beat()
    }

    /// Cycles from a request to its first beat on an idle memory.
    pub fn latency(&self) -> Cycle {
        self.model.latency()
    }

    pub fn free_at(&self) -> Cycle {
        self.model.free_at()
    }

    #[inline]
    pub fn counters(&self) -> &MemCounters {
        self.model.counters()
    }

    pub fn model(&self) -> &dyn MemoryModel {
        &*self.model
    }

    pub fn reset_stats(&mut self) {
        self.model.reset_stats()
    }

    /// The adversary's handle on raw memory (no time passes for the processor).
    pub fn untrusted(&mut self, _: Adversary) -> &mut UntrustedMemory {
        &mut self.mem
    }

    /// The adversary's read-only view.
    pub fn untrusted_ref(&self, _: &Adversary) -> &UntrustedMemory {
        &self.mem
    }
}

/// When each `chunk`-byte piece of transfer `tr` has fully arrived: beat k of the transfer
/// arrives at `first + k·beat` and a piece is usable once its last beat is in (seed 000 Fig. 7a:
/// "decryption is performed immediately after each 128-bit chunk is read").
#[inline]
pub fn chunk_arrivals(beat: Beat, tr: Transfer, chunk: u64, out: &mut [Cycle]) {
    for (i, a) in out.iter_mut().enumerate() {
        let k = ((i as u64 + 1) * chunk).div_ceil(beat.width) - 1;
        *a = (tr.first + k * beat.cycles).min(tr.last);
    }
}
