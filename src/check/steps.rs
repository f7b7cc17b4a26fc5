//! The oracles a step's answer is read by, beside the checkers that run after every step: what
//! one creation, race, claim or AADP expiry answered, against what the case already knows. Each
//! returns a [`Finding`] or nothing; the World records what it returns and never judges itself.

use super::{Facts, Finding};
use crate::aoc::ids::OccurrenceId;
use crate::aoc::requirement::Req;
use crate::check::evidence::Report;

/// creation_returns_original (AOC-REQ-002): "creation retries … MUST return the original
/// occurrence", and caller labels alone (retry, task, grant, AADP, BCR ids) never create one.
/// `first` is the occurrence the same case label or creation key returned before.
pub fn creation_identity(
    key: &str,
    first: Option<&OccurrenceId>,
    got: &OccurrenceId,
    facts: &mut Facts,
) -> Option<Finding> {
    if first.is_some() {
        facts.saw(Req::R002);
    }
    another_occurrence("creation_returns_original", first, got, |first| {
        format!(
            "a creation under the creation key {key:?} of {first} minted {got} (caller labels alone never create an occurrence)"
        )
    })
}

/// action_fence (AOC-REQ-002): "at-most-one policies need a durable action fence": under the
/// case's fence, one occurrence per action (refusing the second creation is as good, and is the
/// implementation's answer, not judged here). `first` is the occurrence the action was created as.
pub fn action_fence(
    action: &str,
    first: Option<&OccurrenceId>,
    got: &OccurrenceId,
    facts: &mut Facts,
) -> Option<Finding> {
    facts.saw(Req::R002);
    another_occurrence("action_fence", first, got, |first| {
        format!(
            "the action fence let a second occurrence {got} be created for action {action:?} (the first is {first})"
        )
    })
}

/// An AOC-REQ-002 finding when a creation returned another occurrence than the `first` one.
fn another_occurrence(
    checker: &'static str,
    first: Option<&OccurrenceId>,
    got: &OccurrenceId,
    facts: impl FnOnce(&OccurrenceId) -> String,
) -> Option<Finding> {
    let first = first?;
    (first != got).then(|| Finding::new(checker, Req::R002, facts(first)))
}

/// race_serialised (AOC-REQ-001): "exactly one authoritative coordination domain … serializes …
/// provider-entry admission" (AOC §4.1): after `n` racing admissions of one occurrence, whatever
/// the order, its history records at most one provider entry (`entered`) and the provider
/// received at most one request for it (`requests`, from the ledger; a replayed one counts).
pub fn race_serialised(
    label: &str,
    n: u32,
    entered: usize,
    requests: usize,
    facts: &mut Facts,
) -> Option<Finding> {
    facts.saw(Req::R001);
    (entered > 1 || requests > 1).then(|| {
        Finding::new(
            "race_serialised",
            Req::R001,
            format!(
                "{n} racing admissions: its history records {entered} provider entries and the provider received {requests} requests for it; one coordination domain serialises admission to at most one (AOC §4.1)"
            ),
        )
        .about(Some(label))
    })
}

/// claim_in_order (AOC-REQ-005): the lane hands out the admission the case submitted next
/// (`want`); claiming another (`got`, by its label) is a finding whatever the step expected.
/// Claiming nothing is the implementation's refusal to hand out work, not judged here.
/// An answer whose history does not fold or does not verify (its chain broken, an entry the
/// draft does not allow after the one before): AOC-REQ-004, since the history no longer shows
/// every prior entry as written. `during` names the step or phase; the failure's requirement
/// and message.
pub fn corrupt_history(during: &str, why: &str) -> (Req, String) {
    (Req::R004, format!("{during}: {why}"))
}

/// A refusal the case expected, and got, is a fact about the requirement it protects (the
/// step's own, or the case's first).
pub fn refusal_met(facts: &mut Facts, protects: Req) {
    facts.saw(protects);
}

/// A step that failed examined the requirement it failed: a failure is never "not exercised".
pub fn step_failed(facts: &mut Facts, requirement: Req) {
    facts.saw(requirement);
}

/// A claim answer examined (AOC-REQ-005): every admission a claim hands out is compared with
/// the one the lane must hand out next ([`claim_in_order`]), and a claim of nothing is the
/// implementation's own refusal, judged as the step expected it.
pub fn claim_answered(facts: &mut Facts) {
    facts.saw(Req::R005);
}

pub fn claim_in_order(want: &str, got: &str) -> Option<Finding> {
    (want != got).then(|| {
        Finding::new(
            "claim_in_order",
            Req::R005,
            format!("claimed {got:?} instead of {want:?}"),
        )
    })
}

/// rebind_refused (AOC-REQ-003): a bound occurrence's binding never changes, so a request to
/// change one of its fields is never accepted (whether the implementation then changed it, which
/// `binding_constant` sees, or only said it did). `bound`: the field is bound (every field from
/// the reservation on, the provider reference from the provider's acknowledgement).
pub fn rebind_refused(
    label: &str,
    field: &str,
    bound: bool,
    accepted: bool,
    facts: &mut Facts,
) -> Option<Finding> {
    facts.saw(Req::R003);
    (bound && accepted).then(|| {
        Finding::new(
            "rebind_refused",
            Req::R003,
            format!("a change of the bound field {field} was accepted"),
        )
        .about(Some(label))
    })
}

