//! secmem-core: untrusted memory, the adversary's view of it, and the protection schemes,
//! each performing real cryptography on real bytes through the timed resources of
//! `secmem-timing`.

pub mod adversary;
pub mod cache;
pub mod codeauth;
pub mod decl;
pub mod encryption;
pub mod engine;
pub mod error;
pub mod integrity;
pub mod keyid;
pub mod layout;
pub mod machine;
pub mod mem;
pub mod params;
pub mod port;
pub mod power;
pub mod registry;
pub mod speculation;
pub mod stats;
pub mod wordbuf;

pub use engine::{AccessKind, Engine, Outcome};
pub use error::{Failure, IntegrityError};
pub use mem::{Snapshot, UntrustedMemory};
pub use params::{ConfigError, Params};
pub use stats::{Stat, Stats};

#[cfg(test)]
mod testutil;
#[cfg(test)]
mod security_tests;
#[cfg(test)]
mod tests;
