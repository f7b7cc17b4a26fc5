#!/usr/bin/env python3
"""What `aocheck-action.sh` reads out of an aocheck report folder, for a CI runner.

    aocheck_ci.py annotate OUT   GitHub workflow commands on stdout: one `::error` per failed
                                 case x requirement at its case file and line, `::warning` for a
                                 case aocheck could not decide, `::notice` for a known failure
                                 (listed in the expectations file), an unexpected pass as an
                                 error under --strict (else a warning), and one error per
                                 explore finding when OUT/explore/explore.json is there.
    aocheck_ci.py counts OUT     `pass=N`, `fail=N`, `other=N` from OUT/report.json (nothing
                                 when there is no report).
    aocheck_ci.py escape-data TEXT / escape-property TEXT
                                 TEXT escaped as a workflow command's message / property value.

`report.sarif` is read when present (results: `ruleId`, `level`, `message.text`, the first
location's `artifactLocation.uri` and `region.startLine`, `properties.case`, `suppressions`);
otherwise `report.json` (`cases[]`: `id`, `file`, `verdict`, `failures[]` with `requirement` and
`msg`; the line is 1). A file is named relative to the workspace (`GITHUB_WORKSPACE`, else the
working folder) when it lies inside it, so the annotation lands on the repository's file.

Whatever an implementation said can contain anything: every value is escaped by GitHub's rules
(`%`, CR and LF; in a property also `:` and `,`), other control characters are dropped (a tab
becomes a space), and a message is bounded, so each command is exactly one well-formed line.
Standard library only.
"""

import json
import os
import sys
import urllib.parse

MAX_MESSAGE = 4000
MAX_TITLE = 200


