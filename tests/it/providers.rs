//! The simulated providers' published contracts, read the way the harness reads them.

use aocheck::aoc::profile::{ProviderProfile, StatusClass};

#[test]
fn the_fake_payments_profile_is_a_complete_aoc_profile() {
    let (_app, handle) = fake_payments::router(fake_payments::Config::example()).expect("router");
    let (doc, digest) = handle.profile();
    let profile: ProviderProfile =
        serde_json::from_value(doc).expect("fake-payments publishes aocheck's profile schema");
    assert!(profile.validate().is_empty(), "{:?}", profile.validate());
    assert_eq!(
        profile.digest().expect("digest").to_string(),
        digest,
        "both sides compute the same RFC 8785 digest"
    );
    assert_eq!(profile.mapping["succeeded"].class, StatusClass::Success);
    assert!(profile.mapping["canceled"].proves_no_effect);
    assert!(!profile.mapping.contains_key("disputed"));
    assert!(
        profile
            .status_sources
            .iter()
            .all(|s| s.pin == handle.key_id())
    );
}
