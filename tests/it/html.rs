//! `report.html` as a person sees it (issue 24): a head that reads as prose, not JSON; what did
//! not pass, linked to its case; a matrix that fits a 1280-pixel window at 40 cases; and a
//! timeline per case drawn from its evidence, checked in a real headless browser (Debian's
//! Chromium; `.ci/run` installs it).

use aocheck::report::model::{CaseReport, Failure, Verdict};
use std::path::Path;
use std::process::Command;

/// Debian's Chromium. Absent, the test fails and says how to get it (`scripts/test` installs
/// it): a browser check that cannot run is never skipped.
fn chromium() -> &'static str {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    found.expect(
        "chromium is missing (this test opens report.html in a headless browser): run scripts/test, which installs Debian's chromium, or apt-get install chromium",
    )
}

/// A report of `n` cases in three families, one failed, one harness error.
fn report(n: usize) -> aocheck::report::model::Report {
    let families = ["AOC-CASE", "HERMES-VERIFY", "SEED003"];
    let cases: Vec<CaseReport> = (0..n)
        .map(|i| {
            let mut c = CaseReport::new(
                &format!("{}-{:02}", families[i % 3], i),
                "a case with a long title that says what it does",
                Path::new("cases/x.yaml"),
                (1..=13)
                    .filter(|r| (r + i) % 3 != 0)
                    .map(|r| format!("AOC-REQ-{r:03}"))
                    .collect(),
            );
            c.verdict = Verdict::Pass;
            c.steps = vec!["join: ok".into()];
            c
        })
        .collect();
    let mut r = crate::support::report_of(cases);
    r.cases[4].verdict = Verdict::Fail;
    r.cases[4].failures.push(Failure {
        requirement: aocheck::Req::R010,
        step: Some(0),
        msg: "[one_effect_per_occurrence] o1: 2 provider effects <b>bold</b>".into(),
    });
    r.cases[7].verdict = Verdict::HarnessError;
    r.cases[7].harness = Some("a declared fault never fired".into());
    r.implementation = serde_json::json!({"name": "acme-executor", "version": "2.1", "same_team": false, "command": "./acme --token [redacted]"});
    r
}

#[test]
fn the_head_reads_as_prose_and_lists_what_did_not_pass() {
    let page = aocheck::report::formats::html(&report(12));
    assert!(page.contains("<dd>acme-executor</dd>"), "{page}");
    assert!(!page.contains("{&quot;name&quot;"), "raw JSON in the head");
    assert!(!page.contains("{\"name\""), "raw JSON in the head");
    assert!(page.contains("<a href=\"#HERMES-VERIFY-04\"><strong>HERMES-VERIFY-04</strong></a>"));
    assert!(page.contains("one_effect_per_occurrence"));
    assert!(
        page.contains("&lt;b&gt;bold&lt;&#x2f;b&gt;") || page.contains("&lt;b&gt;bold&lt;/b&gt;")
    );
    assert!(
        !page.contains("<b>bold"),
        "markup from a failure got into the page"
    );
    assert!(page.contains("a declared fault never fired"));
    // Cases are rows grouped by family; requirements are 13 columns.
    assert!(page.contains("HERMES-VERIFY (4)"), "grouped by family");
    assert_eq!(page.matches("<th title=\"AOC-REQ-").count(), 13);
}

/// The browser half: the page of 40 cases fits 1280 pixels, and the sample run's page has an
/// SVG timeline per case. A screenshot is written next to the page (for a person to look at).
#[test]
fn the_page_fits_and_draws_timelines_in_a_real_browser() {
    let chromium = chromium();
    let dir = tempfile::tempdir().expect("tempdir");
    let probe = "<script>window.addEventListener('load',()=>{document.body.setAttribute('data-sw',document.documentElement.scrollWidth);document.body.setAttribute('data-svg',document.querySelectorAll('svg.timeline').length);document.body.setAttribute('data-svgw',Math.max(0,...Array.from(document.querySelectorAll('svg.timeline')).map(s=>s.getBoundingClientRect().width)));});</script></body>";
    let measure = |page: &str, name: &str| -> (u64, u64, f64) {
        let file = dir.path().join(name);
        std::fs::write(&file, page.replace("</body>", probe)).expect("write");
        let o = Command::new(chromium)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--window-size=1280,900",
                "--virtual-time-budget=3000",
                "--dump-dom",
            ])
            .arg(format!("file://{}", file.display()))
            .output()
            .expect("chromium runs");
        let dom = String::from_utf8_lossy(&o.stdout);
        let attr = |a: &str| -> f64 {
            dom.split(&format!("{a}=\""))
                .nth(1)
                .and_then(|s| s.split('"').next())
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| {
                    panic!("no {a} in the DOM: {}", String::from_utf8_lossy(&o.stderr))
                })
        };
        (
            attr("data-sw") as u64,
            attr("data-svg") as u64,
            attr("data-svgw"),
        )
    };
    let (width, _, _) = measure(&aocheck::report::formats::html(&report(40)), "forty.html");
    assert!(width <= 1280, "the page is {width} px wide at 40 cases");
    // The sample run: every case has evidence, so every case has a timeline that fits.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("reports")
        .join("examples");
    let page = std::fs::read_to_string(root.join("report.html")).expect("sample page");
    let cases = page.matches("<h2 id=\"").count() as u64;
    let (width, svgs, svg_width) = measure(&page, "sample.html");
    assert!(width <= 1280, "the sample page is {width} px wide");
    assert_eq!(svgs, cases, "a timeline per case");
    assert!(
        svg_width > 600.0 && svg_width <= 1280.0,
        "timelines are drawn ({svg_width} px)"
    );
}
