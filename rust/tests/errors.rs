//! Bad input gives Err (or, for the non-try constructors, a handle that
//! discards), never a panic: bad names, labels, units, help, strings with
//! NUL, strings over their limits, changed definitions (taken), wrong label
//! counts of families.

use tally::{Desc, Zone, ZoneOptions};

const EINVAL: i32 = 22;
const E2BIG: i32 = 7;

fn zone(tag: &str) -> Zone {
    Zone::create(&format!("errors_{tag}"), &ZoneOptions::new().anonymous()).unwrap()
}

#[test]
fn bad_zone_names() {
    for name in ["", ".hidden", "a/b", "sp ace", "nul\0x", &"x".repeat(64)] {
        let e = Zone::create(name, &ZoneOptions::new().anonymous()).unwrap_err();
        assert_eq!(e.errno(), EINVAL, "{name:?}: {e}");
        assert!(!e.message().is_empty());
    }
    // Anonymous and shared together is refused.
    let e = Zone::create("both", &ZoneOptions::new().anonymous().shared()).unwrap_err();
    assert_eq!(e.errno(), EINVAL, "{e}");
}

#[test]
fn bad_series_give_err_and_discarding_handles() {
    let z = zone("series");
    let cases: Vec<(Desc, i32)> = vec![
        (Desc::new(""), EINVAL),
        (Desc::new("1starts_with_digit"), EINVAL),
        (Desc::new("has-dash"), EINVAL),
        (Desc::new("nul\0inside"), EINVAL),
        (Desc::new("ok").label("bad-label", "v"), EINVAL),
        (Desc::new("ok").label("__reserved", "v"), EINVAL),
        (Desc::new("ok").label("k", "v").label("k", "w"), EINVAL),
        (Desc::new("ok").label("k", "nul\0"), EINVAL),
        (Desc::new("ok").unit("not a unit"), EINVAL),
        (Desc::new("x".repeat(200)), E2BIG),
        (Desc::new("ok").help("h".repeat(2000)), E2BIG),
        (Desc::new("ok").label("k", "v".repeat(5000)), E2BIG),
    ];
    for (d, errno) in &cases {
        let e = z.try_counter(d).unwrap_err();
        assert_eq!(e.errno(), *errno, "{d:?}: {e}");
        let c = z.counter(d);
        assert!(c.is_discarding());
        c.increment(5); // goes nowhere, and does not crash
        assert_eq!(c.value(), 0);
        let g = z.gauge(d);
        g.add(-3);
        let h = z.histogram(d);
        h.observe(1 << 50);
        assert_eq!(h.count(), 0);
        let f = z.fgauge(d);
        f.add(1.0);
        assert!(z.try_set_gauge(d).is_err());
    }
    // Bad histogram layouts.
    assert_eq!(
        z.try_histogram(&Desc::new("h").buckets(9, 40))
            .unwrap_err()
            .errno(),
        EINVAL
    );
    assert_eq!(
        z.try_histogram(&Desc::new("h").buckets(3, 64))
            .unwrap_err()
            .errno(),
        EINVAL
    );
}

#[test]
fn changed_definitions_are_taken() {
    // A definition that changes (a new version of a program on the zone
    // an old one left) is never refused: another help text is the same
    // series, another kind a new generation of the name.
    let z = zone("conflict");
    let c = z
        .try_counter(&Desc::new("thing").help("One help."))
        .unwrap();
    c.increment(1);
    let other_help = z
        .try_counter(&Desc::new("thing").help("Another help."))
        .unwrap();
    other_help.increment(1);
    assert_eq!(c.value(), 2);
    let g = z.try_gauge(&Desc::new("thing").help("One help.")).unwrap();
    g.add(5);
    assert_eq!(g.value(), 5);
    // The first handle goes on counting its own series.
    c.increment(1);
    assert_eq!(c.value(), 3);
    // Back to the counter: its generation, with its count.
    let again = z
        .try_counter(&Desc::new("thing").help("One help."))
        .unwrap();
    again.increment(1);
    assert_eq!(c.value(), 4);
    // Dropping one registration keeps the series for the other.
    drop(again);
    c.increment(1);
    assert_eq!(c.value(), 5);
}

#[test]
fn bad_family_requests() {
    let z = zone("family");
    assert_eq!(
        z.try_counter_family(&Desc::new("f"), &[])
            .unwrap_err()
            .errno(),
        EINVAL
    );
    assert_eq!(
        z.try_counter_family(&Desc::new("f"), &["a", "a"])
            .unwrap_err()
            .errno(),
        EINVAL
    );
    assert_eq!(
        z.try_counter_family(&Desc::new("f"), &["nul\0"])
            .unwrap_err()
            .errno(),
        EINVAL
    );
    assert_eq!(
        z.try_counter_family(&Desc::new("bad name"), &["a"])
            .unwrap_err()
            .errno(),
        EINVAL
    );
    let bad = z.counter_family(&Desc::new("bad name"), &["a"]);
    assert!(bad.get(&["x"]).is_err());
    bad.with_labels(&["x"]).increment(1);

    let f = z
        .try_counter_family(&Desc::new("fam_total"), &["a", "b"])
        .unwrap();
    assert_eq!(f.get(&["only one"]).unwrap_err().errno(), EINVAL);
    assert_eq!(f.get(&["1", "2", "3"]).unwrap_err().errno(), EINVAL);
    assert_eq!(f.get(&["nul\0", "2"]).unwrap_err().errno(), EINVAL);
    assert_eq!(f.get(&["1", &"v".repeat(5000)]).unwrap_err().errno(), E2BIG);
    // Many values (more than the stack buffer holds) take the heap path.
    let many: Vec<String> = (b'a'..=b'q').map(|c| (c as char).to_string()).collect();
    let names: Vec<&str> = many.iter().map(String::as_str).collect();
    let wide = z
        .try_counter_family(&Desc::new("wide_total"), &names)
        .unwrap();
    let values: Vec<&str> = (0..17).map(|_| "v").collect();
    wide.get(&values).unwrap().increment(4);
    assert_eq!(wide.get(&values).unwrap().value(), 4);
    let d = f.with_labels(&["only one"]);
    assert!(d.is_discarding());
    d.increment(1);
    let ok = f.get(&["1", "2"]).unwrap();
    ok.increment(2);
    let owned = f.get_owned(&["1", "2"]).unwrap();
    drop(f);
    // The owned child keeps the family (and its series) alive.
    owned.increment(1);
    assert_eq!(owned.value(), 3);
}
