//! Power management of non-volatile main memory (seed 002): suspend, resume and reboot of the
//! whole engine, a power failure in the middle of a block's re-encryption, DMA through a
//! second MECU, and what the offline adversary sees. The work is the MECU's
//! (`encryption::mecu`); this module drives the engine around it: caches are written back
//! before a suspend or an orderly reboot and are lost, unwritten, when the power fails.

use crate::cache::LineKind;
use crate::encryption::{OfflineView, PowerEvent, PowerManaged};
use crate::engine::Engine;
use crate::error::IntegrityError;
use crate::machine::Victim;
use secmem_timing::Cycle;


/// A power-management request that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PowerError {
    /// Writing the caches back found memory tampered with.
    #[error("{0}")]
    Integrity(#[from] IntegrityError),
    /// The request makes no sense now or for this scheme.
    #[error("{0}")]
    Refused(String),
}

fn refused(e: String) -> PowerError {
    PowerError::Refused(e)
}

impl Engine {
    fn mecu_mut(&mut self) -> Result<&mut dyn PowerManaged, PowerError> {
        let name = self.enc.name();
        self.enc.power_managed().ok_or_else(|| {
            refused(format!(
                "encryption scheme '{}' has no suspend/resume/reboot: only mecu protects non-volatile memory across power cycles",
                name
            ))
        })
    }

    fn mecu_running(&mut self) -> Result<bool, PowerError> {
        Ok(self.mecu_mut()?.is_running())
    }

    /// Suspend: the caches are written back (memory is non-volatile, the caches are not),
    /// then the key device is removed. Memory and the MECU are the adversary's until `resume`.
    pub fn suspend(&mut self) -> Result<(), PowerError> {
        if !self.mecu_running()? {
            return Err(refused("the system is not running".into()));
        }
        self.flush(0)?;
        self.mecu_mut()?.event(PowerEvent::Suspend).map_err(refused)?;
        Ok(())
    }

    /// Resume: the key device is back and a new resume cycle begins (s + 1).
    pub fn resume(&mut self) -> Result<(), PowerError> {
        self.mecu_mut()?.event(PowerEvent::Resume).map_err(refused)?;
        Ok(())
    }

    /// Reboot: a new OS instance with a new key; the old instance's memory stays where it is,
    /// now unreadable. A running system writes its caches back first (an orderly reboot); one
    /// that lost its power has nothing left in them.
    pub fn reboot(&mut self) -> Result<(), PowerError> {
        let mecu = self.mecu_mut()?;
        let (running, lost) = (mecu.is_running(), mecu.power_lost());
        if running {
            self.flush(0)?;
        } else if lost {
            self.discard_caches();
        }
        self.mecu_mut()?.event(PowerEvent::Reboot).map_err(refused)?;
        Ok(())
    }

    /// Cut the power at `step` of the next block re-encryption; returns the number of steps a
    /// block's re-encryption has (see `Mecu::reencryption_steps`).
    pub fn arm_power_cut(&mut self, step: u64) -> Result<u64, PowerError> {
        Ok(self.mecu_mut()?.arm_power_cut(step))
    }

    /// Whether the power has failed (and not been restored).
    pub fn power_lost(&mut self) -> bool {
        self.enc.power_managed().is_some_and(|m| m.power_lost())
    }

    /// Power is back after a failure: whatever the caches held is gone; the system resumes.
    pub fn restore_power(&mut self) -> Result<(), PowerError> {
        self.mecu_mut()?;
        self.discard_caches();
        self.mecu_mut()?.restore_power().map_err(refused)
    }

    /// Drop every cached line without writing it back (the caches lost their power).
    fn discard_caches(&mut self) {
        while let Some(v) = self.m.pop_victim() {
            self.m.recycle(v);
        }
        for s in self.m.l2.valid_slots() {
            self.m.l2.invalidate(s);
        }
        self.enc.drop_cached();
        self.integ.drop_cached();
    }

    /// What the adversary reads from the MECU while the system is suspended or off.
    pub fn mecu_offline_view(&mut self) -> Result<OfflineView, PowerError> {
        self.mecu_mut()?.offline_view().map_err(refused)
    }

    /// The offline adversary sets the global state counter (a rollback, 002 §4.3).
    pub fn mecu_set_state_counter(&mut self, s: u32) -> Result<(), PowerError> {
        self.mecu_mut()?.set_state_counter(s).map_err(refused)
    }

    /// Make DMA coherent with the L2: lines of [addr, addr+n) are written back if dirty, and
    /// dropped if the device is about to overwrite them.
    fn dma_coherence(&mut self, addr: u64, n: u64, drop: bool) -> Result<(), PowerError> {
        if self.integ.name() != "none" {
            return Err(refused(format!(
                "DMA through the second MECU writes memory behind integrity scheme '{}' (002 §6.3 leaves integrity aside; 000 §5.3 copies DMA data in through the processor): use integrity none",
                self.integ.name()
            )));
        }
        let line = self.line;
        let mut a = addr & !(line - 1);
        while a < addr + n {
            if let Some(slot) = self.m.l2.tags.find(a) {
                if self.m.l2.is_dirty(slot) {
                    let v = Victim { addr: a, bytes: self.m.l2.bytes(slot).to_vec(), dirty: true, kind: LineKind::Data, t: 0 };
                    self.integ.evict(&mut self.m, &mut *self.enc, &v)?;
                    let slot = self.m.l2.tags.find(a).expect("still cached");
                    if drop {
                        self.m.l2.invalidate(slot);
                    } else {
                        // Clean now: memory holds the same bytes.
                        let bytes = self.m.l2.bytes(slot).to_vec();
                        let ready = self.m.l2.ready(slot);
                        self.m.l2.fill(slot, a, &bytes, LineKind::Data, false, ready);
                    }
                } else if drop {
                    self.m.l2.invalidate(slot);
                }
            }
            a += line;
        }
        self.settle()?;
        Ok(())
    }

    fn dma_range(&self, addr: u64, n: u64) -> Result<(), PowerError> {
        match addr.checked_add(n) {
            Some(e) if e <= self.data_size => Ok(()),
            _ => Err(refused(format!("DMA range 0x{:x}+{} is outside the {} protected bytes", addr, n, self.data_size))),
        }
    }

    /// A device writes `data` at `addr` by DMA, through the second MECU (002 §6.3).
    pub fn dma_write(&mut self, addr: u64, data: &[u8], t: Cycle) -> Result<Cycle, PowerError> {
        self.mecu_mut()?;
        self.dma_range(addr, data.len() as u64)?;
        self.dma_coherence(addr, data.len() as u64, true)?;
        let m = &mut self.m;
        self.enc.power_managed().expect("mecu").dma_write(m, addr, data, t).map_err(refused)
    }

    /// A device reads `out.len()` bytes at `addr` by DMA, through the second MECU.
    pub fn dma_read(&mut self, addr: u64, out: &mut [u8], t: Cycle) -> Result<Cycle, PowerError> {
        self.mecu_mut()?;
        self.dma_range(addr, out.len() as u64)?;
        self.dma_coherence(addr, out.len() as u64, false)?;
        let m = &mut self.m;
        self.enc.power_managed().expect("mecu").dma_read(m, addr, out, t).map_err(refused)
    }
}
