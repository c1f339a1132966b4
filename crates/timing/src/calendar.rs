//! A reservation calendar of equal time slots (bus cycles, engine issue cycles).
//!
//! The timing model presents operations in program order but with out-of-order times (a load
//! that issues late, a write-back that waits for a hash). A resource modelled as one "free
//! from" pointer makes an operation wanted early wait behind one booked for later, though the
//! resource was idle in between. A calendar lets each operation take the earliest free slots at
//! or after its own time.
//!
//! Searches are exact first fit. What keeps them cheap on a saturated resource, where every
//! request wants a slot far behind the end of the queue, is that bookings only ever take
//! slots: a stretch in which a search found no run of n free slots never gets one, so the
//! calendar remembers the last such stretch per run length and later searches starting
//! inside it start at its end.

/// Slots the calendar remembers; requests wanting a slot older than that take the oldest one
/// remembered.
const WINDOW: u64 = 1 << 20;
const WORDS: usize = (WINDOW / 64) as usize;
/// Known-full stretches remembered per run length. One is not enough: a burst of requests
/// all wanted at one time (a program's input written into memory at once) interleaves with
/// requests wanted later (their write-backs), and with one memo each later request made the
/// next early one search the whole booked stretch again (quadratic: 160 s for 60 k
/// instructions of mix under mhash).
const STRETCHES: usize = 4;

/// Slots [s, s + n) word by word: (index in `busy`, mask of the slots in that word, the
/// slot of its bit 0).
#[inline]
fn word_spans(s: u64, n: u64) -> impl Iterator<Item = (usize, u64, u64)> {
    let (mut k, end) = (s, s + n);
    std::iter::from_fn(move || {
        (k < end).then(|| {
            let i = k % WINDOW;
            let b = i % 64;
            let span = (64 - b).min(end - k);
            let mask = if span == 64 { u64::MAX } else { ((1u64 << span) - 1) << b };
            let first = k - b;
            k += span;
            ((i / 64) as usize, mask, first)
        })
    })
}

#[derive(Clone, Debug)]
pub struct Calendar {
    /// Slot of bit 0 of the window: slots [base, base + WINDOW) are tracked.
    base: u64,
    busy: Vec<u64>,
    /// Every slot in [base, dense) is booked: searches start here at the earliest.
    dense: u64,
    /// One past the last booked slot.
    end: u64,
    /// For runs of n ≤ 64 slots: up to `STRETCHES` disjoint (lo, hi) with no run of n free
    /// slots starting in [lo, hi).
    no_fit: [[(u64, u64); STRETCHES]; 65],
    /// Untimed (a sampled run's functional warming): every request gets the slots it wants,
    /// as on an idle resource, and nothing is booked.
    frozen: bool,
}

impl Default for Calendar {
    fn default() -> Self {
        Calendar::new()
    }
}

impl Calendar {
    pub fn new() -> Calendar {
        Calendar { base: 0, busy: vec![0; WORDS], dense: 0, end: 0, no_fit: [[(0, 0); STRETCHES]; 65], frozen: false }
    }

    /// One past the last booked slot.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Slide the window so that slot `last` is inside it, forgetting the oldest slots.
    fn advance(&mut self, last: u64) {
        if last < self.base + WINDOW {
            return;
        }
        // Slide by whole words: forget every word entirely below the new base.
        let new_base = (last + 1 - WINDOW / 2) / 64 * 64;
        if new_base - self.base >= WINDOW {
            self.busy.iter_mut().for_each(|w| *w = 0);
        } else {
            for w in self.base / 64..new_base / 64 {
                self.busy[(w % WORDS as u64) as usize] = 0;
            }
        }
        self.base = new_base;
        self.dense = self.dense.max(new_base);
    }

    /// First free slot in [s, limit), or `limit`.
    #[inline]
    fn first_free(&self, mut s: u64, limit: u64) -> u64 {
        while s < limit {
            let i = s % WINDOW;
            let b = i % 64;
            // Bits below `b` count as busy.
            let w = self.busy[(i / 64) as usize] | ((1u64 << b) - 1);
            if w != u64::MAX {
                return (s - b + w.trailing_ones() as u64).min(limit);
            }
            s += 64 - b;
        }
        limit
    }

