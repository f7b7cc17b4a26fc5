//! The pieces of a step graph's rulebook that Hermes's run scripts (`hermes::script`) and seed
//! 002's workflow designs share: a whole number that refuses what a lax cast would round, the
//! cycle an `after` relation holds (its path, for the defect), and the stable topological order
//! a plan runs in.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A whole number, refusing `2.5` and `true` (which a lax cast would take as 2 and 1).
pub fn whole(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

/// An item's `after`: the strings its list holds (nothing where there is none; what is not a
/// string is the validator's to refuse).
pub fn after(item: &Value) -> Vec<String> {
    item.get("after")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The graph's list under `key` (`steps`, `nodes`): `Err` with what is wrong when it is not a
/// non-empty list of at most `max` items (the one shape failure that short-circuits a validator).
pub fn list_of<'a>(graph: &'a Value, key: &str, max: usize) -> Result<&'a Vec<Value>, String> {
    let items = match graph.get(key) {
        Some(Value::Array(n)) if graph.is_object() => n,
        _ => return Err(format!("an object with a non-empty `{key}` list is needed")),
    };
    if items.is_empty() {
        return Err(format!("the `{key}` list is empty"));
    }
    if items.len() > max {
        return Err(format!("at most {max} {key}, got {}", items.len()));
    }
    Ok(items)
}

/// Each item's `id` (a non-empty string), or its place in the list (`<list>[i]`) where it has
/// none, and the defects as `(name, message)`: a duplicate id, or an id missing. `what` names
/// an item in the messages ("step", "node").
pub fn identities(items: &[Value], list: &str, what: &str) -> (Vec<String>, Vec<(String, String)>) {
    let mut ids = Vec::with_capacity(items.len());
    let mut defects = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        match item.get("id") {
            Some(Value::String(id)) if !id.trim().is_empty() => {
                if !seen.insert(id.clone()) {
                    defects.push((id.clone(), format!("duplicate {what} id")));
                }
                ids.push(id.clone());
            }
            _ => {
                let place = format!("{list}[{i}]");
                defects.push((
                    place.clone(),
                    format!("every {what} needs a unique, non-empty string id"),
                ));
                ids.push(place);
            }
        }
    }
    (ids, defects)
}

/// The first cycle a depth-first walk over `edges` (each node's `after` list) meets, as the
/// path `a -> b -> … -> a`; `None` when the relation is acyclic. Nodes are walked in key order,
/// so the same graph always reports the same cycle.
pub fn cycle(edges: &BTreeMap<&str, Vec<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    fn dfs<'a>(
        n: &'a str,
        edges: &'a BTreeMap<&'a str, Vec<String>>,
        marks: &mut HashMap<&'a str, Mark>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        marks.insert(n, Mark::Active);
        path.push(n);
        for m in edges.get(n).into_iter().flatten() {
            let m = m.as_str();
            match marks.get(m).copied() {
                Some(Mark::Active) => {
                    let start = path.iter().position(|x| *x == m).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        path[start..].iter().map(|s| s.to_string()).collect();
                    cycle.push(m.to_string());
                    return Some(cycle);
                }
                Some(Mark::New) => {
                    if let Some((k, _)) = edges.get_key_value(m)
                        && let Some(c) = dfs(k, edges, marks, path)
                    {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        marks.insert(n, Mark::Done);
        None
    }
    let mut marks: HashMap<&str, Mark> = edges.keys().map(|k| (*k, Mark::New)).collect();
    for k in edges.keys().copied() {
        if marks.get(k) == Some(&Mark::New)
            && let Some(c) = dfs(k, edges, &mut marks, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

/// A stable topological order of `steps` (each its id and the ids it comes after): Kahn's
/// algorithm always taking the earliest ready step in the given order, as indices into
/// `steps`. An `after` that names no step of `steps` is taken as met (the caller drops such
/// steps, a trigger or a note, on purpose). `None` when no order exists (a cycle).
pub fn stable_order(steps: &[(&str, &[String])]) -> Option<Vec<usize>> {
    let known: BTreeSet<&str> = steps.iter().map(|(id, _)| *id).collect();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut order = Vec::with_capacity(steps.len());
    while order.len() < steps.len() {
        let next = steps.iter().enumerate().find(|(i, (_, after))| {
            !order.contains(i)
                && after
                    .iter()
                    .all(|a| done.contains(a.as_str()) || !known.contains(a.as_str()))
        })?;
        done.insert(next.1.0);
        order.push(next.0);
    }
    Some(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_whole_number_refuses_what_a_cast_would_round() {
        assert_eq!(whole(&json!(3)), Some(3));
        for v in [json!(2.5), json!(true), json!("2"), json!(null)] {
            assert_eq!(whole(&v), None, "{v}");
        }
    }

    #[test]
    fn a_cycle_is_reported_with_its_path_and_an_order_is_stable() {
        let after = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut e: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        e.insert("a", after(&["c"]));
        e.insert("b", after(&["a"]));
        e.insert("c", after(&["b"]));
        assert_eq!(
            cycle(&e),
            Some(vec!["a".into(), "c".into(), "b".into(), "a".into()])
        );
        e.insert("a", Vec::new());
        assert_eq!(cycle(&e), None);
        // Ties keep the given order; an `after` naming a step not in the list is met.
        let (x, y, z) = (after(&[]), after(&["gone"]), after(&["p"]));
        let steps: Vec<(&str, &[String])> = vec![("q", &z), ("p", &x), ("r", &y)];
        assert_eq!(stable_order(&steps), Some(vec![1, 0, 2]));
        let (l, m) = (after(&["m"]), after(&["l"]));
        assert_eq!(stable_order(&[("l", &l[..]), ("m", &m[..])]), None);
    }
}
