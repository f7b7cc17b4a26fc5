//! Nothing secret in any output (AOC §7 and §10, issue 24): every credential the harness makes or
//! is given (control tokens, provider keys and clock tokens issued to implementation processes, a
//! store URL's password, tokens in the `--sut` command, values named by `--redact`) is registered
//! here, and everything the harness writes (reports in every format, progress lines, the
//! implementation's captured stderr, the evidence folder) passes through [`scrub`] on its way out.
//!
//! Two layers: where a secret's place is known (a URL's password, a command's `TOKEN=…`), it is
//! removed at the source ([`redact_store_url`], [`redact_command`]); everything written is also
//! scrubbed of every registered value, because the implementation may echo a key it was given in
//! a refusal message that lands in a report.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// What a removed secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Shorter values are not registered: scrubbing a two-letter "secret" would mangle every report.
pub const MIN_LEN: usize = 6;

/// The registered secrets and the matchers built from them. A process can register tens of
/// thousands (every schedule of an exploration, every run of a test process mints tokens), so
/// the matchers are kept in levels, like a binary counter: secrets registered since the last
/// search form a new level, and the level before it is merged in while it is at most twice as
/// large. Each secret is compiled into a matcher O(log n) times over the life of the process
/// (rebuilding one matcher over every secret at each registration made a test process spend most
/// of its time compiling automata, under this lock). One search runs every level, at most about
/// log2(n) of them.
struct Registry {
    secrets: BTreeSet<String>,
    /// Registered and in no level yet.
    pending: Vec<String>,
    levels: Vec<Level>,
}

/// One matcher over the patterns of some secrets (each raw and, where it differs, JSON-escaped).
struct Level {
    patterns: Vec<String>,
    matcher: std::sync::Arc<aho_corasick::AhoCorasick>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    secrets: BTreeSet::new(),
    pending: Vec::new(),
    levels: Vec::new(),
});

/// Registers a secret value: from now on it is scrubbed from everything this process writes.
pub fn register(secret: &str) {
    let s = secret.trim();
    if s.chars().count() < MIN_LEN {
        return;
    }
    #[cfg(feature = "test-knobs")]
    dump_for_tests(s);
    if let Ok(mut r) = REGISTRY.lock()
        && r.secrets.insert(s.to_string())
    {
        r.pending.push(s.to_string());
    }
}

/// The test build writes every registered secret to `$AOCHECK_DUMP_SECRETS` so a test can scan a
/// run's outputs for each of them (never in a release build).
#[cfg(feature = "test-knobs")]
fn dump_for_tests(s: &str) {
    use std::io::Write as _;
    if let Some(path) = std::env::var_os("AOCHECK_DUMP_SECRETS")
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(f, "{s}");
    }
}

/// A secret's patterns: itself and, where it differs, its JSON-escaped form.
fn patterns_of(s: &str, into: &mut Vec<String>) {
    into.push(s.to_string());
    if let Ok(e) = serde_json::to_string(s) {
        let inner = e.trim_matches('"');
        if inner != s {
            into.push(inner.to_string());
        }
    }
}

fn level(patterns: Vec<String>) -> Option<Level> {
    // Standard semantics, searched for overlapping matches: every stretch of text that any
    // secret covers is found, whatever level each secret is in.
    let matcher = aho_corasick::AhoCorasick::new(&patterns).ok()?;
    Some(Level {
        patterns,
        matcher: std::sync::Arc::new(matcher),
    })
}

