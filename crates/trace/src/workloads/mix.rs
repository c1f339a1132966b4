//! `mix`: stream, chase and hot in turn (the default workload).
//!
//! Each phase runs one program for a fixed number of instructions, then the next resumes
//! where it left off: three programs with their own state, code and address regions, as a
//! multiprogrammed machine switching between them. All three are loaded before the first
//! instruction: their external (loader) records come first, as a standalone workload's do,
//! so warm-up follows them instead of a 16 MiB heap being copied in at the start of the
//! first chase phase, in the middle of a measurement.

use super::*;
use crate::record::Instr;

/// Instructions per phase of the default `mix`.
pub const DEFAULT_PHASE: u64 = 2_000_000;

/// The `mix` workload.
pub struct Mix {
    stream: Stream,
    chase: Chase,
    hot: Hot,
    /// 0 stream, 1 chase, 2 hot.
    phase: usize,
    /// Programs whose initial image is fully out (they are loaded in phase order).
    loaded: usize,
    left: u64,
    phase_len: u64,
}

impl Mix {
    pub fn new(seed: u64) -> Mix {
        Mix::with_phase(seed, DEFAULT_PHASE)
    }

    /// A mix with `phase_len` instructions per phase (at least 1).
    pub fn with_phase(seed: u64, phase_len: u64) -> Mix {
        let phase_len = phase_len.max(1);
        Mix {
            stream: Stream::new(seed),
            chase: Chase::new(seed),
            hot: Hot::new(seed),
            phase: 0,
            loaded: 0,
            left: phase_len,
            phase_len,
        }
    }

    /// Name of the program the next instruction comes from.
    pub fn current(&self) -> &'static str {
        ["stream", "chase", "hot"][self.phase]
    }
}

impl TraceSource for Mix {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        while self.loaded < 3 {
            let more = match self.loaded {
                0 => self.stream.load(out),
                1 => self.chase.load(out),
                _ => self.hot.load(out),
            };
            if more {
                return Ok(true);
            }
            self.loaded += 1;
        }
        if self.left == 0 {
            self.phase = (self.phase + 1) % 3;
            self.left = self.phase_len;
        }
        let timed = match self.phase {
            0 => self.stream.step(out),
            1 => self.chase.step(out),
            _ => self.hot.step(out),
        };
        self.left -= timed as u64;
        Ok(true)
    }

    fn name(&self) -> &str {
        "mix"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::testutil::*;

    fn program_of(pc: u64) -> usize {
        match pc {
            _ if (stream::TEXT..stream::TEXT + 0x1000).contains(&pc) => 0,
            _ if (chase::TEXT..chase::TEXT + 0x1000).contains(&pc) => 1,
            _ if (hot::TEXT..hot::TEXT + 0x1000).contains(&pc) => 2,
            _ => panic!("pc {pc:#x} outside every program"),
        }
    }

    /// Which program a data address belongs to: the regions must not overlap.
    fn region_of(a: u64) -> usize {
        match a {
            _ if (stream::A_BASE..stream::C_BASE + 8 * stream::N as u64).contains(&a) => 0,
            _ if (chase::HEAP..chase::HEAP + 64 * chase::NODES as u64).contains(&a) => 1,
            _ if (hot::WINDOW..hot::DATA_END).contains(&a) || a == hot::RET_SLOT => 2,
            _ => panic!("address {a:#x} outside every program"),
        }
    }

    #[test]
    fn phases_visit_every_program_for_the_phase_length() {
        let phase = 50_000;
        let mut m = Mix::with_phase(9, phase);
        let mut r = Instr::default();
        let mut runs: Vec<(usize, u64)> = Vec::new();
        let mut timed = 0;
        while timed < 7 * phase {
            m.next_into(&mut r).unwrap();
            if r.external {
                continue;
            }
            timed += 1;
            let p = program_of(r.pc);
            for a in &r.accesses {
                assert_eq!(
                    region_of(a.addr),
                    p,
                    "pc {:#x} accessed {:#x}",
                    r.pc,
                    a.addr
                );
            }
            match runs.last_mut() {
                Some((q, n)) if *q == p => *n += 1,
                _ => runs.push((p, 1)),
            }
        }
        let order: Vec<usize> = runs.iter().map(|r| r.0).collect();
        assert_eq!(order, [0, 1, 2, 0, 1, 2, 0]);
        assert!(runs.iter().all(|r| r.1 == phase), "{runs:?}");
    }

    #[test]
    fn programs_keep_their_state_and_values_across_switches() {
        // Short phases: many switches, each program resumed mid-loop several times.
        let sh = replay(
            &mut Mix::with_phase(3, 300_000),
            4096 + 3072 + 128 + 3_000_000,
        );
        assert_eq!(sh.externals, 4096 + 3072 + 128);
        assert_eq!(sh.instrs, 3_000_000);
    }

    #[test]
    fn default_mix_is_deterministic_and_values_consistent() {
        let x = take(&mut Mix::new(11), 100_000);
        assert_eq!(x, take(&mut Mix::new(11), 100_000));
        // The default phases: stream, then chase from 2 M instructions on.
        let sh = replay(&mut Mix::new(11), 3072 + 4096 + 128 + 2_500_000);
        assert_eq!(sh.externals, 3072 + 4096 + 128);
        assert_eq!(sh.instrs, 2_500_000);
    }

    #[test]
    fn every_program_is_loaded_before_the_first_instruction() {
        let mut m = Mix::with_phase(5, 1000);
        let mut r = Instr::default();
        let mut pages = 0;
        loop {
            m.next_into(&mut r).unwrap();
            if !r.external {
                break;
            }
            pages += 1;
        }
        assert_eq!(pages, 3072 + 4096 + 128, "stream, chase and hot images, then instructions");
        for _ in 0..10_000 {
            m.next_into(&mut r).unwrap();
            assert!(!r.external, "no loader record after the first instruction");
        }
    }
}