    /// Whether slots [s, s + n) (n ≤ 64, inside the window) are all free.
    #[inline]
    fn run_free(&self, s: u64, n: u64) -> bool {
        let i = s % WINDOW;
        let (w, b) = ((i / 64) as usize, i % 64);
        let mut bits = self.busy[w] >> b;
        if b + n > 64 {
            bits |= self.busy[(w + 1) % WORDS] << (64 - b);
        }
        let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        bits & mask == 0
    }

    /// Mark slots [s, s + n) booked, a word at a time.
    #[inline]
    fn book(&mut self, s: u64, n: u64) {
        if n <= 64 {
            // At most two words (every engine booking and bus transfer): no loop.
            let i = s % WINDOW;
            let (w, b) = ((i / 64) as usize, i % 64);
            let ones = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            self.busy[w] |= ones << b;
            if b + n > 64 {
                self.busy[(w + 1) % WORDS] |= ones >> (64 - b);
            }
            return;
        }
        for (w, mask, _) in word_spans(s, n) {
            self.busy[w] |= mask;
        }
    }

    /// The first slot ≥ `s` starting a run of `n` ≤ 64 free slots: a run starts in one word
    /// and ends in it or the next, so two words at a time are enough.
    fn fit(&mut self, s: u64, n: u64) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has popcnt.
            return unsafe { self.fit_popcnt(s, n) };
        }
        self.fit_any(s, n)
    }

    /// `fit` compiled with the popcnt instruction: its filter counts the free slots of every
    /// word a search walks, and the baseline x86-64 target spells `count_ones` as a dozen
    /// instructions.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    unsafe fn fit_popcnt(&mut self, s: u64, n: u64) -> u64 {
        self.fit_any(s, n)
    }

    #[inline(always)]
    fn fit_any(&mut self, s: u64, n: u64) -> u64 {
        let mut w = s / 64 * 64;
        let mut floor = s % 64;
        loop {
            if w + 128 > self.base + WINDOW {
                self.advance(w + 128);
            }
            let word = self.busy[((w % WINDOW) / 64) as usize];
            let next = self.busy[(((w + 64) % WINDOW) / 64) as usize];
            // Too few free slots in reach for a run of n: skip without the run search.
            if ((!word) >> floor).count_ones() + (!next).count_ones() >= n as u32 {
                if let Some(r) = self.run_in(w, floor, n) {
                    return r;
                }
            }
            w += 64;
            floor = 0;
        }
    }

    /// A run of `n` ≤ 64 free slots starting in word `w` at or after bit `floor` (it may
    /// continue into the next word).
    #[inline]
    fn run_in(&self, w: u64, floor: u64, n: u64) -> Option<u64> {
        let word = self.busy[((w % WINDOW) / 64) as usize];
        let next = self.busy[(((w + 64) % WINDOW) / 64) as usize];
        let free = !((word as u128) | ((next as u128) << 64));
        // Bit i of `x` set: slots i..i+n are all free (starts in this word only).
        // Runs of `len` free slots doubled towards n: runs of len and step ≤ len overlapping
        // make a run of len + step (log n shifts of the u128, not n − 1).
        let (mut x, mut len) = (free, 1);
        while len < n {
            let step = len.min(n - len);
            x &= x >> step;
            len += step;
        }
        x &= (u64::MAX << floor) as u128;
        let x = x as u64;
        (x != 0).then(|| w + x.trailing_zeros() as u64)
    }

    /// The last booked slot in [s, s + n), if any.
    #[inline]
    fn last_busy(&self, s: u64, n: u64) -> Option<u64> {
        let mut last = None;
        for (w, mask, first) in word_spans(s, n) {
            let hit = self.busy[w] & mask;
            if hit != 0 {
                last = Some(first + 63 - hit.leading_zeros() as u64);
            }
        }
        last
    }

    /// The first slot ≥ `s` starting `n` > 64 free slots (long engine operations).
    fn fit_long(&mut self, mut s: u64, n: u64) -> u64 {
        // Sliding the window for a longer run would forget slots the run starts on.
        assert!(n <= WINDOW / 2, "a booking of {} slots exceeds half the calendar's window", n);
        loop {
            if s + n > self.base + WINDOW {
                self.advance(s + n);
            }
            s = self.first_free(s, self.base + WINDOW);
            if s + n > self.base + WINDOW {
                continue;
            }
            match self.last_busy(s, n) {
                None => return s,
                Some(b) => s = b + 1,
            }
        }
    }

    /// Start of a search for n free slots from `s`, past the stretches known to hold none.
    #[inline]
    fn skip_known(&self, mut s: u64, n: u64) -> u64 {
        let set = &self.no_fit[n as usize];
        // Stretches are disjoint: each pass either moves past one or ends the search.
        for _ in 0..STRETCHES {
            match set.iter().find(|&&(lo, hi)| lo <= s && s < hi) {
                Some(&(_, hi)) => s = hi,
                None => break,
            }
        }
        s
    }

    /// No run of n free slots starts in [s, r).
    #[inline]
    fn learn(&mut self, s: u64, r: u64, n: u64) {
        let set = &mut self.no_fit[n as usize];
        let (mut lo, mut hi) = (s, r);
        // Merge every stretch that touches [lo, hi] into it, then keep it in place of a
        // merged one or, failing that, of the shortest: a long stretch saves the most search
        // (the one a burst wanted at one time builds), while requests near the end of the
        // bookings leave many short ones. Stretches below `dense` are never consulted.
        let mut free = None;
        for k in 0..STRETCHES {
            let (a, b) = set[k];
            if a < b && a <= hi && lo <= b {
                (lo, hi) = (lo.min(a), hi.max(b));
                set[k] = (0, 0);
                free = Some(k);
            }
        }
        let dense = self.dense;
        let k = free.unwrap_or_else(|| (0..STRETCHES).min_by_key(|&k| if set[k].1 <= dense { 0 } else { set[k].1 - set[k].0 }).unwrap());
        if hi - lo >= set[k].1.saturating_sub(set[k].0) || set[k].1 <= dense || free.is_some() {
            set[k] = (lo, hi);
        }
    }

    /// Where a search for slots wanted from `from` starts: not before the window nor inside
    /// the booked stretch at its start.
    #[inline]
    fn start(&self, from: u64) -> u64 {
        from.max(self.base).max(self.dense)
    }

    /// The first slot ≥ `s` (a search start) beginning a run of `n` ≤ 64 free slots.
    #[inline]
    fn first_fit(&mut self, s: u64, n: u64) -> u64 {
        if s + n <= self.base + WINDOW && self.run_free(s, n) {
            // Most engine bookings and many bus ones find their wanted slots free.
            s
        } else {
            self.fit(self.skip_known(s, n), n)
        }
    }

    /// Slots up to `end` were just booked, the lowest at `lowest`.
    #[inline]
    fn booked(&mut self, lowest: u64, end: u64) {
        self.end = self.end.max(end);
        if lowest <= self.dense {
            self.dense = self.first_free(self.dense, self.base + WINDOW);
        }
    }

    /// Stop (`true`) or resume booking: while frozen every request is answered as on an
    /// idle resource and the bookings made before stay as they were.
    pub fn freeze(&mut self, on: bool) {
        self.frozen = on;
    }

    pub fn frozen(&self) -> bool {
        self.frozen
    }

    /// Book the earliest `n` consecutive free slots at or after slot `from`.
    #[inline]
    pub fn reserve(&mut self, from: u64, n: u64) -> u64 {
        if self.frozen {
            return from;
        }
        let s = self.start(from);
        let r = if n > 64 {
            self.fit_long(s, n)
        } else {
            let r = self.first_fit(s, n);
            if r != s {
                // Once [r, r + n) is booked no run of n starts in it either (each would hold
                // slot r + n − 1): the next search from here, e.g. the next read of a path
                // requested at the same time, starts right after this one.
                self.learn(s, r + n, n);
            }
            r
        };
        self.book(r, n);
        self.booked(r, r + n);
        r
    }

    /// The slot `reserve(from, n)` would book, without booking it: a resource that needs
    /// slots on two calendars at a fixed distance (a DRAM bank and its data bus) searches both
    /// before it books either.
    pub fn find(&mut self, from: u64, n: u64) -> u64 {
        if self.frozen {
            return from;
        }
        let s = self.start(from);
        if n > 64 {
            return self.fit_long(s, n);
        }
        let r = self.first_fit(s, n);
        if r != s {
            self.learn(s, r, n);
        }
        r
    }

    /// Book slots [s, s + n), which must be free (as `find` just answered).
    pub fn take(&mut self, s: u64, n: u64) {
        if self.frozen {
            return;
        }
        debug_assert!(s >= self.base && s + n <= self.base + WINDOW && self.last_busy(s, n).is_none());
        self.book(s, n);
        self.booked(s, s + n);
    }

    /// Book `k` runs of `n` slots as `k` calls of `reserve(from, n)` would, calling `f` with
    /// the start of each in order, in one search: once a run is booked at r, the next first
    /// fit from `from` is the first fit from r + n (nothing fit before r, and every run
    /// starting inside [r, r + n) holds slot r + n − 1). naive reads its whole path at once.
    pub fn reserve_many(&mut self, from: u64, n: u64, k: usize, mut f: impl FnMut(u64)) {
        if self.frozen {
            (0..k as u64).for_each(|j| f(from + j * n));
            return;
        }
        if n > 64 || k == 0 {
            (0..k).for_each(|_| f(self.reserve(from, n)));
            return;
        }
        let first = self.start(from);
        let (mut s, mut lowest) = (first, first);
        for j in 0..k {
            let r = self.first_fit(s, n);
            self.book(r, n);
            if j == 0 {
                lowest = r; // the runs ascend
            }
            f(r);
            s = r + n;
        }
        self.learn(first, s, n);
        self.booked(lowest, s);
    }

    /// Book a run of `n` slots wanted from each of `froms`, as one `reserve` each in order
    /// would, calling `f` with each start. Requests in ascending order (a path's checks, in
    /// the order its chunks arrive) search less: a later one's first fit is at or after the
    /// end of the run booked for the one before, so its search starts there.
    pub fn reserve_in_order(&mut self, froms: impl IntoIterator<Item = u64>, n: u64, mut f: impl FnMut(u64)) {
        let (mut last_from, mut floor) = (0, 0);
        for from in froms {
            if from < last_from {
                floor = 0;
            }
            let r = self.reserve(from.max(floor), n);
            f(r);
            (last_from, floor) = (from, r + n);
        }
    }

    /// Book the first `n` free slots at or after slot `from`, wherever they are (a posted
    /// write's beats drain one by one into idle cycles); returns the last one. One pass over
    /// the words instead of `n` searches from `from`: naive's path write-backs book ~100
    /// single beats per eviction.
    pub fn reserve_each(&mut self, from: u64, n: u64) -> u64 {
        if n == 0 {
            return from;
        }
        if self.frozen {
            return from + n - 1;
        }
        let first = self.start(from);
        let (mut s, mut left, mut last) = (self.skip_known(first, 1), n, first);
        while left > 0 {
            let b = s % 64;
            if s - b + 64 > self.base + WINDOW {
                self.advance(s - b + 64);
            }
            let wi = ((s % WINDOW) / 64) as usize;
            let mut free = !self.busy[wi] & (u64::MAX << b);
            while free != 0 && left > 0 {
                let k = free.trailing_zeros() as u64;
                free &= free - 1;
                self.busy[wi] |= 1 << k;
                last = s - b + k;
                left -= 1;
            }
            s += 64 - b;
        }
        // Every slot from `first` to `last` is booked now.
        self.learn(first, last + 1, 1);
        self.booked(first, last + 1);
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift;

    #[test]
    fn gaps_are_found_across_word_boundaries() {
        let mut c = Calendar::new();
        assert_eq!(c.reserve(0, 60), 0);
        assert_eq!(c.reserve(70, 130), 70);
        assert_eq!(c.reserve(15, 8), 60, "fits in the gap 60..70");
        assert_eq!(c.reserve(15, 8), 200, "the next one goes after the busy run");
    }

    #[test]
    fn a_far_future_booking_does_not_push_later_requests_after_it() {
        let mut c = Calendar::new();
        c.reserve(500_000, 4);
        for k in 0..1000u64 {
            assert_eq!(c.reserve(k * 10, 4), k * 10);
        }
    }

    #[test]
    fn a_fragmented_stretch_is_searched_exactly_to_the_first_fit() {
        let mut c = Calendar::new();
        for k in 0..3000u64 {
            c.reserve(k * 2, 1); // one-slot holes: nothing of 8 fits
        }
        c.reserve(900_000, 1);
        assert_eq!(c.reserve(0, 8), 5999);
    }

    #[test]
    fn repeated_searches_from_a_long_fragmented_stretch_start_at_its_end() {
        let mut c = Calendar::new();
        for k in 0..200_000u64 {
            c.reserve(k * 2, 1);
        }
        for i in 0..10_000 {
            assert_eq!(c.reserve(0, 8), 399_999 + 8 * i, "no 8-slot gap before the last hole");
        }
        // A single slot still goes into the first hole.
        assert_eq!(c.reserve(0, 1), 1);
    }

    /// The slot-by-slot reference: the first run of `n` free slots from `from`, now booked.
    fn book_first_fit(slots: &mut [bool], from: u64, n: u64) -> u64 {
        let at = (from..).find(|&s| slots[s as usize..(s + n) as usize].iter().all(|b| !b)).unwrap();
        slots[at as usize..(at + n) as usize].iter_mut().for_each(|b| *b = true);
        at
    }

    #[test]
    fn every_booking_takes_the_first_fit_like_a_slot_by_slot_search() {
        let mut rnd = xorshift(0x2545_f491_4f6c_dd1d);
        let mut c = Calendar::new();
        let mut slots = vec![false; 400_000];
        for i in 0..20_000u64 {
            // Wanted times drift forward with jitter, as the timing model presents them.
            let from = (i * 12).saturating_sub(rnd(3000));
            // Short runs, runs of up to a whole word at any offset, long runs.
            let n = match rnd(50) {
                0 => 65 + rnd(100),
                1 => 50 + rnd(15),
                _ => 1 + rnd(12),
            };
            if rnd(4) == 0 {
                let mut left = n;
                let mut last = from;
                for s in from.. {
                    if left == 0 {
                        break;
                    }
                    if !slots[s as usize] {
                        slots[s as usize] = true;
                        last = s;
                        left -= 1;
                    }
                }
                assert_eq!(c.reserve_each(from, n), last, "booking {} ({} scattered from {})", i, n, from);
            } else {
                let want = book_first_fit(&mut slots, from, n);
                assert_eq!(c.reserve(from, n), want, "booking {} ({} from {})", i, n, from);
            }
        }
    }

    #[test]
    fn a_burst_wanted_at_once_between_later_requests_takes_the_first_fits() {
        // A program's input written at one time (every request from slot 100) interleaved with
        // its write-backs wanted later and of other lengths: the remembered full stretches
        // of both must only ever skip slots where nothing fits.
        let mut rnd = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut c = Calendar::new();
        let mut slots = vec![false; 300_000];
        for i in 0..12_000u64 {
            let (from, n) = match rnd(3) {
                0 => (100, 8),
                1 => (100 + i * 9 + rnd(500), 8),
                _ => (100 + i * 7, 1 + rnd(4)),
            };
            let want = book_first_fit(&mut slots, from, n);
            assert_eq!(c.reserve(from, n), want, "booking {} ({} from {})", i, n, from);
        }
    }

    #[test]
    fn a_batch_of_runs_takes_the_slots_of_as_many_single_bookings() {
        let mut rnd = xorshift(0x1234_5678_9abc_def1);
        let (mut a, mut b) = (Calendar::new(), Calendar::new());
        for i in 0..20_000u64 {
            // Fragment both alike, then book a path's worth of runs wanted at one time.
            let from = (i * 40).saturating_sub(rnd(5000));
            let len = 1 + rnd(12);
            assert_eq!(a.reserve(from, len), b.reserve(from, len));
            let (k, n) = (1 + rnd(14) as usize, if rnd(30) == 0 { 65 + rnd(40) } else { 1 + rnd(16) });
            let singles: Vec<u64> = (0..k).map(|_| a.reserve(from, n)).collect();
            let mut batch = Vec::new();
            b.reserve_many(from, n, k, |r| batch.push(r));
            assert_eq!(singles, batch, "batch {} of {} runs of {} from {}", i, k, n, from);
        }
        assert_eq!(a.end(), b.end());
    }

    #[test]
    fn requests_booked_in_order_take_the_slots_of_single_bookings() {
        let mut rnd = xorshift(0x0bad_cafe_f00d_1234);
        let (mut a, mut b) = (Calendar::new(), Calendar::new());
        for i in 0..20_000u64 {
            let base = (i * 40).saturating_sub(rnd(5000));
            let len = 1 + rnd(12);
            assert_eq!(a.reserve(base, len), b.reserve(base, len));
            // Mostly ascending wanted times, sometimes one out of order.
            let mut t = base;
            let froms: Vec<u64> = (0..1 + rnd(14))
                .map(|_| {
                    t += rnd(30);
                    if rnd(8) == 0 { t.saturating_sub(rnd(200)) } else { t }
                })
                .collect();
            let n = 1 + rnd(8);
            let singles: Vec<u64> = froms.iter().map(|&f| a.reserve(f, n)).collect();
            let mut batch = Vec::new();
            b.reserve_in_order(froms.iter().copied(), n, |r| batch.push(r));
            assert_eq!(singles, batch, "requests {} from {:?}", i, froms);
        }
    }

    #[test]
    fn searches_survive_the_window_sliding() {
        let mut c = Calendar::new();
        for k in 0..3u64 {
            c.reserve(k * WINDOW, 64 * 20);
        }
        let s = c.reserve(3 * WINDOW - 100, 8);
        assert!(s >= 3 * WINDOW - 100);
        assert_eq!(c.reserve(3 * WINDOW + 10_000, 8), 3 * WINDOW + 10_000);
    }

    #[test]
    fn scattered_booking_takes_the_first_free_slots_like_single_bookings() {
        // Random fragmentation within reach of the exact search: n single bookings and one
        // scattered booking of n take the same slots.
        let mut rnd = xorshift(0x9e37_79b9_7f4a_7c15);
        let (mut a, mut b) = (Calendar::new(), Calendar::new());
        for _ in 0..5000 {
            let (from, n) = (rnd(4000) + a.end().saturating_sub(3000), 1 + rnd(12));
            if rnd(2) == 0 {
                let len = 1 + rnd(9);
                assert_eq!(a.reserve(from, len), b.reserve(from, len));
            } else {
                let mut last = 0;
                for _ in 0..n {
                    last = a.reserve(from, 1);
                }
                assert_eq!(b.reserve_each(from, n), last);
            }
            assert_eq!(a.end(), b.end());
        }
        assert_eq!(a.busy, b.busy);
    }

    #[test]
    fn an_empty_scattered_booking_books_nothing() {
        let mut c = Calendar::new();
        c.reserve_each(500, 0);
        assert_eq!(c.end(), 0);
        assert_eq!(c.reserve(500, 1), 500);
    }

    #[test]
    #[should_panic(expected = "exceeds half the calendar's window")]
    fn a_booking_longer_than_half_the_window_is_refused() {
        Calendar::new().reserve(0, WINDOW / 2 + 1);
    }

    #[test]
    fn scattered_booking_crosses_the_window_edge() {
        let mut c = Calendar::new();
        c.reserve(WINDOW - 10, 5);
        let last = c.reserve_each(WINDOW - 12, 40);
        assert_eq!(last, WINDOW - 12 + 40 + 5 - 1, "5 slots were taken already");
        assert_eq!(c.reserve(WINDOW - 12, 1), last + 1);
    }

    #[test]
    fn find_then_take_books_what_reserve_books() {
        let mut rnd = xorshift(0x5851_f42d_4c95_7f2d);
        let (mut a, mut b) = (Calendar::new(), Calendar::new());
        for i in 0..20_000u64 {
            let from = (i * 20).saturating_sub(rnd(3000));
            let n = if rnd(40) == 0 { 65 + rnd(60) } else { 1 + rnd(12) };
            let s = b.find(from, n);
            // A search that is not followed by its booking changes nothing.
            if rnd(3) == 0 {
                assert_eq!(b.find(from, n), s);
            }
            b.take(s, n);
            assert_eq!(a.reserve(from, n), s, "booking {} ({} from {})", i, n, from);
            assert_eq!(a.end(), b.end());
        }
        assert_eq!(a.busy, b.busy);
    }

    #[test]
    fn a_late_presented_early_request_fills_the_earlier_gap() {
        let mut c = Calendar::new();
        assert_eq!(c.reserve(1000, 4), 1000);
        assert_eq!(c.reserve(10, 4), 10);
        assert_eq!(c.reserve(998, 4), 1004);
    }
}