/// The matchers over every registered secret (empty: nothing registered).
fn matchers() -> Vec<std::sync::Arc<aho_corasick::AhoCorasick>> {
    let Ok(mut r) = REGISTRY.lock() else {
        return Vec::new();
    };
    if !r.pending.is_empty() {
        let mut patterns = Vec::with_capacity(r.pending.len() * 2);
        for s in std::mem::take(&mut r.pending) {
            patterns_of(&s, &mut patterns);
        }
        // Each level is kept more than twice the size of the next, so the levels stay at most
        // one per bit of the pattern count however the registrations are batched.
        while let Some(last) = r.levels.last()
            && last.patterns.len() <= 2 * patterns.len()
        {
            if let Some(mut merged) = r.levels.pop() {
                merged.patterns.append(&mut patterns);
                patterns = merged.patterns;
            }
        }
        match level(patterns) {
            Some(l) => r.levels.push(l),
            // A matcher that cannot be built (never seen: patterns are short text) must not
            // lose its secrets: they are tried again at the next search.
            None => {
                let again: Vec<String> = r.secrets.iter().cloned().collect();
                r.levels.clear();
                r.pending = again;
                return Vec::new();
            }
        }
    }
    r.levels.iter().map(|l| l.matcher.clone()).collect()
}

/// Every stretch of `text` that a registered secret covers, overlapping ones joined, in order.
fn covered(text: &[u8]) -> Vec<(usize, usize)> {
    let mut spans: Vec<(usize, usize)> = matchers()
        .iter()
        .flat_map(|m| {
            m.find_overlapping_iter(text)
                .map(|x| (x.start(), x.end()))
                .collect::<Vec<_>>()
        })
        .collect();
    spans.sort_unstable();
    let mut joined: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (a, b) in spans {
        match joined.last_mut() {
            Some(last) if a < last.1 => last.1 = last.1.max(b),
            _ => joined.push((a, b)),
        }
    }
    joined
}

/// `text` with every stretch a registered secret (or its JSON-escaped form) covers replaced by
/// [`REDACTED`]; where two secrets overlap, their whole union is one [`REDACTED`].
pub fn scrub(text: &str) -> String {
    let spans = covered(text.as_bytes());
    if spans.is_empty() {
        return text.to_string();
    }
    let b = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(text.len());
    let mut copied = 0;
    for (a, z) in spans {
        out.extend_from_slice(&b[copied..a]);
        out.extend_from_slice(REDACTED.as_bytes());
        copied = z;
    }
    out.extend_from_slice(&b[copied..]);
    // Patterns are whole UTF-8 strings, so every span starts and ends on a character boundary.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Bytes scrubbed as text where they are UTF-8 (lossy otherwise: a log is for reading).
pub fn scrub_bytes(bytes: &[u8]) -> Vec<u8> {
    scrub(&String::from_utf8_lossy(bytes)).into_bytes()
}

/// A value of `T` scrubbed through its JSON text (a report before it is written anywhere): one
/// pass over the whole text per secret, in its JSON-escaped form, rather than one per string. A
/// value that does not round-trip is returned as it was, with the error.
pub fn scrubbed<T: serde::Serialize + serde::de::DeserializeOwned>(x: T) -> Result<T, (T, String)> {
    let text = match json_text(&x) {
        Ok(t) => t,
        Err(e) => return Err((x, e)),
    };
    serde_json::from_str(&text).map_err(|e| (x, e.to_string()))
}

/// `x` as compact JSON text with every registered secret removed from its string *values* (see
/// [`scrubbed`]); member names are the report's own vocabulary and are left alone, so a
/// credential that happens to be a word like `verdict` cannot break the report's shape.
pub fn json_text<T: serde::Serialize + ?Sized>(x: &T) -> Result<String, String> {
    let text = serde_json::to_string(x).map_err(|e| e.to_string())?;
    Ok(scrub_json_values(&text))
}

/// JSON text with every registered secret removed from its string values (member names
/// untouched), as [`json_text`] writes it.
pub fn scrub_json_text(text: &str) -> String {
    scrub_json_values(text)
}

/// Scrubs the string values of compact or pretty JSON text, one pass, member names untouched.
fn scrub_json_values(text: &str) -> String {
    if !holds_secret(text.as_bytes()) {
        return text.to_string();
    }
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if b[i] != b'"' {
            i += 1;
            continue;
        }
        // A string token from i to its closing quote.
        let start = i + 1;
        let mut j = start;
        while j < b.len() && b[j] != b'"' {
            j += if b[j] == b'\\' { 2 } else { 1 };
        }
        let end = j.min(b.len());
        let mut k = end + 1;
        while k < b.len() && b[k].is_ascii_whitespace() {
            k += 1;
        }
        let is_key = k < b.len() && b[k] == b':';
        if !is_key {
            out.push_str(&text[copied..start]);
            out.push_str(&scrub(&text[start..end]));
            copied = end;
        }
        i = end + 1;
    }
    out.push_str(&text[copied..]);
    out
}

