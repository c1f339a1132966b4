//! No encryption: lines cross the bus as plaintext.

use super::Encryption;
use crate::integrity::chash::MAX_LINE;
use crate::machine::Machine;
use crate::stats::Stats;
use secmem_timing::Cycle;

pub struct NoEncryption;

impl Encryption for NoEncryption {
    fn name(&self) -> &'static str {
        "none"
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Cycle {
        let tr = m.bus.read(t, out.len() as u64);
        m.mem.read(addr, out);
        tr.last
    }

    fn read_lines(&mut self, m: &mut Machine, addrs: &[u64], t: Cycle, out: &mut [[u8; MAX_LINE]], n: usize, arrive: &mut Vec<Cycle>) {
        m.bus.read_many(t, n as u64, addrs.len(), |tr| arrive.push(tr.last));
        for (&a, buf) in addrs.iter().zip(out) {
            m.mem.read(a, &mut buf[..n]);
        }
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Cycle {
        m.mem.write(addr, plain);
        m.bus.write(t, plain.len() as u64)
    }

    fn write_lines(&mut self, m: &mut Machine, addrs: &[u64], lines: &[[u8; MAX_LINE]], n: usize, t: Cycle) -> Cycle {
        for (&a, l) in addrs.iter().zip(lines) {
            m.mem.write(a, &l[..n]);
        }
        m.bus.write_many(t, n as u64, addrs.len())
    }

    fn space_overhead(&self) -> f64 {
        0.0
    }

    fn stats(&self, _m: &Machine, _out: &mut Stats) {}
}
