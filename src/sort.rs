//! One stable sort for the whole crate.
//!
//! std's `sort` is compiled anew for every element type and comparison, 4-7 KB of machine
//! code each; a dozen call sites cost more than any other utility in the binary. Here every
//! call site sorts indices under a `dyn` comparison, so the sort itself is compiled once and
//! each site adds only a small permutation. What is sorted here is short (names, files,
//! errors) and sorted rarely; an indirect call per comparison does not show.

use std::cmp::Ordering;

/// Sorts `v` by `cmp`, stably (equal elements keep their order).
pub fn sort_by<T>(v: &mut Vec<T>, cmp: impl Fn(&T, &T) -> Ordering) {
    if v.len() < 2 {
        return;
    }
    let order = order(v.len(), &|a, b| cmp(&v[a], &v[b]));
    let mut slots: Vec<Option<T>> = v.drain(..).map(Some).collect();
    v.extend(order.into_iter().filter_map(|i| slots[i].take()));
}

/// Sorts `v` in ascending order, stably.
pub fn sort<T: Ord>(v: &mut Vec<T>) {
    sort_by(v, T::cmp);
}

/// Sorts `v` by the key `f` gives, stably.
pub fn sort_by_key<T, K: Ord>(v: &mut Vec<T>, f: impl Fn(&T) -> K) {
    sort_by(v, |a, b| f(a).cmp(&f(b)));
}

/// The indices `0..n` in the order `cmp` gives them: the one compiled sort.
fn order(n: usize, cmp: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| cmp(a, b));
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_ascending() {
        let mut v = vec!["c", "a", "b", "a"];
        sort(&mut v);
        assert_eq!(v, ["a", "a", "b", "c"]);
    }

    #[test]
    fn equal_keys_keep_their_order() {
        let mut v = vec![(2, "x"), (1, "y"), (2, "z"), (1, "w")];
        sort_by_key(&mut v, |p| p.0);
        assert_eq!(v, [(1, "y"), (1, "w"), (2, "x"), (2, "z")]);
    }

    #[test]
    fn a_reversed_comparison_sorts_descending() {
        let mut v = vec![String::from("a"), "c".into(), "b".into()];
        sort_by(&mut v, |a, b| b.cmp(a));
        assert_eq!(v, ["c", "b", "a"]);
    }

    #[test]
    fn short_lists_are_left_alone() {
        let mut none: Vec<u8> = vec![];
        sort(&mut none);
        let mut one = vec![7];
        sort(&mut one);
        assert_eq!(one, [7]);
    }
}