def clean(text, keep_newlines=True):
    """`text` without control characters other than CR and LF (a tab becomes a space)."""
    out = []
    for ch in str(text):
        o = ord(ch)
        if ch in "\r\n" and keep_newlines:
            out.append(ch)
        elif ch == "\t":
            out.append(" ")
        elif o < 0x20 or 0x7F <= o <= 0x9F or ch in "\u2028\u2029":
            continue
        elif 0xD800 <= o <= 0xDFFF:
            # A lone surrogate (JSON allows one): not encodable, so not printable.
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def escape_data(text):
    """A workflow command's message: `%`, CR and LF escaped, other controls dropped."""
    s = clean(text)
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text):
    """A workflow command's property value: as a message, and `:` and `,` escaped too."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def bounded(text, n):
    s = str(text)
    return s if len(s) <= n else s[: n - 1] + "\u2026"


def command(kind, message, file=None, line=None, title=None):
    """One workflow command line, e.g. `::error file=F,line=N,title=T::message`."""
    props = []
    if file:
        props.append("file=" + escape_property(file))
        props.append("line=" + str(line if isinstance(line, int) and line >= 1 else 1))
    if title:
        props.append("title=" + escape_property(bounded(clean(title, False), MAX_TITLE)))
    head = "::" + kind + (" " + ",".join(props) if props else "")
    return head + "::" + escape_data(bounded(message, MAX_MESSAGE))


def workspace_path(path):
    """`path` relative to the workspace when it lies inside it, else as given."""
    if not path:
        return path
    base = os.environ.get("GITHUB_WORKSPACE") or os.getcwd()
    full = os.path.join(os.getcwd(), path)
    try:
        rel = os.path.relpath(os.path.realpath(full), os.path.realpath(base))
    except ValueError:
        return path
    return path if rel == ".." or rel.startswith(".." + os.sep) else rel.replace(os.sep, "/")


def uri_path(uri):
    """A SARIF artifact URI as a path: `file:` URIs and percent-escapes decoded."""
    if not isinstance(uri, str) or not uri:
        return None
    if uri.startswith("file:"):
        parsed = urllib.parse.urlparse(uri)
        return urllib.parse.unquote(parsed.path)
    return urllib.parse.unquote(uri)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def from_sarif(log):
    """(kind, file, line, title, message) of each SARIF result worth an annotation."""
    rows = []
    for run in log.get("runs") or []:
        for r in run.get("results") or []:
            if not isinstance(r, dict):
                continue
            level = r.get("level", "warning")
            if level not in ("error", "warning"):
                continue
            props = r.get("properties") or {}
            rule = r.get("ruleId") or ""
            case = props.get("case")
            if not case:
                fp = (r.get("partialFingerprints") or {}).get("aocheck/case-requirement", "")
                case = fp.split("/", 1)[0] if "/" in fp else ""
            locs = r.get("locations") or [{}]
            phys = (locs[0] or {}).get("physicalLocation") or {}
            uri = (phys.get("artifactLocation") or {}).get("uri")
            line = (phys.get("region") or {}).get("startLine", 1)
            text = (r.get("message") or {}).get("text", "")
            kind = level
            title = f"{case} {rule}".strip()
            if r.get("suppressions"):
                # Listed in the expectations file: a known failure, not one of this change.
                kind = "notice"
                title = f"{title} (known failure)"
            rows.append((kind, workspace_path(uri_path(uri)), line, title, text))
    return rows


def from_json(report):
    """The same rows from report.json, at line 1 of each case file."""
    rows = []
    expected = set(((report.get("expectations") or {}).get("expected_failures")) or [])
    for c in report.get("cases") or []:
        cid = c.get("id", "")
        verdict = c.get("verdict", "")
        file = workspace_path(c.get("file") or "")
        if verdict == "fail":
            by_req = {}
            for f in c.get("failures") or []:
                by_req.setdefault(f.get("requirement", ""), []).append(str(f.get("msg", "")))
            if not by_req:
                by_req[""] = ["the case failed"]
            for req, msgs in by_req.items():
                known = cid in expected
                kind = "notice" if known else "error"
                title = f"{cid} {req}".strip() + (" (known failure)" if known else "")
                rows.append((kind, file, 1, title, f"{cid}: " + "; ".join(msgs)))
        elif verdict in ("harness_error", "missing_knowledge"):
            why = c.get("harness") or "; ".join(c.get("undecided") or []) or verdict
            rows.append(("warning", file, 1, f"{cid} {verdict}", f"{cid} {verdict}: {why}"))
    return rows


def expectation_rows(report):
    """Unexpected passes: an entry of the expectations file that covered no failure."""
    x = (report or {}).get("expectations") or {}
    kind = "error" if x.get("strict") else "warning"
    rows = []
    for entry in x.get("unexpected_passes") or []:
        rows.append(
            (
                kind,
                workspace_path(x.get("file") or ""),
                1,
                "aocheck unexpected pass",
                f"{entry} is listed as a known failure but did not fail: "
                "remove the entry from the expectations file",
            )
        )
    return rows


def explore_rows(out):
    x = load(os.path.join(out, "explore", "explore.json"))
    rows = []
    for f in (x or {}).get("findings") or []:
        key = f.get("key") or {}
        title = f"aocheck explore [{key.get('checker', '')}] {key.get('requirement', '')}"
        text = f.get("shrunk_line") or f.get("line") or "a finding"
        # `case_file` is named inside the exploration's `found/` folder.
        name = f.get("case_file") or ""
        file = os.path.join(out, "explore", "found", name) if name else ""
        rows.append(("error", workspace_path(file), 1, title, text))
    return rows


def annotate(out):
    report = load(os.path.join(out, "report.json"))
    log = load(os.path.join(out, "report.sarif"))
    if isinstance(log, dict) and isinstance(log.get("runs"), list):
        rows = from_sarif(log)
    elif isinstance(report, dict):
        rows = from_json(report)
    else:
        rows = []
    rows += expectation_rows(report if isinstance(report, dict) else None)
    rows += explore_rows(out)
    for kind, file, line, title, text in rows:
        print(command(kind, text, file=file, line=line, title=title))


def counts(out):
    report = load(os.path.join(out, "report.json"))
    if not isinstance(report, dict):
        return
    s = report.get("summary") or {}
    for k in ("pass", "fail", "other"):
        v = s.get(k)
        print(f"{k}={v if isinstance(v, int) else ''}")


def main(argv):
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(encoding="utf-8", errors="replace")
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 3
    what, arg = argv[1], argv[2]
    if what == "annotate":
        annotate(arg)
    elif what == "counts":
        counts(arg)
    elif what == "escape-data":
        print(escape_data(arg))
    elif what == "escape-property":
        print(escape_property(arg))
    else:
        sys.stderr.write(__doc__)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
