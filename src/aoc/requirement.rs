//! The requirement identifiers of the AOC draft (§4.1–4.13). Every refusal and every checker names
//! the one it protects.

use serde::{Deserialize, Serialize};
use std::fmt;

/// AOC-REQ-001 … AOC-REQ-013.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
pub enum Req {
    #[serde(rename = "AOC-REQ-001")]
    R001,
    #[serde(rename = "AOC-REQ-002")]
    R002,
    #[serde(rename = "AOC-REQ-003")]
    R003,
    #[serde(rename = "AOC-REQ-004")]
    R004,
    #[serde(rename = "AOC-REQ-005")]
    R005,
    #[serde(rename = "AOC-REQ-006")]
    R006,
    #[serde(rename = "AOC-REQ-007")]
    R007,
    #[serde(rename = "AOC-REQ-008")]
    R008,
    #[serde(rename = "AOC-REQ-009")]
    R009,
    #[serde(rename = "AOC-REQ-010")]
    R010,
    #[serde(rename = "AOC-REQ-011")]
    R011,
    #[serde(rename = "AOC-REQ-012")]
    R012,
    #[serde(rename = "AOC-REQ-013")]
    R013,
}

impl Req {
    pub const ALL: [Req; 13] = [
        Req::R001,
        Req::R002,
        Req::R003,
        Req::R004,
        Req::R005,
        Req::R006,
        Req::R007,
        Req::R008,
        Req::R009,
        Req::R010,
        Req::R011,
        Req::R012,
        Req::R013,
    ];

    /// `AOC-REQ-00N`.
    pub fn id(self) -> &'static str {
        match self {
            Req::R001 => "AOC-REQ-001",
            Req::R002 => "AOC-REQ-002",
            Req::R003 => "AOC-REQ-003",
            Req::R004 => "AOC-REQ-004",
            Req::R005 => "AOC-REQ-005",
            Req::R006 => "AOC-REQ-006",
            Req::R007 => "AOC-REQ-007",
            Req::R008 => "AOC-REQ-008",
            Req::R009 => "AOC-REQ-009",
            Req::R010 => "AOC-REQ-010",
            Req::R011 => "AOC-REQ-011",
            Req::R012 => "AOC-REQ-012",
            Req::R013 => "AOC-REQ-013",
        }
    }

    /// Parses `AOC-REQ-006` (case-insensitive) or `006`.
    pub fn parse(s: &str) -> Option<Req> {
        let t = s.trim().to_ascii_uppercase();
        let num = t.strip_prefix("AOC-REQ-").unwrap_or(&t);
        Req::ALL
            .into_iter()
            .find(|r| r.id().ends_with(&format!("-{num}")))
    }
}

impl fmt::Display for Req {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_back() {
        for r in Req::ALL {
            assert_eq!(Req::parse(r.id()), Some(r));
        }
        assert_eq!(Req::parse("aoc-req-006"), Some(Req::R006));
        assert_eq!(Req::parse("013"), Some(Req::R013));
        assert_eq!(Req::parse("AOC-REQ-014"), None);
        assert_eq!(
            serde_json::to_string(&Req::R007).expect("json"),
            "\"AOC-REQ-007\""
        );
    }
}