/// Whether these bytes hold any registered secret (raw or JSON-escaped).
pub fn holds_secret(bytes: &[u8]) -> bool {
    matchers().iter().any(|m| m.is_match(bytes))
}

/// A connection string's password removed (URL userinfo, `?password=` and `password=` in the
/// key/value form), the password registered. What is left still says where the store is.
pub fn redact_store_url(url: &str) -> String {
    let mut out = url.to_string();
    // postgresql://user:password@host/...
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let rest = &out[rest_start..];
        let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..auth_end].rfind('@')
            && let Some(colon) = rest[..at].find(':')
        {
            let password = rest[colon + 1..at].to_string();
            register_password(&password);
            register_password(&percent_decoded(&password));
            out = format!(
                "{}{}:{REDACTED}{}",
                &out[..rest_start],
                &rest[..colon],
                &rest[at..]
            );
        }
    }
    // password=… as a query parameter or a key/value pair (also sslpassword).
    let lower = out.to_ascii_lowercase();
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find("password=") {
        let start = from + i + "password=".len();
        let end = out[start..]
            .find(['&', ' ', '\t'])
            .map_or(out.len(), |e| start + e);
        cut.push((start, end));
        from = end.max(start);
        if from >= out.len() {
            break;
        }
    }
    for (start, end) in cut.into_iter().rev() {
        let value = out[start..end].trim_matches('\'').to_string();
        register_password(&value);
        register_password(&percent_decoded(&value));
        out.replace_range(start..end, REDACTED);
    }
    out
}

/// The longest password [`register_password`] takes for a plain word; a longer one, even of
/// letters only (a passphrase), is scrubbed everywhere.
const PLAIN_WORD_MAX: usize = 12;

/// A store password registered for scrubbing. A password that is a plain word (lowercase ASCII
/// letters, at most [`PLAIN_WORD_MAX`], such as `postgres`, the default of many setups) is also a word of the report's own
/// text: the store's kind, a verdict, a field value. Replacing every occurrence of it would make
/// the report unreadable (`store.kind: [redacted]`, every reproduce command broken), and a word
/// standing alone in free text says nothing about the password anyway. So such a password is
/// scrubbed where it stands as a password (`user:word@`, `password=word`), it is removed from
/// the URL at the source as every password is, and the user is told once that it is weak (D75).
fn register_password(password: &str) {
    let p = password.trim();
    if p.is_empty() {
        return;
    }
    if p.len() <= PLAIN_WORD_MAX && p.chars().all(|c| c.is_ascii_lowercase()) {
        register(&format!(":{p}@"));
        register(&format!("password={p}"));
        static TOLD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !TOLD.swap(true, std::sync::atomic::Ordering::Relaxed) {
            eprintln!(
                "note: --store: the password is a plain word; it is removed from the URL and from `user:password@` and `password=` forms, but not from the report's own words (a strong password is removed everywhere)"
            );
        }
    } else {
        register(p);
    }
}

fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(h) = std::str::from_utf8(&b[i + 1..i + 3])
            && let Ok(x) = u8::from_str_radix(h, 16)
        {
            out.push(x);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a name (an environment variable or an option) is one credentials go in.
fn secret_name(name: &str) -> bool {
    let n = name.trim_start_matches('-').to_ascii_lowercase();
    [
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "apikey",
        "api-key",
        "api_key",
        "key",
        "auth",
        "credential",
        "bearer",
    ]
    .iter()
    .any(|w| {
        n == *w
            || n.ends_with(&format!("_{w}"))
            || n.ends_with(&format!("-{w}"))
            || n.starts_with(&format!("{w}_"))
            || n.starts_with(&format!("{w}-"))
            || n.contains(&format!("_{w}_"))
            || n.contains(&format!("-{w}-"))
            || (w.len() > 4 && n.contains(w))
    })
}

/// A `--sut` command with its credentials removed and registered: the values of `NAME=value`
/// words and of `--name value` / `--name=value` options whose name says credential (token, secret,
/// password, key, auth…), and URL passwords. Values given with `--redact` are registered by the
/// caller and scrubbed here too.
pub fn redact_command(command: &str) -> String {
    // An unbalanced quote (`O'Brien`) reads as words cut at spaces, as before quotes were read.
    let words = shell_words(command).unwrap_or_else(|| command.split(' ').collect());
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut next_is_secret = false;
    for w in words {
        if next_is_secret && !w.is_empty() {
            register(&unquoted(w));
            out.push(REDACTED.into());
            next_is_secret = false;
            continue;
        }
        // A quoted command inside (`sh -c "env TOKEN=… impl"`): redacted the same way, and
        // shown redacted inside its quotes (a secret too short to register is removed too).
        if let Some(q) = w.chars().next().filter(|c| *c == '\'' || *c == '"')
            && w.len() >= 2
            && w.ends_with(q)
            && !w[1..w.len() - 1].contains(q)
            && w.contains(' ')
        {
            out.push(format!("{q}{}{q}", redact_command(&w[1..w.len() - 1])));
            continue;
        }
        if w.contains(['\'', '"']) {
            let inner = unquoted(w);
            if inner.contains(' ') {
                let _ = redact_command(&inner);
            }
        }
        if let Some((name, value)) = w.split_once('=') {
            let bare = name.trim_start_matches('-');
            if !bare.is_empty()
                && bare
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                && secret_name(bare)
            {
                register(&unquoted(value));
                out.push(format!("{name}={REDACTED}"));
                continue;
            }
        }
        if w.starts_with("--") && w.len() > 2 && !w.contains('=') && secret_name(w) {
            next_is_secret = true;
            out.push(w.to_string());
            continue;
        }
        if w.contains("://") {
            out.push(redact_store_url(w));
            continue;
        }
        out.push(w.to_string());
    }
    scrub(&out.join(" "))
}

/// A command line cut at its unquoted spaces, each word as written (quotes kept): a value quoted
/// with spaces in it (`API_TOKEN='a b c'`) is one word. `None` when a quote is never closed.
fn shell_words(command: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in command.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => escaped = true,
            (Some('"'), '"') => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, ' ') => {
                out.push(&command[start..i]);
                start = i + 1;
            }
            (None, _) => {}
        }
    }
    out.push(&command[start..]);
    quote.is_none().then_some(out)
}

