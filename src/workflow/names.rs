//! The names seed 002 turns into file names: a design's (`^[a-z0-9][a-z0-9_.-]{0,63}$`) and a
//! run's id (`^[a-f0-9]{6,32}$`). Anything else is refused, so no name can reach outside its
//! folder.

/// A design name: a lowercase letter or digit, then up to 63 of `a-z 0-9 _ . -`.
pub fn design_name_ok(name: &str) -> bool {
    let b = name.as_bytes();
    let first = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let rest = |c: &u8| first(c) || matches!(c, b'_' | b'.' | b'-');
    b.first().is_some_and(first) && b.len() <= 64 && b[1..].iter().all(rest)
}

/// A run id: 6 to 32 lowercase hex digits.
pub fn run_id_ok(id: &str) -> bool {
    (6..=32).contains(&id.len())
        && id
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("hello-world", true)]
    #[case("a", true)]
    #[case("0.release_v2", true)]
    #[case("", false)]
    #[case("-lead", false)]
    #[case(".hidden", false)]
    #[case("Upper", false)]
    #[case("../etc", false)]
    #[case("a/b", false)]
    #[case("a\\b", false)]
    #[case("é", false)]
    fn a_design_name_is_a_file_name_and_nothing_more(#[case] name: &str, #[case] ok: bool) {
        assert_eq!(design_name_ok(name), ok, "{name:?}");
    }

    #[test]
    fn a_design_name_is_at_most_64_characters() {
        assert!(design_name_ok(&"a".repeat(64)));
        assert!(!design_name_ok(&"a".repeat(65)));
    }

    #[rstest]
    #[case("d7b493cae249", true)]
    #[case("abcdef", true)]
    #[case("abcde", false)]
    #[case("D7B493CAE249", false)]
    #[case("d7b493cae24g", false)]
    #[case("../d7b493", false)]
    fn a_run_id_is_lowercase_hex(#[case] id: &str, #[case] ok: bool) {
        assert_eq!(run_id_ok(id), ok, "{id:?}");
        assert!(run_id_ok(&"a".repeat(32)) && !run_id_ok(&"a".repeat(33)));
    }
}
