//! The `engine_choices` corpus's seeds reach what they are named for: each builds an engine
//! with the choice its file name gives (`seed-INTEG-ENC-KEY-VALUE`), so the replay of the
//! corpus really runs sgx's nodes in the L2, the MACs in ECC bits and every organisation.

use std::path::Path;

use secmem_core::Engine;

#[test]
fn every_choice_seed_builds_the_machine_it_names() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/engine_choices");
    let mut seen = 0;
    let mut in_l2 = 0;
    for f in std::fs::read_dir(&dir).unwrap() {
        let path = f.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let Some(rest) = name.strip_prefix("seed-") else { continue };
        let parts: Vec<&str> = rest.splitn(3, '-').collect();
        let (integ, enc, choice) = (parts[0], parts[1], parts[2]);
        let data = std::fs::read(&path).unwrap();
        let (i, e, sets) = secmem_fuzz::engine::choice_machine(&data).unwrap_or_else(|| panic!("{name}: a pair that cannot be built"));
        assert_eq!((i, e), (integ, enc), "{name}");
        let (key, value) = choice.rsplit_once('-').map(|(k, v)| (k.to_string(), v.to_string())).unwrap();
        // Hash names contain '-' (md5-rfc1321): the key is the set line's part before '='.
        let line = sets.iter().find(|l| choice.starts_with(&format!("{}-", l.split('=').next().unwrap()))).unwrap();
        let (k, v) = line.split_once('=').unwrap();
        assert!(choice == format!("{k}-{v}"), "{name}: sets {sets:?} (wanted {key}={value})");
        in_l2 += sets.iter().any(|l| l == "sgx.meta=l2") as usize;
        let p = secmem_sim::configure("suh2003", Some(i), Some(e), &sets).unwrap_or_else(|err| panic!("{name}: {err}"));
        Engine::new(&p, 1).unwrap_or_else(|err| panic!("{name}: {err}"));
        seen += 1;
    }
    assert!(seen >= 20, "only {seen} seeds");
    assert!(in_l2 >= 8, "only {in_l2} seeds put sgx's nodes in the L2");
}