/// remedy_authorized_separately (AOC-REQ-012): "any adjustment, replacement attempt,
/// compensation or new allocation needs separate native authorisation": a remedy accepted under
/// the original occurrence's own grant is a finding.
pub fn remedy_authorization(
    label: &str,
    grant: Option<&str>,
    authorization: &str,
    facts: &mut Facts,
) -> Option<Finding> {
    facts.saw(Req::R012);
    (grant == Some(authorization)).then(|| {
        Finding::new(
            "remedy_authorized_separately",
            Req::R012,
            format!(
                "a remedy was accepted under the original's own grant {authorization:?}, not a separate authorization"
            ),
        )
        .about(Some(label))
    })
}

/// aadp_expiry_inert (AOC §5, AOC-REQ-008/-010): AADP expiry changes nothing of an entered or
/// released occurrence's report (see [`super::evidence::aadp_expiry_change`]).
pub fn aadp_expiry(label: &str, before: &Report, after: &Report) -> Option<Finding> {
    super::evidence::aadp_expiry_change(before, after).map(|(req, what)| {
        Finding::new(
            "aadp_expiry_inert",
            req,
            format!("AADP expiry changed the AOC occurrence: {what} (AOC §5)"),
        )
        .about(Some(label))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::bound_accepted(true, true, true)]
    #[case::bound_refused(true, false, false)]
    #[case::unbound_accepted(false, true, false)]
    fn a_bound_field_is_never_rebound(
        #[case] bound: bool,
        #[case] accepted: bool,
        #[case] found: bool,
    ) {
        let mut facts = Facts::default();
        let f = rebind_refused("o1", "account", bound, accepted, &mut facts);
        assert_eq!(facts.count(Req::R003), 1);
        assert_eq!(f.is_some(), found);
        if let Some(f) = f {
            assert_eq!(
                (f.checker(), f.requirement()),
                ("rebind_refused", Req::R003)
            );
        }
    }

    #[rstest]
    #[case::own_grant(Some("grant-1"), "grant-1", true)]
    #[case::separate(Some("grant-1"), "refund-authorization-1", false)]
    #[case::no_grant(None, "grant-1", false)]
    fn a_remedy_needs_its_own_authorization(
        #[case] grant: Option<&str>,
        #[case] authorization: &str,
        #[case] found: bool,
    ) {
        let mut facts = Facts::default();
        let f = remedy_authorization("o1", grant, authorization, &mut facts);
        assert_eq!(facts.count(Req::R012), 1);
        assert_eq!(f.is_some(), found);
        if let Some(f) = f {
            assert_eq!(
                (f.checker(), f.requirement()),
                ("remedy_authorized_separately", Req::R012)
            );
        }
    }

    fn id(s: &str) -> OccurrenceId {
        OccurrenceId::from_stored(s)
    }

    #[rstest]
    #[case::first_creation(None, "o1", false)]
    #[case::same_again(Some("o1"), "o1", false)]
    #[case::minted_anew(Some("o1"), "o2", true)]
    fn a_creation_returns_the_original(
        #[case] first: Option<&str>,
        #[case] got: &str,
        #[case] found: bool,
    ) {
        let first = first.map(id);
        let mut facts = Facts::default();
        let f = creation_identity("k", first.as_ref(), &id(got), &mut facts);
        assert_eq!(facts.count(Req::R002), u32::from(first.is_some()));
        assert_eq!(f.is_some(), found);
        let mut facts = Facts::default();
        let f = action_fence("a", first.as_ref(), &id(got), &mut facts);
        assert_eq!(facts.count(Req::R002), 1);
        assert_eq!(f.map(|f| f.requirement()), found.then_some(Req::R002));
    }

    #[rstest]
    #[case::one_each(1, 1, false)]
    #[case::none(0, 0, false)]
    #[case::two_entries(2, 1, true)]
    #[case::two_requests(1, 2, true)]
    fn a_race_admits_at_most_one(
        #[case] entered: usize,
        #[case] requests: usize,
        #[case] found: bool,
    ) {
        let mut facts = Facts::default();
        let f = race_serialised("o1", 2, entered, requests, &mut facts);
        assert_eq!(facts.count(Req::R001), 1);
        assert_eq!(
            f.map(|f| (f.checker(), f.requirement())),
            found.then_some(("race_serialised", Req::R001))
        );
    }

    #[test]
    fn a_claim_of_another_admission_is_a_finding() {
        assert!(claim_in_order("s1", "s1").is_none());
        let f = claim_in_order("s1", "s2").expect("out of order");
        assert_eq!(
            (f.requirement(), f.checker()),
            (Req::R005, "claim_in_order")
        );
    }
}
