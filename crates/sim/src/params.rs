//! The core model's parameters, declared like the schemes' (see `secmem_core::decl`): the
//! out-of-order core, its L1s and TLBs, and the run loop's sampling.

use secmem_core::decl::{param, Component, Def, Kind};

pub const CORE: &[Component] = &[
    Component {
        name: "core",
        kind: Kind::Machine,
        summary: "the out-of-order core (a dependence-driven window model)",
        source: "000/003 Table 1; SimpleScalar defaults where the tables are silent",
        params: &[
            param("core.clock", Def::Preset, "Hz", "processor clock (cycles are its cycles)"),
            param("core.fetch_width", Def::Preset, "instructions/cycle", "fetched per cycle"),
            param("core.issue_width", Def::Preset, "instructions/cycle", "issued per cycle (at most 255)"),
            param("core.commit_width", Def::Preset, "instructions/cycle", "committed per cycle"),
            param("core.rob_size", Def::Preset, "entries", "reorder buffer (SimpleScalar's register update unit)"),
            param("core.lsq_size", Def::Preset, "entries", "load/store queue"),
            param("core.branch_predictor_bits", Def::Preset, "bits", "gshare history and table index (at most 24)"),
            param("core.mispredict_penalty", Def::Preset, "cycles", "front-end refill after a mispredicted branch"),
            param("core.mul_latency", Def::Preset, "cycles", "integer multiply"),
            param("core.div_latency", Def::Preset, "cycles", "integer divide"),
            param("core.fp_latency", Def::Preset, "cycles", "floating-point add/multiply"),
            param("core.fpdiv_latency", Def::Preset, "cycles", "floating-point divide"),
        ],
    },
    Component {
        name: "l1i",
        kind: Kind::Machine,
        summary: "the L1 instruction cache (inside the L2: inclusion)",
        source: "000/003 Table 1",
        params: &[
            param("l1i.size", Def::Preset, "B", "capacity"),
            param("l1i.ways", Def::Preset, "ways", "associativity (LRU)"),
            param("l1i.line", Def::Preset, "B", "line (at most the L2's)"),
            param("l1i.latency", Def::Preset, "cycles", "hit latency"),
        ],
    },
    Component {
        name: "l1d",
        kind: Kind::Machine,
        summary: "the L1 data cache (inside the L2: inclusion)",
        source: "000/003 Table 1",
        params: &[
            param("l1d.size", Def::Preset, "B", "capacity"),
            param("l1d.ways", Def::Preset, "ways", "associativity (LRU)"),
            param("l1d.line", Def::Preset, "B", "line (at most the L2's)"),
            param("l1d.latency", Def::Preset, "cycles", "hit latency"),
        ],
    },
    Component {
        name: "tlb",
        kind: Kind::Machine,
        summary: "the instruction and data TLBs (one geometry for both)",
        source: "000/003 Table 1",
        params: &[
            param("tlb.entries", Def::Preset, "entries", "translations held"),
            param("tlb.ways", Def::Preset, "ways", "associativity"),
            param("tlb.page", Def::Preset, "B", "page size"),
            param("tlb.miss_latency", Def::Preset, "cycles", "fixed cost of a miss"),
        ],
    },
    Component {
        name: "sample",
        kind: Kind::Machine,
        summary: "series sampled during a run",
        source: "002 Fig. 4",
        params: &[param("sample.ipc_period", Def::Int(0), "cycles", "cycles per IPC sample (the series sample.ipc); 0: off")],
    },
];