/// A shell word's value: its quotes removed (`'a b'c` is `a bc`), backslash escapes outside
/// single quotes taken literally.
fn unquoted(word: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut chars = word.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some('\''), _) => out.push(c),
            (_, '\\') => out.extend(chars.next()),
            (None, '\'' | '"') => quote = Some(c),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// A short secret inside a quoted command, and one after an unbalanced quote, are removed
    /// as they were before quotes were read.
    #[rstest]
    #[case("sh -c \"env API_TOKEN=ab12 impl\"", "ab12")]
    #[case("sh -c \"impl --token ab34\"", "ab34")]
    #[case("impl O'Brien --password ab56", "ab56")]
    fn short_and_unbalanced_secrets_are_still_removed(#[case] command: &str, #[case] secret: &str) {
        let shown = redact_command(command);
        assert!(!shown.contains(secret), "{shown}");
        assert!(shown.contains(REDACTED), "{shown}");
    }

    /// A quoted value with spaces is one word, registered and removed whole.
    #[rstest]
    #[case(
        "env API_TOKEN='tok quoted qsecret-1' run",
        "qsecret-1",
        "tok quoted qsecret-1"
    )]
    #[case(
        "impl --password \"two words qsecret-2\" x",
        "qsecret-2",
        "two words qsecret-2"
    )]
    #[case("impl --api-key=a\\ b-qsecret-3 x", "qsecret-3", "a b-qsecret-3")]
    #[case(
        "sh -c \"env API_TOKEN='quoted qsecret-4' impl\" x",
        "qsecret-4",
        "quoted qsecret-4"
    )]
    fn a_quoted_secret_with_spaces_is_removed_whole(
        #[case] command: &str,
        #[case] tail: &str,
        #[case] whole: &str,
    ) {
        let shown = redact_command(command);
        assert!(!shown.contains(tail), "{shown}");
        assert!(
            !shown.contains("quoted") && !shown.contains("words"),
            "{shown}"
        );
        assert_eq!(
            scrub(&format!("later: {whole}")),
            format!("later: {REDACTED}")
        );
        assert!(shown.ends_with(" x") || shown.ends_with(" run"), "{shown}");
    }

    #[test]
    fn a_plain_word_password_is_removed_where_it_stands_as_a_password() {
        let shown = redact_store_url("postgres://wombat:quokkas@127.0.0.1:5432/test");
        assert_eq!(shown, "postgres://wombat:[redacted]@127.0.0.1:5432/test");
        // An echo of the URL or a key/value form loses it; the word in prose stays.
        let echoed = scrub("connect postgres://wombat:quokkas@h/db password=quokkas; quokkas kind");
        assert!(!echoed.contains(":quokkas@"), "{echoed}");
        assert!(!echoed.contains("password=quokkas"), "{echoed}");
        assert!(echoed.ends_with("; quokkas kind"), "{echoed}");
        // A passphrase of letters is not a plain word: scrubbed everywhere.
        redact_store_url("postgres://wombat:correcthorsebattery@h/db");
        assert_eq!(scrub("said correcthorsebattery"), "said [redacted]");
        // A password with anything but lowercase letters is scrubbed everywhere.
        redact_store_url("postgres://wombat:Quokka5@h/db");
        assert_eq!(scrub("said Quokka5"), "said [redacted]");
    }

    #[rstest]
    #[case(
        "postgresql://postgres:pw-s3cret-1@127.0.0.1:5432/test",
        "postgresql://postgres:[redacted]@127.0.0.1:5432/test",
        "pw-s3cret-1"
    )]
    #[case(
        "postgresql://u@h/db?sslmode=disable&password=pw-s3cret-2",
        "postgresql://u@h/db?sslmode=disable&password=[redacted]",
        "pw-s3cret-2"
    )]
    #[case(
        "host=127.0.0.1 user=postgres password=pw-s3cret-3 dbname=test",
        "host=127.0.0.1 user=postgres password=[redacted] dbname=test",
        "pw-s3cret-3"
    )]
    #[case(
        "postgresql://postgres@127.0.0.1/test",
        "postgresql://postgres@127.0.0.1/test",
        ""
    )]
    fn a_store_url_loses_its_password(
        #[case] url: &str,
        #[case] shown: &str,
        #[case] secret: &str,
    ) {
        assert_eq!(redact_store_url(url), shown);
        if !secret.is_empty() {
            assert_eq!(scrub(&format!("x {secret} y")), "x [redacted] y");
        }
    }

    #[rstest]
    #[case(
        "API_TOKEN=tok-aaaa-1111 python3 sut.py",
        "API_TOKEN=[redacted] python3 sut.py"
    )]
    #[case(
        "./sut --token tok-bbbb-2222 --verbose",
        "./sut --token [redacted] --verbose"
    )]
    #[case("./sut --api-key=tok-cccc-3333 -v", "./sut --api-key=[redacted] -v")]
    #[case(
        "./sut --db postgresql://u:tok-dddd-4444@h/db",
        "./sut --db postgresql://u:[redacted]@h/db"
    )]
    // Not a credential: kept as written.
    #[case(
        "python3 examples/python/sut.py --mode safe",
        "python3 examples/python/sut.py --mode safe"
    )]
    #[case("env MONKEY=1 ./sut", "env MONKEY=1 ./sut")]
    fn a_command_loses_its_credentials(#[case] command: &str, #[case] shown: &str) {
        assert_eq!(redact_command(command), shown);
    }

    #[test]
    fn scrubbing_reaches_every_string_value_and_escaped_forms() {
        register("sec\"ret-value-9");
        // Every string value, in its escaped form inside JSON; member names are the report's
        // own words and stay.
        let v = serde_json::json!({"a": ["x sec\"ret-value-9 y"], "sec\"ret-value-9": 1});
        let v = scrubbed(v).map_err(|(_, e)| e).expect("scrubbed");
        assert_eq!(
            v,
            serde_json::json!({"a": ["x [redacted] y"], "sec\"ret-value-9": 1})
        );
        let text = serde_json::to_string(&serde_json::json!("sec\"ret-value-9")).expect("json");
        assert!(!scrub(&text).contains("ret-value-9"));
        // Short values are never registered (they would mangle everything).
        register("abc");
        assert_eq!(scrub("abc"), "abc");
    }

    /// Two secrets that overlap in a text are removed whole, whichever level each is in: the
    /// second is registered after a search built the first one's level.
    #[test]
    fn overlapping_secrets_in_different_levels_are_removed_whole() {
        register("ovl-abcdef-1");
        assert_eq!(scrub("x ovl-abcdef-1 y"), "x [redacted] y");
        register("abcdef-1-tail-ovl");
        assert_eq!(scrub("x ovl-abcdef-1-tail-ovl y"), "x [redacted] y");
        // Adjacent, not overlapping: each is its own stretch.
        assert_eq!(
            scrub("ovl-abcdef-1abcdef-1-tail-ovl"),
            "[redacted][redacted]"
        );
    }

    /// Registrations interleaved with searches (as an exploration makes them) keep the matchers
    /// few: at most one level per bit of the pattern count, and every secret is still found.
    #[test]
    fn thousands_of_registrations_keep_few_levels_and_find_every_secret() {
        let secrets: Vec<String> = (0..3000).map(|i| format!("lvl-{i:05}-tok")).collect();
        for s in &secrets {
            register(s);
            assert!(holds_secret(s.as_bytes()), "{s}");
        }
        let (levels, patterns) = {
            let r = REGISTRY.lock().expect("registry");
            (
                r.levels.len(),
                r.levels.iter().map(|l| l.patterns.len()).sum::<usize>(),
            )
        };
        // Registrations made while a search runs are compiled together as one level (other tests
        // register at the same time): the merge rule keeps the bound whatever the batches.
        let bits = usize::BITS - patterns.leading_zeros();
        assert!(
            levels as u32 <= bits,
            "{levels} levels for {patterns} patterns"
        );
        let text = secrets.join(" ");
        let scrubbed = scrub(&text);
        assert!(!scrubbed.contains("-tok"), "{}", &scrubbed[..200]);
        assert_eq!(scrubbed.matches(REDACTED).count(), secrets.len());
    }

    proptest::proptest! {
        /// Whatever the secrets and the text around them, nothing registered survives a scrub.
        #[test]
        fn no_registered_secret_survives_a_scrub(
            secrets in proptest::collection::vec("pt-[a-z0-9]{3,12}", 1..8),
            around in proptest::collection::vec("[a-z0-9 -]{0,8}", 1..10),
        ) {
            for s in &secrets {
                register(s);
            }
            let mut text = String::new();
            for (i, a) in around.iter().enumerate() {
                text.push_str(a);
                text.push_str(&secrets[i % secrets.len()]);
            }
            let out = scrub(&text);
            for s in &secrets {
                proptest::prop_assert!(!out.contains(s.as_str()), "{s} in {out}");
            }
        }
    }
}
