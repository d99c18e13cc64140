//! Per-process gauges from Rust (format 2.6): readers combine them.

use tally::{Combine, Desc, Zone, ZoneOptions};

#[test]
fn a_reader_sees_the_combined_value() {
    let zone = Zone::create("rust_pgauge", &ZoneOptions::new()).unwrap();
    let g = zone
        .try_pgauge(&Desc::new("in_flight").help("Open."), Combine::LiveSum)
        .unwrap();
    g.add(1.0);
    g.add(1.0);
    let r = zone
        .try_pgauge(&Desc::new("last_set"), Combine::LiveMostRecent)
        .unwrap();
    r.set(4.5);
    let seg = tally::reader::Segment::open(zone.path().unwrap()).unwrap();
    let series = seg.series().unwrap();
    let v: Vec<_> = series.iter().map(|s| (s.name.as_str(), s.fvalue, s.labels.len())).collect();
    assert!(v.contains(&("in_flight", 2.0, 0)), "{v:?}");
    assert!(v.contains(&("last_set", 4.5, 0)), "{v:?}");
    assert!(zone.try_pgauge(&Desc::new("x").label("pid", "1"), Combine::Sum).is_err());
}
